"""The conversations app: workspaces, conversations, turns and their event log."""

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

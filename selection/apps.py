"""The selection app: questions an agent asks mid-turn, and the answers people give."""

from django.apps import AppConfig


class SelectionConfig(AppConfig):
    name = "selection"
    verbose_name = "Selections"

"""The selection app: questions an agent asks mid-turn, and the answers people give."""

from django.apps import AppConfig


class SelectionConfig(AppConfig):
    name = "selection"
    verbose_name = "Questions"

    def ready(self):
        # Turns reach their questions through this hook: conversations never imports selection.
        from conversations import hooks

        from .hooks import TurnQuestions

        hooks.questions.register(TurnQuestions())

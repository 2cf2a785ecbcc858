"""The selection app: questions an agent asks mid-turn, and the answers people give."""

from django.apps import AppConfig


class SelectionConfig(AppConfig):
    name = "selection"
    verbose_name = "Questions"

    def ready(self):
        # Turns reach their questions through this seam: conversations never imports selection.
        from conversations import seams

        from .hooks import TurnQuestions

        seams.questions.register(TurnQuestions())

"""The reach app: questions reach people where they work (email, Slack, webhooks), and are
answered there."""

from django.apps import AppConfig


class ReachConfig(AppConfig):
    name = "reach"
    verbose_name = "Reaching people"

    def ready(self):
        # The selection app announces its questions' news through a hook: it never imports this
        # one. The sender runs on the server loop of every process (see reach.sender).
        from core.process import server_loop
        from selection import announcing

        from . import metrics  # noqa: F401 (its collector registered)
        from .outbox import Outbox
        from .sender import sender

        announcing.listen(Outbox())
        server_loop.on_bind(sender.start)
        server_loop.on_shutdown(sender.stop)

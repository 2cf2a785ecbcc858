"""The conversations app: workspaces, conversations, turns and their event log."""

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self):
        # The turn runtime sits above the services that launch and notify turns: it is
        # plugged in here rather than imported by them (see conversations.seams).
        from core.process import server_loop

        from . import revocation, seams
        from .consumers import close_all_sockets
        from .runtime.runner import turn_runner
        from .runtime.upkeep import Upkeep

        seams.turns.register(turn_runner)
        revocation.connect_signals()
        server_loop.on_bind(Upkeep(turn_runner).start)
        # At SIGTERM: turns first (their last events reach the sockets), then the sockets.
        server_loop.on_shutdown(turn_runner.hand_back_all)
        server_loop.on_shutdown(close_all_sockets)

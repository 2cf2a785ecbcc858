"""The conversations app: workspaces, conversations, turns and their event log."""

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self):
        # The turn runtime sits above the services that launch and notify turns: it is
        # plugged in here rather than imported by them (see conversations.hooks).
        from core.process import server_loop

        from . import hooks, revocation
        from .agents import agents
        from .consumers import close_all_sockets
        from .runtime.runner import turn_runner
        from .runtime.upkeep import Upkeep
        from .sse import end_all_tails

        hooks.turns.register(turn_runner)
        # Every configured agent resolved now: a wrong path stops the server at its start,
        # naming the setting, rather than failing a turn later.
        agents.load()
        revocation.connect_signals()
        server_loop.on_bind(Upkeep(turn_runner).start)
        # At SIGTERM: turns first (their last events reach the sockets), then the sockets and
        # the tails, whose clients reconnect elsewhere.
        server_loop.on_shutdown(turn_runner.hand_back_all)
        server_loop.on_shutdown(close_all_sockets)
        server_loop.on_shutdown(end_all_tails)

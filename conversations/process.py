"""The per-process runtime of a Parley server: its id, its event loop, and the periodic upkeep
that renews the leases of its turns and watchers, honours Stop requests, and ends turns (and
forgets watchers) whose process died."""

import asyncio
import logging
import os
import secrets
import socket
import threading

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

logger = logging.getLogger(__name__)

_identity: tuple[int, str] | None = None


def process_id() -> str:
    """A name for this server process, unique across hosts and restarts."""
    global _identity
    if _identity is None or _identity[0] != os.getpid():
        _identity = (os.getpid(), f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}")
    return _identity[1]


def layer_is_shared() -> bool:
    """Whether other processes can be reached over the channel layer."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


class Runtime:
    """Holds the server's event loop so that sync code in request threads can reach it."""

    def __init__(self):
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._upkeep: asyncio.Task | None = None

    def bind(self) -> None:
        """Adopt the running loop as the server loop and start the upkeep (idempotent)."""
        loop = asyncio.get_running_loop()
        if self.loop is loop:
            return
        self.loop = loop
        self._loop_thread = threading.get_ident()
        self._upkeep = loop.create_task(self._run_upkeep(), name="parley-upkeep")

    def in_loop_thread(self) -> bool:
        return self._loop_thread == threading.get_ident()

    def call_soon(self, fn, *args) -> bool:
        """Run ``fn(*args)`` on the server loop, from any thread. False when there is no loop."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return False
        if self.in_loop_thread():
            loop.call_soon(fn, *args)
        else:
            loop.call_soon_threadsafe(fn, *args)
        return True

    async def _run_upkeep(self) -> None:
        from . import services
        from .dbthreads import run_db
        from .runner import turn_runner

        interval = max(1.0, settings.PARLEY_TURN_LEASE_SECONDS / 3)
        # With a process-local layer no other process can be running a turn, so turns that are
        # active but not ours were left by a server that stopped: end them at once.
        reap_foreign = not layer_is_shared()
        while True:
            try:
                cancel_ids = await run_db(
                    services.turns_upkeep,
                    process=process_id(),
                    local_turn_ids=turn_runner.local_turn_ids(),
                    reap_foreign=reap_foreign,
                )
                for turn_id in cancel_ids:
                    turn_runner.cancel_local(turn_id)
                await run_db(
                    services.watchers_upkeep, process=process_id(), reap_foreign=reap_foreign
                )
            except Exception:
                logger.exception("Turn upkeep failed; trying again in %.0f s", interval)
            reap_foreign = False
            await asyncio.sleep(interval)


runtime = Runtime()

"""This server process: its id, its event loop (reachable from request and database threads),
and whether other processes share its channel layer."""

import asyncio
import logging
import os
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.core.exceptions import RequestAborted

from core.metrics import LAYER_ERRORS

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


async def receive_forever(layer, channel: str, handle: Callable[[dict], None]) -> None:
    """Hand every message arriving on a channel-layer ``channel`` to ``handle``, until
    cancelled. A failed receive (the layer's server away) is logged and tried again."""
    while True:
        try:
            message = await layer.receive(channel)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            LAYER_ERRORS.labels("receive").inc()
            logger.warning("Receiving on %s failed (%r); retrying", channel, exc)
            await asyncio.sleep(0.5)
            continue
        handle(message)


class ServerLoop:
    """Holds the server's event loop so that sync code in other threads can reach it, runs what
    was asked to start with it (process upkeep) once it is known, and knows whether the process
    has begun to shut down (readiness turns false then)."""

    def __init__(self):
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._on_bind: list[Callable[[], None]] = []
        self._on_shutdown: list[Callable[[], Awaitable[None]]] = []
        self.draining = False

    def on_bind(self, start: Callable[[], None]) -> None:
        """Call ``start()`` on the server loop once it is bound (registered at app start)."""
        self._on_bind.append(start)

    def on_shutdown(self, stop: Callable[[], Awaitable[None]]) -> None:
        """Await ``stop()`` on the server loop when the process is told to stop (SIGTERM)."""
        self._on_shutdown.append(stop)

    async def shut_down(self, *, serving: bool = True) -> None:
        """Begin to shut down, and run what was registered for it (hand turns back, close
        sockets), each in turn; one that fails does not keep the others from running.
        ``serving``: whether this process served connections (a server's does; a command that
        ran turns in its own process stops without saying it no longer takes any)."""
        self.begin_shutdown(serving=serving)
        for stop in self._on_shutdown:
            try:
                await stop()
            except Exception:
                logger.exception("Shutting down: %s failed", getattr(stop, "__qualname__", stop))

    def bind(self) -> None:
        """Adopt the running loop as the server loop (idempotent)."""
        loop = asyncio.get_running_loop()
        if self.loop is loop:
            return
        self.loop = loop
        self._loop_thread = threading.get_ident()
        loop.set_exception_handler(_unless_a_dropped_request)
        for start in self._on_bind:
            start()

    def begin_shutdown(self, *, serving: bool = True) -> None:
        """Mark the process as shutting down (idempotent): it goes on serving what it has while
        its readiness tells the load balancer to send it nothing new (logged if ``serving``)."""
        if not self.draining:
            self.draining = True
            if serving:
                logger.info("Shutting down: no longer ready for new connections")

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


def _unless_a_dropped_request(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """The loop's handler of what no one handled, but for a request dropped on purpose: Django's
    ASGI handler, cancelled with a request in flight (a stopping server drops it), leaves its
    disconnect listener's ``RequestAborted`` unretrieved, which asyncio would log as an error."""
    if isinstance(context.get("exception"), RequestAborted):
        return
    loop.default_exception_handler(context)


server_loop = ServerLoop()

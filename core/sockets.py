"""What every socket of Parley's shares: each frame through the decoding gate once, answered
with ``ws.ack`` or ``ws.error`` (a handler's own bug too, as ``internal``, the socket left
open), nothing sent to a client that has gone, the socket's cleanup run however its consumer
ends (a close, a crash, a client gone mid-handshake, a cancelled task), and its place among its
person's open sockets (4429 past their limit); and the router that refuses a socket to a path no
route serves."""

import asyncio
import json
import logging

from autobahn.exception import Disconnected
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import URLRouter
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from twisted.internet import tcp

from core import slots
from core.auth import authenticate
from core.dbthreads import run_db
from core.decoding import decode_json
from core.errors import ApplicationError, too_many
from core.streaming import Producer

logger = logging.getLogger(__name__)

# A server error: the socket cannot go on (a bug, logged with its traceback).
CLOSE_INTERNAL_ERROR = 1011
# The person has as many sockets open as they may (PARLEY_MAX_SOCKETS_PER_PERSON): close one,
# or try again later.
CLOSE_TOO_MANY = 4429
MAX_REF_CHARS = 100


class GuardedConsumer(AsyncWebsocketConsumer):
    """A socket consumer whose frames, failures and cleanup are taken care of.

    Subclasses give ``frame_handlers`` (a frame's type → an async method taking the checked
    frame and returning what its ``ws.ack`` carries), ``frame_fields`` (a frame's type → its
    field checks, see ``check_frame``), and ``clean_up()``, which releases what the socket
    holds; work whose result ``clean_up`` must release is awaited through ``settle``.
    """

    frame_handlers: dict = {}
    frame_fields: dict = {}

    # Whether connect() reads the socket's credential itself (core.auth.authenticate, in the
    # same trip to the database threads as its own reads); if not, it is read before connect().
    authenticates_in_connect = False

    _settling: list | None = None
    _cleaning: asyncio.Task | None = None
    _slot: slots.Slot | None = None

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, _ignoring_gone_clients(send))
        finally:
            await self._clean_up_once()

    async def websocket_connect(self, message):
        if not self.authenticates_in_connect:
            await run_db(authenticate, self.scope)
        await super().websocket_connect(message)

    async def dispatch(self, message):
        # Channels' own dispatch first closes the stale database connections of a thread it
        # hops to (one thread for the whole process) before every message: a socket's connect,
        # each frame a client sends, its disconnect. Parley's sockets reach the database only
        # through core.dbthreads, whose threads look after their own connections, so
        # the handler is called straight away.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        try:
            await handler(message)
        except StopConsumer:
            raise
        except Exception:
            # A bug: logged with its traceback, and the consumer lives on (a failed connect
            # closes its socket, which could not work).
            logger.exception("Socket %s failed on %s", self.scope.get("path"), message["type"])
            if message["type"] == "websocket.connect":
                await self.close(code=CLOSE_INTERNAL_ERROR)

    async def disconnect(self, code):
        await self._clean_up_once()

    async def clean_up(self) -> None:
        """Release what the socket holds (called once, however the consumer ends)."""

    async def settle(self, awaitable):
        """Await work that takes something ``clean_up`` releases (a subscription, a row),
        shielded: if the consumer is cancelled meanwhile, the work still completes and its
        result is still released."""
        task = asyncio.ensure_future(awaitable)
        if self._settling is None:
            self._settling = []
        self._settling.append(task)
        result = await asyncio.shield(task)
        # Settled, its result in hand: not kept for as long as the socket is open.
        self._settling.remove(task)
        return result

    async def hold_slot(self, user) -> bool:
        """Count this socket among its person's open sockets (over every process, see
        core.slots), given back however the socket ends. Past PARLEY_MAX_SOCKETS_PER_PERSON the
        socket gets a ``ws.error`` (``too_many_sockets``) and is closed with 4429: False."""

        async def take():
            self._slot = await slots.acquire(slots.SOCKETS, user.pk)

        await self.settle(take())
        if self._slot is not None:
            return True
        error = too_many(
            "too_many_sockets",
            f"You have {slots.limit(slots.SOCKETS)} sockets open, as many as you may; "
            "close one first.",
            retry_after=slots.RETRY_AFTER_SECONDS,
        )
        await self.send_json({"type": "ws.error", "ref": None, **error.as_dict()})
        await self.close(code=CLOSE_TOO_MANY)
        return False

    async def _clean_up_once(self) -> None:
        if self._cleaning is None:
            self._cleaning = asyncio.ensure_future(self._clean_up_when_settled())
        # Shielded: a consumer cancelled again while it cleans up still finishes cleaning.
        await asyncio.shield(self._cleaning)

    async def _clean_up_when_settled(self) -> None:
        if self._settling:
            await asyncio.wait(self._settling)
            for task in self._settling:
                if not task.cancelled():
                    # Marked as seen: a failure was raised in connect, or is moot once the
                    # consumer was cancelled (nothing was taken, nothing to release).
                    task.exception()
        try:
            await self.clean_up()
        except Exception:
            logger.exception("Socket %s could not clean up", self.scope.get("path"))
        if self._slot is not None:
            await self._slot.release()

    # Frames

    async def receive(self, text_data=None, bytes_data=None):
        ref = None
        try:
            frame = self.decode_frame(text_data, bytes_data)
            ref = frame.get("ref")
            frame = self.check_frame(frame)
            reply = await self.frame_handlers[frame["type"]](self, frame)
        except ApplicationError as error:
            await self.send_json({"type": "ws.error", "ref": ref, **error.as_dict()})
            return
        except Exception:
            logger.exception("Socket %s failed on a frame", self.scope.get("path"))
            error = ApplicationError(
                "internal", "The server failed to handle this frame; the socket stays open."
            )
            await self.send_json({"type": "ws.error", "ref": ref, **error.as_dict()})
            return
        await self.send_json({"type": "ws.ack", "ref": ref, **reply})

    def decode_frame(self, text_data, bytes_data) -> dict:
        """The frame decoded by the gate: an object with a string ``type`` and, if any, a
        short ``ref``; ApplicationError otherwise."""
        if text_data is None:
            raise ApplicationError("invalid_frame", "Frames must be JSON text, not binary.")
        limit = settings.PARLEY_WS_MAX_FRAME_BYTES
        if len(text_data) > limit:
            raise ApplicationError("frame_too_large", f"Frames may be at most {limit} bytes.")
        try:
            frame = decode_json(text_data, limit=limit, what="The frame")
        except ApplicationError as error:
            if error.code == "too_large":
                raise ApplicationError(
                    "frame_too_large", f"Frames may be at most {limit} bytes."
                ) from None
            raise
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            raise ApplicationError(
                "invalid_frame", "A frame is a JSON object with a string 'type'."
            )
        ref = frame.get("ref")
        if ref is not None and not (
            isinstance(ref, str | int)
            and not isinstance(ref, bool)
            and len(str(ref)) <= MAX_REF_CHARS
        ):
            raise ApplicationError(
                "invalid_frame",
                f"'ref' must be a string or a whole number of at most {MAX_REF_CHARS} characters.",
            )
        return frame

    def check_frame(self, frame: dict) -> dict:
        """The frame's type and the fields its type reads, checked (a missing optional field
        takes its default; fields it does not read are left out); ApplicationError otherwise."""
        kind = frame["type"]
        if kind not in self.frame_handlers:
            known = ", ".join(sorted(self.frame_handlers)) or "none"
            raise ApplicationError(
                "unknown_type", f"Unknown frame type '{kind[:50]}'; known: {known}."
            )
        checked = {"type": kind, "ref": frame.get("ref")}
        for name, check in self.frame_fields.get(kind, {}).items():
            value = check(name, frame.get(name, MISSING))
            if value is not MISSING:
                checked[name] = value
        return checked

    async def send_json(self, payload: dict) -> None:
        await self.send(text_data=json.dumps(payload, separators=(",", ":")))


def _ignoring_gone_clients(send):
    """The server's send, quiet once the client has gone: its close frame came in, and its
    disconnect is on the way (and ends the consumer). Daphne's WebSocket library raises
    Disconnected for anything sent meanwhile; there is no one to tell."""

    async def send_to_client(message):
        try:
            await send(message)
        except Disconnected:
            pass

    return send_to_client


class SocketRouter(URLRouter):
    """Channels' URLRouter, except that a socket to a path no route serves (``/ws/nope/``,
    ``/``) is refused at its handshake, with 403 (the one refusal Daphne sends), where Channels'
    router would raise, which Daphne answers with a 500 and logs as a server error: a path is
    the client's to get wrong, not the server's (Daphne's access log shows the refusal).

    The route's match is added to the scope, not to a copy of it (see core.auth's middleware:
    the connection's scope is its own, and a copy would live as long as the socket)."""

    async def __call__(self, scope, receive, send):
        if "path_remaining" in scope:
            return await super().__call__(scope, receive, send)  # nested: Channels' own
        path, root = scope.get("path", ""), scope.get("root_path", "")
        if not root or path.startswith(root):
            path = path[len(root) :].lstrip("/")
            for route in self.routes:
                match = route.pattern.match(path)
                if match:
                    remaining, args, kwargs = match
                    scope["path_remaining"] = remaining
                    scope["url_route"] = {"args": args, "kwargs": {**kwargs, **route.default_args}}
                    return await route.callback(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)


# Field checks: each takes the field's name and value (MISSING when absent) and returns the
# value to use (MISSING to leave it out), or raises ApplicationError.


class _Missing:
    def __repr__(self):
        return "MISSING"


MISSING = _Missing()
MAX_ID_CHARS = 64


def string(name: str, value):
    if not isinstance(value, str):
        raise ApplicationError("invalid", f"{name}: must be a string.")
    return value


def flag(name: str, value):
    """A boolean, true when absent."""
    if value is MISSING:
        return True
    if not isinstance(value, bool):
        raise ApplicationError("invalid", f"{name}: must be true or false.")
    return value


def identifier(name: str, value):
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_CHARS:
        raise ApplicationError(
            "invalid", f"{name}: must be an id (a string of 1 to {MAX_ID_CHARS} characters)."
        )
    return value


def optional_string(name: str, value):
    return value if value is MISSING else string(name, value)


def anything(name: str, value):
    return value


# A socket's write buffer ------------------------------------------------------------------------


class Flow(Producer):
    """Whether a socket's client keeps up: the ``Producer`` of the socket's connection.

    Daphne's ``send`` never waits: whatever is sent to a client that does not read piles up in
    the server's memory. Under Daphne each socket's scope carries one of these (see
    config.asgi) as ``scope["parley.flow"]``, and a consumer waits for it before sending more.
    """

    def __init__(self, protocol):
        super().__init__()
        self.protocol = protocol
        transport = protocol.transport
        transport.bufferSize = settings.PARLEY_SOCKET_BUFFER_BYTES
        if getattr(transport, "producer", None) is not None:
            # The HTTP channel the socket was upgraded from, which has handed the connection over.
            transport.unregisterProducer()
        transport.registerProducer(self, True)
        # Plain TCP (Daphne's own sockets, not TLS it ends itself): written to directly, see
        # write().
        self._direct = isinstance(transport, tcp.Connection) and not getattr(
            transport, "TLS", False
        )

    def write(self, frames) -> bool:
        """Write ``frames`` (each with its ``wire``: its bytes as a WebSocket message) to the
        socket in one go: each is framed once for every socket it goes to, and a batch is one
        write, where sending each through Daphne frames it again for each socket and writes it
        alone. False
        when the socket cannot take them so (not open, or compressing its messages, which
        Parley's server does not offer), and they are to be sent one by one."""
        protocol = self.protocol
        if protocol.state != protocol.STATE_OPEN or protocol._perMessageCompress is not None:
            return False
        data = b"".join(frame.wire for frame in frames)
        transport = protocol.transport
        if self._direct and not protocol.send_queue and self._nothing_waiting(transport):
            # Nothing is waiting to go out before it: hand it to the kernel now, as asyncio's
            # own transports do. Twisted would first watch the socket for writability and stop
            # watching it once written, two system calls for every batch of every socket.
            sent = transport.writeSomeData(data)
            if isinstance(sent, int):
                data = data[sent:]
            # Otherwise the connection is lost: Twisted's own write finds out and closes it.
        if data:
            transport.write(data)
        return True

    @staticmethod
    def _nothing_waiting(transport) -> bool:
        """Whether Twisted holds no bytes yet to be written to this connection."""
        return (
            transport.connected
            and not transport.disconnecting
            and transport._tempDataLen == 0
            and len(transport.dataBuffer) == transport.offset
        )

    def close_patiently(self, seconds: float) -> None:
        """A socket closed for falling behind belongs to a slow client, not a gone one: give it
        ``seconds`` to read what it has and answer the close, rather than the second after which
        the connection would be dropped (which its client sees as 1006, no reason given)."""
        self.protocol.closeHandshakeTimeout = seconds

"""ASGI entry point: HTTP through Django, WebSockets through Channels (behind the Origin check
and the handshake's authentication), one server loop for both; under Daphne, the server loop is
bound at start-up, and SIGTERM hands the process's turns back and closes its sockets (1012)
before it stops."""

import asyncio
import importlib
import logging
import os
import signal
import sys
from functools import partial

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from conversations.routing import websocket_urlpatterns  # noqa: E402
from core.auth import WebSocketAuthMiddleware  # noqa: E402
from core.origins import OriginCheck  # noqa: E402
from core.process import server_loop  # noqa: E402
from core.sockets import SocketRouter  # noqa: E402
from selection.routing import websocket_urlpatterns as people_urlpatterns  # noqa: E402

logger = logging.getLogger(__name__)


async def http(scope, receive, send):
    """MCP's Streamable HTTP at /mcp/ (see external.server), everything else through Django."""
    path = scope["path"]
    if path == "/mcp" or path.startswith("/mcp/"):
        return await (await _mcp_endpoint())(scope, receive, send)
    return await django_asgi_app(scope, receive, send)


_mcp: asyncio.Task | None = None  # the import of the MCP endpoint (see _mcp_endpoint)


async def _mcp_endpoint():
    """The MCP endpoint, imported at its first request, in a thread: the SDK takes a second to
    import, which a process that never serves MCP (and every server the tests start) saves.
    The import runs once, in a task that every request coming meanwhile awaits (several threads
    importing at once would meet the module half made in ``sys.modules``); a request cancelled
    meanwhile does not cancel it, and one that failed is tried again by the next request."""
    global _mcp
    if _mcp is None:
        _mcp = asyncio.get_running_loop().create_task(_import_mcp(), name="parley-mcp-import")
    return await asyncio.shield(_mcp)


async def _import_mcp():
    global _mcp
    try:
        module = await asyncio.to_thread(importlib.import_module, "external.server")
    except BaseException:
        _mcp = None
        raise
    return module.endpoint


router = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": OriginCheck(
            WebSocketAuthMiddleware(SocketRouter(websocket_urlpatterns + people_urlpatterns))
        ),
    }
)


async def application(scope, receive, send):
    # Daphne binds the server loop at start-up (below); under another ASGI server the first
    # connection adopts it (binding is idempotent).
    server_loop.bind()
    return await router(scope, receive, send)


def _hook_daphne() -> None:
    """Daphne has no lifespan events, but it runs Twisted's asyncio reactor: start with it."""
    from twisted.internet import reactor

    _allow_server_close_codes()
    _close_with_a_frame_on_protocol_errors()
    _complete_socket_scopes()
    reactor.callWhenRunning(_reactor_started, reactor)


# Close codes registered with IANA for servers to send: 1011 (a server error) and 1012 (service
# restart).
SERVER_CLOSE_CODES = (1011, 1012)


def _allow_server_close_codes() -> None:
    """Let sockets be closed with 1011 and 1012, which Daphne's WebSocket library refuses: it
    accepts only 1000 and 3000-4999 from a server. The frame is sent as the library would send
    any other close."""
    from daphne.ws_protocol import WebSocketProtocol

    server_close = WebSocketProtocol.serverClose

    def close_socket(self, code=None):
        if code in SERVER_CLOSE_CODES:
            self.sendCloseFrame(code=code, isReply=False)
        else:
            server_close(self, code)

    WebSocketProtocol.serverClose = close_socket


def _close_with_a_frame_on_protocol_errors() -> None:
    """A message over Daphne's limit (1 MiB), invalid UTF-8 in a text frame or another breach
    of the protocol closes the socket with a close frame saying why (1009 message too big, 1007,
    1002), as the protocol asks, rather than dropping the connection without a word, which is
    the library's default (its ``failByDrop``)."""
    from daphne.ws_protocol import WebSocketFactory

    factory_init = WebSocketFactory.__init__

    def init_factory(self, *args, **kwargs):
        factory_init(self, *args, **kwargs)
        self.setProtocolOptions(failByDrop=False)

    WebSocketFactory.__init__ = init_factory


def _complete_socket_scopes() -> None:
    """Daphne gives a request its scheme (https over TLS, or X-Forwarded-Proto's when started
    with --proxy-headers) but leaves it out of a socket's scope, where ASGI's default is ws:
    give a socket its scheme the same way (wss), so that its Origin check compares the scheme
    HTTP's CSRF check would (see core.origins). And give it its write buffer's
    ``Flow`` (see core.sockets), which Daphne does not show an application; and a request, a
    way to have its response's (see core.streaming), for a response streamed without end."""
    from daphne.server import Server
    from twisted.internet.interfaces import ISSLTransport

    from core.sockets import Flow
    from core.streaming import ResponseFlow

    create_application = Server.create_application

    def create_with_scheme(self, protocol, scope):
        if scope.get("type") == "http":
            scope["parley.response_flow"] = partial(ResponseFlow, protocol)
        elif scope.get("type") == "websocket":
            secure = ISSLTransport.providedBy(protocol.transport)
            forwarded = getattr(protocol, "client_scheme", None)  # with --proxy-headers
            if forwarded:
                secure = forwarded.lower() in ("https", "wss")
            scope["scheme"] = "wss" if secure else "ws"
            scope["parley.flow"] = Flow(protocol)
        return create_application(self, protocol, scope)

    Server.create_application = create_with_scheme


def _reactor_started(reactor) -> None:
    # After-startup triggers run just before the asyncio loop does: bind from inside it.
    reactor.callLater(0, server_loop.bind)
    # However the process stops (SIGINT, a second SIGTERM), readiness turns false first.
    reactor.addSystemEventTrigger("before", "shutdown", server_loop.begin_shutdown)
    grace = settings.PARLEY_SHUTDOWN_GRACE_SECONDS
    # Replace Twisted's SIGTERM handler (installed just before this runs), not anyone else's.
    if signal.getsignal(signal.SIGTERM) == reactor.sigTerm:
        signal.signal(
            signal.SIGTERM, lambda signum, frame: reactor.callFromThread(_drain, reactor, grace)
        )


def _drain(reactor, grace: float) -> None:
    """On SIGTERM: turn readiness false, hand this process's turns back (other processes, or
    this one restarted, resume them) and close its sockets with 1012 (the browser reconnects at
    once, elsewhere); keep serving HTTP ``grace`` seconds so that the load balancer notices and
    sends nothing new; then stop as Daphne would. A second SIGTERM stops at once."""
    if server_loop.draining:
        _stop(reactor)
        return
    logger.info("SIGTERM: handing turns back, stopping in %.1f s", grace)
    shutting = asyncio.ensure_future(server_loop.shut_down())
    shutting.add_done_callback(lambda _: reactor.callLater(grace, _stop, reactor))


def _stop(reactor) -> None:
    from twisted.internet.error import ReactorNotRunning

    try:
        reactor.stop()
    except ReactorNotRunning:
        pass  # already stopping


# Daphne imports daphne.server (which installs the asyncio reactor) before this module; so does
# Django when "daphne" is an installed app, where the hook waits for a reactor that may never run.
if "daphne.server" in sys.modules:
    _hook_daphne()

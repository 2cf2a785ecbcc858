"""The Origin check of a socket's handshake, by the rule Django's CSRF check applies to the
Origin of an unsafe request: the socket's own origin (its scheme and its Host, which must be
one of ALLOWED_HOSTS) or one of CSRF_TRUSTED_ORIGINS, scheme, host and port alike. A handshake
with no Origin is not a browser's (scripts and other clients authenticate with a token) and
passes; browsers always send one, so a page of another site cannot ride a person's session."""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.utils.http import is_same_domain


class _Handshake(HttpRequest):
    """A socket's handshake read as Django reads a request: its host (Host, or with
    USE_X_FORWARDED_HOST X-Forwarded-Host, checked against ALLOWED_HOSTS) and its scheme
    (SECURE_PROXY_SSL_HEADER's, else the connection's: ws is http, wss is https)."""

    def __init__(self, scope):
        super().__init__()
        self._secure_connection = scope.get("scheme", "ws") == "wss"
        server_name, server_port = scope.get("server") or ("", "")
        self.META = {"SERVER_NAME": server_name or "", "SERVER_PORT": str(server_port or "")}
        for name, value in scope.get("headers", ()):
            key = "HTTP_" + name.decode("latin1").upper().replace("-", "_")
            value = value.decode("latin1")
            # Repeated headers are joined, as Django's ASGI handler does.
            self.META[key] = f"{self.META[key]},{value}" if key in self.META else value

    def _get_scheme(self):
        return "https" if self._secure_connection else "http"


def origin_allowed(scope) -> bool:
    """Whether a socket's handshake may go on (see the module)."""
    handshake = _Handshake(scope)
    origin = handshake.META.get("HTTP_ORIGIN")
    if origin is None:
        return True
    try:
        host = handshake.get_host()
    except DisallowedHost:
        return False
    if origin == f"{'https' if handshake.is_secure() else 'http'}://{host}":
        return True
    return _trusted(origin)


def _trusted(origin: str) -> bool:
    """One of CSRF_TRUSTED_ORIGINS, exactly, or under one of its wildcards
    (``https://*.example.com``), as CsrfViewMiddleware matches them."""
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin in (allowed for allowed in trusted if "*" not in allowed):
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    for allowed in trusted:
        if "*" in allowed:
            wildcard = urlsplit(allowed)
            if wildcard.scheme == parsed.scheme and is_same_domain(
                parsed.netloc, wildcard.netloc.lstrip("*")
            ):
                return True
    return False


class OriginCheck:
    """Refuses (403, at the handshake) a socket whose Origin is not allowed."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

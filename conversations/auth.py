"""WebSocket authentication, once per socket at the handshake: a DRF token in the Authorization
header for clients that are not browsers, else the browser's session cookie (the Origin check
that comes first is conversations.origins)."""

from importlib import import_module

from channels.auth import get_user
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.cookie import parse_cookie
from rest_framework.authtoken.models import Token


@database_sync_to_async
def _user_for_token(key: str):
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return AnonymousUser()
    return token.user


class WebSocketAuthMiddleware(BaseMiddleware):
    """Puts the socket's user in ``scope["user"]``.

    ``Authorization: Token <key>`` wins when present: a client that names a credential gets that
    one (a wrong token makes the socket anonymous, and it is closed with 4401). Otherwise the
    session cookie is read with Channels' own ``get_user``, which verifies the session hash.

    Channels' AuthMiddlewareStack would also wrap every frame the socket sends to see whether the
    session needs saving, a lazy-object lookup per frame that cost a third of the throughput to
    twenty watchers in the benchmark; a socket never changes its session, so it is read once here.
    """

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers", ()))
        authorization = headers.get(b"authorization", b"").decode("latin1")
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() == "token":
            user = await _user_for_token(key.strip())
        else:
            cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin1"))
            store = import_module(settings.SESSION_ENGINE).SessionStore
            session = store(cookies.get(settings.SESSION_COOKIE_NAME))
            user = await get_user({"session": session})
        return await super().__call__(dict(scope, user=user), receive, send)

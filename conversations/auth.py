"""WebSocket authentication: ``Authorization: Token <key>`` for clients that are not browsers,
and an Origin check for browsers."""

from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from rest_framework.authtoken.models import Token


@database_sync_to_async
def _user_for_token(key: str):
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return AnonymousUser()
    return token.user


class TokenAuthMiddleware(BaseMiddleware):
    """Authenticates a socket by the DRF token in its handshake's Authorization header.

    A header with a wrong token makes the socket anonymous (it is then closed with 4401),
    even if a session cookie came with it: a client that names a credential gets that one.
    """

    async def __call__(self, scope, receive, send):
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, key = value.decode("latin1").partition(" ")
                if scheme.lower() == "token":
                    scope = dict(scope, user=await _user_for_token(key.strip()))
                break
        return await super().__call__(scope, receive, send)


class BrowserOriginValidator(OriginValidator):
    """Rejects a handshake whose Origin is not one of ALLOWED_HOSTS.

    Browsers always send an Origin, so a cross-site page cannot ride a person's session cookie.
    Clients that are not browsers send none; they authenticate with a token instead.
    """

    def __init__(self, application):
        super().__init__(application, settings.ALLOWED_HOSTS)

    def valid_origin(self, parsed_origin):
        return parsed_origin is None or self.validate_origin(parsed_origin)

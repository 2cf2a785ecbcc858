"""WebSocket authentication, once per socket at the handshake: an API token in the Authorization
header for clients that are not browsers, else the browser's session cookie (the Origin check
that comes first is core.origins). Tokens are checked under the login locks (core.lockout); the
token's id goes in ``scope["parley.token_id"]``, so that the socket ends when it is revoked; a
session's key and the person's session hash go in ``scope["parley.session_key"]`` and
``scope["parley.auth_hash"]``, so that it ends when the session is signed out or the password
changes (see conversations.revocation)."""

from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.models import AnonymousUser
from django.http.cookie import parse_cookie

from core.lockout import LockedOut, attempt_from_scope, key_from, token_for


def _user_for_token(scope, key: str):
    """The token's user and its id; anonymous (the socket is closed with 4401) for a wrong,
    revoked or expired key, which counts as a failed sign-in from the socket's address, and for
    any key from an address locked out."""
    try:
        found = token_for(attempt_from_scope(scope), key)
    except LockedOut:
        return AnonymousUser(), None
    if found is None:
        return AnonymousUser(), None
    user, token = found
    return user, token.pk


def _user_for_session(session_key: str | None):
    """Django's own reading of a session's user (the session hash verified, as for a request),
    the session's key and the person's session hash (None for no one)."""
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(SimpleNamespace(session=session))
    if not user.is_authenticated:
        return user, None, None
    # The key as the store has it now (get_user may have cycled it, for a fallback secret).
    return user, session.session_key, user.get_session_auth_hash()


def authenticate(scope) -> None:
    """Read the socket's credential (as ``WebSocketAuthMiddleware`` found it) into
    ``scope["user"]``, ``scope["parley.token_id"]``, ``scope["parley.session_key"]`` and
    ``scope["parley.auth_hash"]``. Sync: called in a database thread, by the consumer (see
    core.sockets.GuardedConsumer), so that a consumer can read it in the same trip as its own
    reads."""
    kind, key = scope.get("parley.credential", (None, None))
    token_id = session_key = auth_hash = None
    if kind == TOKEN:
        user, token_id = _user_for_token(scope, key)
    elif kind == SESSION:
        user, session_key, auth_hash = _user_for_session(key)
    else:
        user = AnonymousUser()
    scope["user"] = user
    scope["parley.token_id"] = token_id
    scope["parley.session_key"] = session_key
    scope["parley.auth_hash"] = auth_hash


TOKEN, SESSION = "token", "session"


class WebSocketAuthMiddleware:
    """Finds the socket's credential, which ``authenticate`` reads into ``scope["user"]``
    (anonymous until then).

    ``Authorization: Token <key>`` (or ``Bearer <key>``) wins when present: a client that names
    a credential gets that one (a wrong, revoked or expired token makes the socket anonymous,
    and it is closed with 4401). Otherwise the session cookie is read with Channels' own
    ``get_user``, which verifies the session hash.

    Nothing is read here: the consumer reads the credential in its own first trip to the
    runtime's database threads, with what else it reads there (a conversation's socket: its
    access, state, first page and watcher row, one trip for the whole handshake). Channels'
    ``get_user`` would queue every handshake of the process on one thread, and its
    AuthMiddlewareStack would also wrap every frame the socket sends to see whether the session
    needs saving, a lazy-object lookup per frame that cost a third of the throughput to twenty
    watchers in the benchmark; a socket never changes its session, so it is read once.

    The scope is added to, not copied: it is this connection's own (the server made it for
    this socket and reads nothing back from it), and every copy made on the way in would live
    as long as the socket does (Channels' ``BaseMiddleware`` copies it).
    """

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        authorization = b""
        cookie = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                authorization = value
            elif name == b"cookie":
                cookie = value
        authorization = authorization.decode("latin1")
        if authorization.partition(" ")[0].lower() in ("token", "bearer"):
            credential = (TOKEN, key_from(authorization) or "")
        else:
            cookies = parse_cookie(cookie.decode("latin1"))
            credential = (SESSION, cookies.get(settings.SESSION_COOKIE_NAME))
        scope["parley.credential"] = credential
        scope["user"] = AnonymousUser()
        return await self.inner(scope, receive, send)

"""Access that follows membership live.

A socket or a tail opened on a workspace's conversation holds the access it was opened with
(``Held``: the person, the workspace, the role, and the API token it was opened with, if any,
or else the browser session: its key and the person's session hash then). When the person loses
it (their membership removed, their role lowered, their account deactivated, the token revoked
or expired, the session signed out or its password changed or reset), what they hold is revoked:
a socket closes (4403 when they are no longer a member, so the page says so and stops; 4409 when
their role was lowered, so the page reloads as what they now are; 4401 when its token or its
session no longer works, as at a handshake without credentials) and a tail ends. Which tokens
still work is asked of ``tokens_usable``, a hook the accounts app fills; which sessions still
do, of the session store (``SESSION_ENGINE``) and the people's passwords, as Django asks them
at each request.

Each process compares what is held in it with the database, in one query: at once when a change
commits in this process (the admin, a service, the shell: model signals), at once too when
another process says over the channel layer that one committed there, and at every upkeep
(a change made by SQL, or news the layer lost). Every process so acts at once, and within one
upkeep interval at worst.
"""

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model, user_logged_out
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from core.dbthreads import run_db
from core.process import server_loop

from .broadcast import hub
from .hooks import Hook
from .metrics import ACCESS_REVOKED
from .models import Membership

logger = logging.getLogger(__name__)

REMOVED = "removed"  # no longer a member (or the account was deactivated)
LOWERED = "lowered"  # still a member, with a lesser role
TOKEN_ENDED = "token_ended"  # the API token it was opened with was revoked or expired
# The browser session it was opened with was signed out, or its password changed or was reset.
SIGNED_OUT = "signed_out"

RANKS = {Membership.Role.VIEWER: 0, Membership.Role.MEMBER: 1, Membership.Role.OWNER: 2}


@dataclass(eq=False, slots=True)
class Held:
    """Access held by a socket or a tail in this process."""

    user_id: int
    workspace_id: int | None  # None: nothing held in a workspace, only the token
    role: str
    # Called on the server loop, once, with REMOVED, LOWERED, TOKEN_ENDED or SIGNED_OUT.
    revoke: Callable[[str], None]
    token_id: str | None = None  # the API token it was opened with (None: a browser session)
    session_key: str | None = None  # the browser session it was opened with, if any
    auth_hash: str | None = None  # the person's session hash then (get_session_auth_hash)


# Of a set of API token ids, those that still work (filled by the accounts app).
tokens_usable: Hook[Callable[[set[str]], set[str]]] = Hook("the API tokens' check")

_held: set[Held] = set()
_checking: asyncio.Task | None = None
_check_again = False


def hold(
    *,
    user_id: int,
    workspace_id: int | None,
    role: str,
    revoke: Callable[[str], None],
    token_id: str | None = None,
    session_key: str | None = None,
    auth_hash: str | None = None,
) -> Held:
    held = Held(user_id, workspace_id, role, revoke, token_id, session_key, auth_hash)
    _held.add(held)
    return held


def credentials(scope) -> dict:
    """What a socket was opened with (see core.auth), as ``hold`` takes it."""
    return {
        "token_id": scope.get("parley.token_id"),
        "session_key": scope.get("parley.session_key"),
        "auth_hash": scope.get("parley.auth_hash"),
    }


def request_credentials(request, token_id: str | None) -> dict:
    """What a request (a tail) was made with, as ``hold`` takes it: the API token ``token_id``,
    or else the browser session that signed it in, with the person's session hash then."""
    if token_id is not None:
        return {"token_id": token_id}
    session = getattr(request, "session", None)
    if session is None or session.session_key is None:
        return {}
    return {"session_key": session.session_key, "auth_hash": request.user.get_session_auth_hash()}


def let_go(held: Held | None) -> None:
    if held is not None:
        _held.discard(held)


def _roles(pairs: set[tuple[int, int]]) -> dict[tuple[int, int], str]:
    """The role of each (person, workspace) pair that is still a membership of an active
    account."""
    rows = Membership.objects.filter(
        user_id__in={user for user, _ in pairs},
        workspace_id__in={workspace for _, workspace in pairs},
        user__is_active=True,
    ).values_list("user_id", "workspace_id", "role")
    return {(user, workspace): role for user, workspace, role in rows}


def _sessions_there(keys: set[str]) -> set[str]:
    """Those of the sessions ``keys`` still there, unexpired: in one query where the store is
    the database (``db``, ``cached_db``: every session is written there), else asked of the
    store session by session. A session's person and hash never change under its key (Django
    gives a session a new key whenever it signs someone in again, or changes their hash), so
    that it is there is all there is to ask of it; the handshake read the rest."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if issubclass(store, DatabaseSessionStore):
        return set(
            store.get_model_class()
            .objects.filter(session_key__in=keys, expire_date__gt=timezone.now())
            .values_list("session_key", flat=True)
        )
    return {key for key in keys if store().exists(key)}


def _sessions_signed_in(sessions: set[tuple[str, int, str]]) -> set[tuple[str, int, str]]:
    """Of (session key, person, session hash) triples, those still signed in: the session is
    still there, and the person (active) still has the password that hash was made of. What
    Django asks of a session at each request."""
    users = (
        get_user_model()
        ._default_manager.filter(pk__in={user for _, user, _ in sessions}, is_active=True)
        .only("pk", "password")
    )
    hashes = {user.pk: user.get_session_auth_hash() for user in users}
    there = _sessions_there({key for key, _, _ in sessions})
    return {
        (key, user_id, auth_hash)
        for key, user_id, auth_hash in sessions
        if key in there and user_id in hashes and constant_time_compare(hashes[user_id], auth_hash)
    }


def _session_of(held: Held) -> tuple[str, int, str] | None:
    if held.session_key is None:
        return None
    return (held.session_key, held.user_id, held.auth_hash or "")


def _read(checking: list[Held]) -> tuple[dict, set[str], set[tuple[str, int, str]]]:
    """The roles of the pairs held, which of the tokens held still work, and which of the
    sessions held are still signed in."""
    pairs = {
        (held.user_id, held.workspace_id) for held in checking if held.workspace_id is not None
    }
    tokens = {held.token_id for held in checking if held.token_id is not None}
    sessions = {_session_of(held) for held in checking} - {None}
    return (
        _roles(pairs) if pairs else {},
        tokens_usable.get()(tokens) if tokens else set(),
        _sessions_signed_in(sessions) if sessions else set(),
    )


async def check() -> int:
    """Revoke what is held here and was lost in the database. Returns how many."""
    if not _held:
        return 0
    # What is held now: access taken while the database is read is not in what it answers
    # (the next check sees it).
    checking = list(_held)
    roles, usable, signed_in = await run_db(_read, checking)
    revoked = 0
    for held in checking:
        if held not in _held:
            continue  # let go meanwhile
        # Membership first: a person removed (or deactivated) is told so, whatever their token.
        role = roles.get((held.user_id, held.workspace_id))
        if held.workspace_id is not None and role is None:
            kind = REMOVED
        elif held.workspace_id is not None and RANKS.get(role, 0) < RANKS.get(held.role, 0):
            kind = LOWERED
        elif held.token_id is not None and held.token_id not in usable:
            kind = TOKEN_ENDED
        elif held.session_key is not None and _session_of(held) not in signed_in:
            kind = SIGNED_OUT
        else:
            continue
        _held.discard(held)
        revoked += 1
        ACCESS_REVOKED.labels(kind).inc()
        try:
            held.revoke(kind)
        except Exception:
            logger.exception("Could not revoke access of person %s", held.user_id)
    if revoked:
        logger.info("Access changed: %d socket(s) or tail(s) closed", revoked)
    return revoked


def check_soon() -> None:
    """Run a check on the server loop soon (at most one at a time; one more if asked meanwhile).
    Call on the loop."""
    global _checking, _check_again
    if _checking is not None and not _checking.done():
        _check_again = True
        return
    _checking = asyncio.get_running_loop().create_task(_check_until_settled())


async def _check_until_settled() -> None:
    global _check_again
    while True:
        _check_again = False
        try:
            await check()
        except Exception:
            logger.warning("Could not check access; upkeep will", exc_info=True)
        if not _check_again:
            return


def changed(**kwargs) -> None:
    """A membership, an account or an API token changed here: once it commits, check this
    process's and tell the others (if this process serves: a management command has no loop,
    and upkeep sees to what it changes)."""
    transaction.on_commit(lambda: server_loop.call_soon(_changed_here))


def _changed_here() -> None:
    check_soon()
    hub.access_changed()


def _account_saved(instance, update_fields=None, **kwargs) -> None:
    # A password set (set_password keeps the new one in ``_password`` until save() ends) or
    # saved changes the person's session hash: their other sessions are signed out.
    password_saved = getattr(instance, "_password", None) is not None or (
        update_fields is not None and "password" in update_fields
    )
    if not instance.is_active or password_saved:
        changed()


def _session_deleted(instance, **kwargs) -> None:
    # Signed out, or its key cycled (a password change); not an anonymous session's key cycled
    # at a sign-in (single sign-on keeps its state in one first), which signed no one out.
    if SESSION_KEY in instance.get_decoded():
        changed()


def connect_signals() -> None:
    hub.on_access_changed.append(check_soon)
    post_save.connect(changed, sender=Membership, dispatch_uid="parley-access-membership")
    post_delete.connect(changed, sender=Membership, dispatch_uid="parley-access-removed")
    post_save.connect(_account_saved, sender=get_user_model(), dispatch_uid="parley-access-account")
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if issubclass(store, DatabaseSessionStore):
        # A session deleted: signed out (Django deletes it once the sign-out is recorded), or
        # its key cycled (a sign-in, a password change). Nothing here deletes sessions in bulk
        # (no clearsessions): each deletion is one check.
        post_delete.connect(
            _session_deleted, sender=store.get_model_class(), dispatch_uid="parley-access-session"
        )
    else:
        # Other stores send no signal: the sign-out's own (the session is flushed just after,
        # so a check may come too early; the next upkeep's does not).
        user_logged_out.connect(changed, dispatch_uid="parley-access-signed-out")

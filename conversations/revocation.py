"""Access that follows membership live.

A socket or a tail opened on a workspace's conversation holds the access it was opened with
(``Held``: the person, the workspace, the role, and the API token it was opened with, if any).
When the person loses it (their membership removed, their role lowered, their account
deactivated, the token revoked or expired), what they hold is revoked: a socket closes (4403
when they are no longer a member, so the page says so and stops; 4409 when their role was
lowered, so the page reloads as what they now are; 4401 when its token no longer works) and a
tail ends. Which tokens still work is asked of ``tokens_usable``, a hook the accounts app fills.

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

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save

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

RANKS = {Membership.Role.VIEWER: 0, Membership.Role.MEMBER: 1, Membership.Role.OWNER: 2}


@dataclass(eq=False)
class Held:
    """Access held by a socket or a tail in this process."""

    user_id: int
    workspace_id: int | None  # None: nothing held in a workspace, only the token
    role: str
    # Called on the server loop, once, with REMOVED, LOWERED or TOKEN_ENDED.
    revoke: Callable[[str], None]
    token_id: str | None = None  # the API token it was opened with (None: a browser session)


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
) -> Held:
    held = Held(user_id, workspace_id, role, revoke, token_id)
    _held.add(held)
    return held


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


def _read(checking: list[Held]) -> tuple[dict, set[str]]:
    """The roles of the pairs held, and which of the tokens held still work."""
    pairs = {
        (held.user_id, held.workspace_id) for held in checking if held.workspace_id is not None
    }
    tokens = {held.token_id for held in checking if held.token_id is not None}
    return (
        _roles(pairs) if pairs else {},
        tokens_usable.get()(tokens) if tokens else set(),
    )


async def check() -> int:
    """Revoke what is held here and was lost in the database. Returns how many."""
    if not _held:
        return 0
    # What is held now: access taken while the database is read is not in what it answers
    # (the next check sees it).
    checking = list(_held)
    roles, usable = await run_db(_read, checking)
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


def _account_saved(instance, **kwargs) -> None:
    if not instance.is_active:
        changed()


def connect_signals() -> None:
    hub.on_access_changed.append(check_soon)
    post_save.connect(changed, sender=Membership, dispatch_uid="parley-access-membership")
    post_delete.connect(changed, sender=Membership, dispatch_uid="parley-access-removed")
    post_save.connect(_account_saved, sender=get_user_model(), dispatch_uid="parley-access-account")

"""Who may see and do what: the one place where workspace membership and role are checked.

A person who is not a member of a workspace learns nothing of it: whatever they ask for is
"not found" (404). A viewer may watch but not act (403).
"""

from dataclasses import dataclass
from functools import cache

from django.db import connection

from core.errors import forbidden, not_found
from core.prepared import PreparedLookup

from .models import Conversation, Membership, Turn, Workspace
from .selectors import conversation_with_state


def membership_of(*, user, workspace_id: int) -> Membership | None:
    if not getattr(user, "is_authenticated", False):
        return None
    return _MEMBERSHIP.first(workspace_id, user.pk)


# Every request the access rule lets through reads this: compiled once (see core.prepared).
_MEMBERSHIP = PreparedLookup(
    lambda workspace_id, user_id: Membership.objects.filter(
        workspace_id=workspace_id, user_id=user_id
    ).order_by("pk")[:1],
    kinds=(int, int),
)


def _require_role(membership: Membership, act: bool, doing: str) -> None:
    if act and not membership.can_act:
        raise forbidden(f"Viewers may watch but not {doing}.")


def conversation_access(
    *, user, conversation_id: str, act: bool = False, doing: str = "act"
) -> tuple[Conversation, Membership]:
    """The conversation and the person's membership; ``act`` requires owner or member.

    Raises ApplicationError ``not_found`` (404) for strangers and unknown ids alike, and
    ``forbidden`` (403) when a viewer tries to act.
    """
    conversation = conversation_with_state(conversation_id=str(conversation_id))
    membership = (
        membership_of(user=user, workspace_id=conversation.workspace_id) if conversation else None
    )
    if membership is None:
        raise not_found("Conversation")
    _require_role(membership, act, doing)
    return conversation, membership


def workspace_access(
    *, user, slug: str, act: bool = False, doing: str = "act"
) -> tuple[Workspace, Membership]:
    workspace = Workspace.objects.filter(slug=slug).first()
    membership = membership_of(user=user, workspace_id=workspace.pk) if workspace else None
    if membership is None:
        raise not_found(f"Workspace '{slug}'")
    _require_role(membership, act, doing)
    return workspace, membership


@dataclass(frozen=True, slots=True)
class Watching:
    """What a socket opening on a conversation is let see: the person's place in its workspace,
    and the conversation's state (its latest seq and its active turn, if any)."""

    workspace_id: int
    role: str
    last_seq: int
    active_turn_id: str | None
    active_turn_status: str | None


def conversation_watching(*, user_id: int, conversation_id: str) -> Watching:
    """The rule of ``conversation_access`` for watching (a member of the conversation's
    workspace, whatever their role), with the state a socket opens with, in one query: a socket's
    handshake asks it, where the ORM would compile the same two queries afresh for every socket
    (half of a handshake's time). Raises ApplicationError ``not_found`` for strangers and unknown
    ids alike."""
    with connection.cursor() as cursor:
        cursor.execute(_watching_sql(), [user_id, *_ACTIVE, conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise not_found("Conversation")
    return Watching(*row)


# Plain strings: a database driver may adapt an enum by its name.
_ACTIVE = [status.value for status in Turn.ACTIVE_STATUSES]


@cache
def _watching_sql() -> str:
    name = connection.ops.quote_name
    conversation, membership, turn = (
        name(model._meta.db_table) for model in (Conversation, Membership, Turn)
    )
    statuses = ", ".join(["%s"] * len(Turn.ACTIVE_STATUSES))
    return (
        f"SELECT c.workspace_id, m.role, c.last_seq, t.id, t.status FROM {conversation} c "
        f"JOIN {membership} m ON m.workspace_id = c.workspace_id AND m.user_id = %s "
        f"LEFT JOIN {turn} t ON t.conversation_id = c.id AND t.status IN ({statuses}) "
        "WHERE c.id = %s"
    )

"""Who may see and do what: the one place where workspace membership and role are checked.

A person who is not a member of a workspace learns nothing of it: whatever they ask for is
"not found" (404). A viewer may watch but not act (403).
"""

from core.errors import forbidden, not_found
from core.prepared import PreparedLookup

from .models import Conversation, Membership, Workspace
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

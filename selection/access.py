"""Who may work with a question: owners and members of its workspace; when it names an
addressee, only that person or an owner may answer it. Strangers learn nothing (404)."""

from conversations.access import membership_of
from conversations.models import Membership
from core.errors import forbidden, not_found

from .models import Selection
from .selectors import selection_with_context


def selection_access(*, user, selection_id: str, answering: bool = False) -> Selection:
    """The question, if ``user`` may read it (or, with ``answering``, answer or browse it).

    Raises ApplicationError ``not_found`` (404) for strangers and unknown ids, and
    ``forbidden`` (403) for viewers and for members it is not addressed to.
    """
    selection = selection_with_context(selection_id=str(selection_id))
    membership = (
        membership_of(user=user, workspace_id=selection.conversation.workspace_id)
        if selection
        else None
    )
    if membership is None:
        raise not_found("Selection")
    if not membership.can_act:
        raise forbidden("Viewers may watch but not answer questions.")
    addressed_elsewhere = selection.addressee_id not in (None, user.pk)
    if answering and addressed_elsewhere and membership.role != Membership.Role.OWNER:
        name = selection.addressee.get_full_name() or selection.addressee.get_username()
        raise forbidden(f"This question is for {name}; only they or an owner may answer it.")
    return selection

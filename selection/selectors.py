"""Reads of selections (the questions agents ask mid-turn)."""

from django.db.models import Q, QuerySet

from conversations.models import Membership

from .models import Selection


def pending_selection_payloads(*, conversation_ids: list[str]) -> dict[str, list[dict]]:
    """The questions still waiting for an answer in each conversation, oldest first (one query
    for any number of conversations)."""
    pending = (
        Selection.objects.filter(
            conversation_id__in=conversation_ids, status=Selection.Status.PENDING
        )
        .select_related("addressee", "answered_by")
        .order_by("created_at")
    )
    payloads: dict[str, list[dict]] = {cid: [] for cid in conversation_ids}
    for selection in pending:
        payloads[selection.conversation_id].append(selection.to_payload())
    return payloads


def settled_selection(*, selection_id: str) -> Selection | None:
    """The question with who answered it, if it is no longer pending; else None."""
    return (
        Selection.objects.exclude(status=Selection.Status.PENDING)
        .select_related("answered_by")
        .filter(pk=selection_id)
        .first()
    )


def settled_selection_ids(*, ids: list[str]) -> list[str]:
    """Which of these questions are no longer pending (in chunks: one query per 500)."""
    settled = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        settled += (
            Selection.objects.filter(pk__in=chunk)
            .exclude(status=Selection.Status.PENDING)
            .values_list("pk", flat=True)
        )
    return settled


def selection_with_context(*, selection_id: str) -> Selection | None:
    return (
        Selection.objects.select_related(
            "conversation__workspace", "turn", "addressee", "answered_by"
        )
        .filter(pk=selection_id)
        .first()
    )


def selections_answerable_by(
    *, user, status: str | None = None, conversation_id: str | None = None
) -> QuerySet[Selection]:
    """Questions the person may answer: in workspaces where they are an owner or a member,
    addressed to nobody or to them (owners may answer any)."""
    acting = Membership.objects.filter(user=user, role__in=Membership.ACTING_ROLES)
    owner_of = acting.filter(role=Membership.Role.OWNER).values("workspace_id")
    selections = Selection.objects.filter(
        conversation__workspace__in=acting.values("workspace_id")
    ).filter(
        Q(addressee__isnull=True) | Q(addressee=user) | Q(conversation__workspace__in=owner_of)
    )
    if status:
        selections = selections.filter(status=status)
    if conversation_id:
        selections = selections.filter(conversation_id=conversation_id)
    return selections.select_related("addressee", "answered_by").order_by("created_at")

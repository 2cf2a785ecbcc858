"""Reads of selections (the questions agents ask mid-turn)."""

import logging

from django.db.models import Case, Count, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Substr

from conversations.models import Membership, TurnEvent
from core.people import person
from core.prepared import PreparedLookup

from .models import Selection

logger = logging.getLogger(__name__)


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


def settled_outcome(*, selection_id: str) -> dict | None:
    """What the agent that asked the question is told once it is no longer pending (see
    Selection.outcome); None while it is. A question whose row is gone (deleted behind the
    admin's back, which cancels instead) counts as cancelled: nobody can answer it any more,
    and its turn goes on rather than waiting for ever."""
    selection = Selection.objects.select_related("answered_by").filter(pk=selection_id).first()
    if selection is None:
        logger.warning("Question %s no longer exists; its turn takes it as cancelled", selection_id)
        return Selection(pk=selection_id, status=Selection.Status.CANCELLED).outcome()
    return None if selection.is_pending else selection.outcome()


def settled_selection_ids(*, ids: list[str]) -> list[str]:
    """Which of these stored questions are no longer pending, settled or gone (in chunks: one
    query per 500)."""
    settled = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        pending = set(
            Selection.objects.filter(pk__in=chunk, status=Selection.Status.PENDING).values_list(
                "pk", flat=True
            )
        )
        settled += [selection_id for selection_id in chunk if selection_id not in pending]
    return settled


# Every request about one question (read, answer, browse) starts here: compiled once.
_WITH_CONTEXT = PreparedLookup(
    lambda selection_id: Selection.objects.select_related(
        "conversation__workspace", "turn", "addressee", "answered_by"
    ).filter(pk=selection_id)
)


def selection_with_context(*, selection_id: str) -> Selection | None:
    """The question with its conversation, workspace, turn, addressee and who answered it."""
    return _WITH_CONTEXT.first(selection_id)


def selections_answerable_by(
    *,
    user,
    status: str | None = None,
    conversation_id: str | None = None,
    addressed_to_them: bool = False,
) -> QuerySet[Selection]:
    """Questions the person may answer: in workspaces where they are an owner or a member,
    addressed to nobody or to them (owners may answer any). Those addressed to them come
    first, then the oldest first; ``addressed_to_them`` keeps only those."""
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
    if addressed_to_them:
        selections = selections.filter(addressee=user)
    return selections.select_related("addressee", "answered_by").order_by(
        Case(When(addressee=user, then=Value(0)), default=Value(1)), "created_at"
    )


def waiting_count(*, user) -> dict:
    """How many questions wait for the person (pending, theirs to answer), and how many of
    those are addressed to them."""
    return selections_answerable_by(user=user, status=Selection.Status.PENDING).aggregate(
        count=Count("pk"), for_me=Count("pk", filter=Q(addressee=user))
    )


# How much of a question's context "Waiting for you" shows: the input that started its turn and
# the agent's last words before it, each cut (at a word) to this many characters; the database
# sends a little more, so that a cut is known.
CONTEXT_CHARS = 300


def _context_text(text: str | None) -> str | None:
    """``text`` cut to CONTEXT_CHARS, at a space if one is near, ending with "…" if cut."""
    text = (text or "").strip()
    if len(text) <= CONTEXT_CHARS:
        return text or None
    cut = text[: CONTEXT_CHARS - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > CONTEXT_CHARS * 2 // 3 else cut).rstrip() + "…"


def waiting_for(*, user) -> list[dict]:
    """What the "Waiting for you" page lists: each pending question the person may answer, as
    its payload with where it was asked (workspace, conversation, who started the turn), what
    led to it (``turn_input``: the turn's input; ``agent_said``: the agent's last message in
    the turn before it, or None) and the person's role there, addressed to them first, then
    the oldest first. Two queries, however many questions."""
    roles = dict(Membership.objects.filter(user=user).values_list("workspace_id", "role"))
    # The agent's last message is the last one stored before the question's own event: bounded
    # by seq, the event log's order, and not by time (a row's time and an event's come from
    # different clocks). The question's event is the turn's selection.requested naming it.
    asked_seq = (
        TurnEvent.objects.filter(turn=OuterRef("turn"), type=TurnEvent.Type.SELECTION_REQUESTED)
        .alias(question=KT("data__id"))
        .filter(question=OuterRef("pk"))
        .order_by("seq")
        .values("seq")[:1]
    )
    last_words = (
        TurnEvent.objects.filter(
            turn=OuterRef("turn"),
            type=TurnEvent.Type.MESSAGE_COMPLETED,
            seq__lt=OuterRef("asked_seq"),
        )
        .order_by("-seq")
        .annotate(head=Substr(KT("data__text"), 1, CONTEXT_CHARS + 20))
        .values("head")[:1]
    )
    selections = (
        selections_answerable_by(user=user, status=Selection.Status.PENDING)
        .select_related("conversation__workspace", "turn__started_by")
        .defer("turn__input")
        .annotate(asked_seq=Subquery(asked_seq))
        .annotate(
            input_head=Substr("turn__input", 1, CONTEXT_CHARS + 20),
            agent_head=Subquery(last_words),
        )
    )
    return [
        {
            **selection.to_payload(),
            "workspace": {
                "slug": selection.conversation.workspace.slug,
                "name": selection.conversation.workspace.name,
            },
            "conversation_title": selection.conversation.title,
            "started_by": person(selection.turn.started_by),
            "turn_input": _context_text(selection.input_head) or "",
            "agent_said": _context_text(selection.agent_head),
            "role": roles[selection.conversation.workspace_id],
        }
        for selection in selections
    ]


def selection_notice(*, user, selection_id: str) -> dict | None:
    """What a person's socket says of a question it heard of (see selection.consumers): its
    prompt and where it was asked, if the person may answer it and it still waits; else
    None."""
    selection = (
        selections_answerable_by(user=user, status=Selection.Status.PENDING)
        .select_related("conversation")
        .filter(pk=selection_id)
        .first()
    )
    if selection is None:
        return None
    return {
        "selection": selection.pk,
        "prompt": selection.prompt,
        "conversation": selection.conversation_id,
        "conversation_title": selection.conversation.title,
        "addressed": selection.addressee_id == user.pk,
    }

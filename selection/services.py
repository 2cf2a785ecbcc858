"""Every write to selections: asking, answering, expiring and cancelling.

An answer is validated, then committed with a compare-and-set from ``pending`` (so of two
answers exactly one wins) together with its ``selection.resolved`` event, and only then is the
turn woken through its inbox. The wake-up is just that: the answer lives in the database, and a
parked turn re-reads it now and then.
"""

from datetime import timedelta
from functools import cache

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from conversations.events import Frame
from conversations.models import Membership, Turn, TurnEvent
from conversations.notices import people_notify
from conversations.services import (
    append_events,
    turn_await_input,
    turn_steps_record,
    turn_wake,
)
from core.errors import ApplicationError
from core.people import person
from core.prepared import PreparedLookup
from core.throttles import rate_check

from . import announcing
from .models import Selection, Via
from .validation import clean_answer

ACTIONS = {"dismiss": Selection.Status.DISMISSED, "decline": Selection.Status.DECLINED}


# Every question asked reads these first: compiled once (see core.prepared).
_STORED = PreparedLookup(lambda selection_id: Selection.objects.filter(pk=selection_id))
_ASKING_TURN = PreparedLookup(lambda turn_id: Turn.objects.filter(pk=turn_id).only("started_by"))


def selection_request(
    *,
    selection_id: str,
    turn_id: str,
    ordinal: int,
    fields: dict,
    addressee=None,
    timeout_seconds: float,
    process: str,
    step: dict | None = None,
    escalate: bool | None = None,
) -> Selection:
    """Store a question under ``selection_id``, emit ``selection.requested`` and move the turn
    to awaiting_input: a write of the turn's own, fenced (TurnLost unless ``process`` still runs
    the turn; see conversations.services.turn_await_input). ``step`` is the turn's journal step
    for it (see TurnStep), stored with it. ``escalate`` says whether it goes to the workspace's
    owners if nobody answers in time (None: as ``PARLEY_ESCALATE_QUESTIONS`` says).

    Raises 429 ``throttled`` (nothing stored, nobody told) when the person the turn acts for
    (who started it: for MCP's ``ask``, the token's owner) has had more questions asked on
    their behalf than ``PARLEY_QUESTION_RATE`` allows."""
    if stored := _STORED.first(str(selection_id)):
        return stored  # a retry whose first attempt committed
    asking = _ASKING_TURN.first(str(turn_id))
    if asking is not None and asking.started_by_id is not None:
        rate_check("questions", asking.started_by_id)
    now = timezone.now()
    if escalate is None:
        escalate = settings.PARLEY_ESCALATE_QUESTIONS
    with transaction.atomic():
        turn = turn_await_input(turn_id=turn_id, process=process)
        if step is not None:
            turn_steps_record(
                turn_id=turn_id, steps=[{**step, "outcome": {"selection": selection_id}}]
            )
        selection = Selection.objects.create(
            id=selection_id,
            conversation=turn.conversation,  # read with the turn: the notices need it
            turn=turn,
            ordinal=ordinal,
            addressee=addressee,
            expires_at=now + timedelta(seconds=timeout_seconds),
            remind_at=_share_of(now, timeout_seconds, settings.PARLEY_REMIND_AFTER),
            escalate_at=(
                _share_of(now, timeout_seconds, settings.PARLEY_ESCALATE_AFTER)
                if escalate
                else None
            ),
            # The form's fields in the order the question gave them (jsonb would lose it).
            field_order=list((fields.get("schema") or {}).get("properties", {})),
            **fields,
        )
        append_events(
            conversation_id=turn.conversation_id,
            turn_id=turn.pk,
            events=[(TurnEvent.Type.SELECTION_REQUESTED, selection.to_payload())],
        )
        _tell_people(selection, "asked", workspace_id=turn.conversation.workspace_id)
    return selection


def _share_of(start, seconds: float, share: float):
    """The moment ``share`` of ``seconds`` after ``start``; None for a share of 0 (never)."""
    return start + timedelta(seconds=seconds * share) if share > 0 else None


def _tell_people(selection: Selection, kind: str, *, workspace_id: int, to=()) -> None:
    """Let the people of its workspace know, on their own sockets (see selection.consumers),
    and wherever else they asked to hear of it (see selection.announcing): inside the
    transaction that writes its event."""
    announcing.announce(selection=selection, cause=kind, to=to)
    people_notify(
        workspace_id=workspace_id,
        notice={
            "kind": kind,
            "selection": selection.pk,
            "conversation": selection.conversation_id,
            "addressee": selection.addressee_id,
            "to": [user.pk for user in to],
        },
    )


def resolved_error(selection: Selection) -> ApplicationError:
    """409 for a question someone else settled, carrying the winning answer; 410 if expired."""
    if selection.status == Selection.Status.EXPIRED:
        return ApplicationError(
            "selection_expired", "This question expired before it was answered.", status=410
        )
    return ApplicationError(
        "already_resolved",
        f"This question was already {selection.status}.",
        status=409,
        extra={
            "status": selection.status,
            "answer": selection.answer,
            "answered_by": person(selection.answered_by),
            "answered_via": selection.answered_via or None,
        },
    )


def selection_require_open(*, selection: Selection) -> None:
    """Raise 409 (with the winner's answer) if the question is settled, or 410 if its time is
    up (expiring it now if nobody has yet)."""
    if selection.is_pending and timezone.now() >= selection.expires_at:
        selection_expire(selection=selection)
        selection.refresh_from_db()
    if not selection.is_pending:
        raise resolved_error(selection)


def selection_reply(
    *, selection: Selection, user, answer=None, action: str | None = None, via: str = Via.API
) -> Selection:
    """Answer (or dismiss, or decline) a pending question for ``user``, given ``via`` (where:
    see Via).

    The caller has checked that ``user`` may answer it. Raises ApplicationError: 400
    ``invalid_answer`` (the question stays pending), 409 ``already_resolved`` with the winner's
    answer, 410 ``selection_expired``.
    """
    if action is not None and action not in ACTIONS:
        raise ApplicationError("invalid", "action: must be 'dismiss' or 'decline'.")
    selection_require_open(selection=selection)
    if action is None:
        value = clean_answer(selection, answer, selection.conversation.workspace.files_root)
        status = Selection.Status.ANSWERED
    else:
        value, status = None, ACTIONS[action]
    if not _resolve(selection, status, answer=value, user=user, via=via, before_expiry=True):
        if selection.is_pending:  # its time ran out while the answer was being checked
            selection_expire(selection=selection)
            selection.refresh_from_db()
        raise resolved_error(selection)
    return selection


# Every settlement locks its turn first: compiled once.
_TURN_FOR_UPDATE = PreparedLookup(
    lambda turn_id: Turn.objects.select_for_update().filter(pk=turn_id)
)


def _resolve(
    selection: Selection, status: str, *, answer=None, user=None, via="", before_expiry=False
):
    """Settle a pending question: compare-and-set from ``pending``, its ``selection.resolved``
    event and the turn's return to running, in one transaction; then wake the turn.

    The event is written here, not by the turn when it wakes, so everyone watching sees the
    outcome the moment it is committed. Returns False (and changes nothing) if the question
    was no longer pending, or (``before_expiry``) its time was up; ``selection`` then holds
    the winner's outcome, read again.
    """
    with transaction.atomic():
        # The lock order (conversations.services): the turn, then the question, then the
        # conversation's counter.
        turn = _TURN_FOR_UPDATE.first(selection.turn_id)
        now = timezone.now()
        pending = Selection.objects.filter(pk=selection.pk, status=Selection.Status.PENDING)
        if before_expiry:
            pending = pending.filter(expires_at__gt=now)
        if not pending.update(
            status=status, answer=answer, answered_by=user, answered_at=now, answered_via=via
        ):
            selection.refresh_from_db()
            return False
        selection.status, selection.answer = status, answer
        selection.answered_by, selection.answered_at = user, now
        selection.answered_via = via
        (frame,) = append_events(
            conversation_id=selection.conversation_id,
            turn_id=selection.turn_id,
            events=[(TurnEvent.Type.SELECTION_RESOLVED, selection.resolution_payload())],
        )
        Selection.objects.filter(pk=selection.pk).update(resolved_seq=frame.seq)
        selection.resolved_seq = frame.seq
        _tell_people(selection, "settled", workspace_id=selection.conversation.workspace_id)
        # Back to running, unless the agent is waiting on another question too.
        with connection.cursor() as cursor:
            cursor.execute(
                _back_to_running_sql(),
                [*_BACK_TO_RUNNING, selection.turn_id],
            )
        # The wake-up carries the committed outcome, so the turn goes on without reading it; a
        # turn nobody holds (released from memory while it waited, or its process stopped) is
        # resumed by this process, and goes on with the outcome.
        message = {"type": "selection.wake", "id": selection.pk, "outcome": selection.outcome()}
        turn_wake(turn=turn, message=message)
    return True


# Plain strings: a database driver may adapt an enum by its name.
_BACK_TO_RUNNING = [
    Turn.Status.RUNNING.value,
    Turn.Status.AWAITING_INPUT.value,
    Selection.Status.PENDING.value,
]


@cache
def _back_to_running_sql() -> str:
    """The turn's return to running once no question of its own is pending: SQL written once
    (every settlement runs it, where the ORM would compile its subquery afresh each time)."""
    name = connection.ops.quote_name
    turn, selection = name(Turn._meta.db_table), name(Selection._meta.db_table)
    return (
        f"UPDATE {turn} SET status = %s WHERE status = %s AND NOT EXISTS "
        f"(SELECT 1 FROM {selection} s WHERE s.turn_id = {turn}.id AND s.status = %s) AND id = %s"
    )


def selection_expire(*, selection: Selection) -> bool:
    """Expire a pending question (its agent is told, and goes on). False if it was settled."""
    return _resolve(selection, Selection.Status.EXPIRED)


def selections_expire_due() -> int:
    """Expire every pending question whose time is up, whether or not its turn is in memory
    anywhere (run by each process's upkeep). Returns how many it expired."""
    due = Selection.objects.filter(
        status=Selection.Status.PENDING, expires_at__lte=timezone.now()
    ).select_related("turn", "conversation")
    return sum(selection_expire(selection=selection) for selection in due)


def selections_remind_due() -> int:
    """Remind the people who may answer each pending question whose reminder is due (its
    addressee, else the members and owners of its workspace), with a ``selection.reminded``
    event and a notice; run by each process's upkeep, so a question whose turn is in no
    process's memory is reminded too. Returns how many it reminded."""
    due = Selection.objects.filter(
        status=Selection.Status.PENDING, reminded_at__isnull=True, remind_at__lte=timezone.now()
    ).select_related("conversation", "addressee")
    reminded = 0
    for selection in due:
        if selection.addressee is not None:
            to = [selection.addressee]
        else:
            to = _people_of(selection, Membership.ACTING_ROLES)
        reminded += _announce(
            selection, "reminded_at", TurnEvent.Type.SELECTION_REMINDED, "reminded", to
        )
    return reminded


def selections_escalate_due() -> int:
    """Escalate to its workspace's owners each pending question whose escalation is due, with
    a ``selection.escalated`` event and a notice (run by each process's upkeep). Owners may
    answer any question, addressed or not. Returns how many it escalated."""
    due = Selection.objects.filter(
        status=Selection.Status.PENDING,
        escalated_at__isnull=True,
        escalate_at__lte=timezone.now(),
    ).select_related("conversation")
    owners = (Membership.Role.OWNER,)
    return sum(
        _announce(
            selection,
            "escalated_at",
            TurnEvent.Type.SELECTION_ESCALATED,
            "escalated",
            _people_of(selection, owners),
        )
        for selection in due
    )


def _people_of(selection: Selection, roles) -> list:
    return [
        membership.user
        for membership in Membership.objects.filter(
            workspace_id=selection.conversation.workspace_id,
            role__in=roles,
            user__is_active=True,
        )
        .select_related("user")
        .order_by("user__username")
    ]


def _announce(selection: Selection, done_field: str, event_type: str, kind: str, to) -> bool:
    """Mark a still-pending question as reminded or escalated (compare-and-set, so that of
    several processes' upkeeps one does it), with its event; then tell the people it names.
    False if it was settled or done meanwhile."""
    now = timezone.now()
    with transaction.atomic():
        marked = Selection.objects.filter(
            pk=selection.pk, status=Selection.Status.PENDING, **{f"{done_field}__isnull": True}
        ).update(**{done_field: now})
        if not marked:
            return False
        setattr(selection, done_field, now)
        append_events(
            conversation_id=selection.conversation_id,
            turn_id=selection.turn_id,
            events=[(event_type, {"selection": selection.pk, "to": [person(u) for u in to]})],
        )
        _tell_people(selection, kind, workspace_id=selection.conversation.workspace_id, to=to)
    return True


def selection_cancel(*, selection: Selection, user=None) -> bool:
    """Cancel a pending question without stopping its turn (its agent is told, and goes on).
    False if it was already settled."""
    return _resolve(selection, Selection.Status.CANCELLED, user=user, via=Via.ADMIN if user else "")


def selections_close_for_turn(*, turn: Turn) -> list[Frame]:
    """When a turn ends: cancel its pending questions and append every ``selection.resolved``
    event it still owes, in order, recording their seqs. Runs inside the transaction that ends
    the turn, before its terminal event (see conversations.services.turn_finish). Returns the
    frames appended."""
    turn.selections.filter(status=Selection.Status.PENDING).update(
        status=Selection.Status.CANCELLED, answered_at=timezone.now()
    )
    owed = list(
        turn.selections.filter(resolved_seq__isnull=True)
        .select_related("answered_by")
        .order_by("ordinal")
    )
    if not owed:
        return []
    frames = append_events(
        conversation_id=turn.conversation_id,
        turn_id=turn.pk,
        events=[
            (TurnEvent.Type.SELECTION_RESOLVED, selection.resolution_payload())
            for selection in owed
        ],
    )
    for selection, frame in zip(owed, frames, strict=True):
        selection.resolved_seq = frame.seq
        selection.save(update_fields=["resolved_seq"])
        announcing.announce(selection=selection, cause="settled")
    return frames

"""Every write to selections: asking, answering, expiring, cancelling, and announcing outcomes.

An answer is validated, then committed with a compare-and-set from ``pending`` (so of two
answers exactly one wins), and only then is the turn woken through its inbox. The wake-up is
just that: the answer lives in the database, and a parked turn re-reads it now and then.
"""

from datetime import timedelta
from functools import partial

from django.db import transaction
from django.utils import timezone

from conversations.events import person
from conversations.exceptions import ApplicationError
from conversations.models import Turn, TurnEvent
from conversations.services import append_events, turn_notify

from .models import Selection
from .validation import clean_answer

ACTIONS = {"dismiss": Selection.Status.DISMISSED, "decline": Selection.Status.DECLINED}


def selection_request(
    *, turn_id: str, ordinal: int, fields: dict, addressee=None, timeout_seconds: float
) -> Selection:
    """Store a question, emit ``selection.requested`` and move the turn to awaiting_input."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().get(pk=turn_id)
        if not turn.is_active:
            raise ApplicationError("turn_not_active", "The turn has ended.", status=409)
        selection = Selection.objects.create(
            conversation_id=turn.conversation_id,
            turn=turn,
            ordinal=ordinal,
            addressee=addressee,
            expires_at=timezone.now() + timedelta(seconds=timeout_seconds),
            **fields,
        )
        turn.status = Turn.Status.AWAITING_INPUT
        turn.save(update_fields=["status"])
        append_events(
            conversation_id=turn.conversation_id,
            turn_id=turn.pk,
            events=[(TurnEvent.Type.SELECTION_REQUESTED, selection.to_payload())],
        )
    return selection


def _wake(selection: Selection) -> None:
    transaction.on_commit(
        partial(turn_notify, selection.turn.inbox, {"type": "selection.wake", "id": selection.pk})
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
    *, selection: Selection, user, answer=None, action: str | None = None
) -> Selection:
    """Answer (or dismiss, or decline) a pending question for ``user``.

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
    with transaction.atomic():
        now = timezone.now()
        won = Selection.objects.filter(
            pk=selection.pk, status=Selection.Status.PENDING, expires_at__gt=now
        ).update(status=status, answer=value, answered_by=user, answered_at=now)
        selection.refresh_from_db()
        if not won:
            if selection.is_pending:  # expired just now
                selection_expire(selection=selection)
                selection.refresh_from_db()
            raise resolved_error(selection)
        _wake(selection)
    return selection


def _settle(selection: Selection, status: str, user=None) -> bool:
    """Compare-and-set a pending question to ``status`` and wake its turn. False if it was not
    pending any more."""
    with transaction.atomic():
        settled = Selection.objects.filter(pk=selection.pk, status=Selection.Status.PENDING).update(
            status=status, answered_by=user, answered_at=timezone.now()
        )
        if settled:
            _wake(selection)
    return bool(settled)


def selection_expire(*, selection: Selection) -> bool:
    """Expire a pending question (its agent is told, and goes on)."""
    return _settle(selection, Selection.Status.EXPIRED)


def selection_cancel(*, selection: Selection, user=None) -> bool:
    """Cancel a pending question without stopping its turn (its agent is told, and goes on)."""
    return _settle(selection, Selection.Status.CANCELLED, user)


def selection_announce(*, selection_id: str) -> Selection:
    """Emit ``selection.resolved`` for a settled question, once, and return the turn to running.

    Called by the turn when it wakes; a question already announced is returned as it is.
    """
    with transaction.atomic():
        selection = (
            Selection.objects.select_for_update()
            .select_related("answered_by", "turn")
            .get(pk=selection_id)
        )
        if selection.is_pending or selection.resolved_seq is not None:
            return selection
        (frame,) = append_events(
            conversation_id=selection.conversation_id,
            turn_id=selection.turn_id,
            events=[(TurnEvent.Type.SELECTION_RESOLVED, selection.resolution_payload())],
        )
        selection.resolved_seq = frame.seq
        selection.save(update_fields=["resolved_seq"])
        Turn.objects.filter(pk=selection.turn_id, status=Turn.Status.AWAITING_INPUT).update(
            status=Turn.Status.RUNNING
        )
    return selection


def selections_close_for_turn(*, turn: Turn) -> list[Selection]:
    """When a turn ends: cancel its pending questions and return every question still owed its
    ``selection.resolved`` event, in order. Runs inside the transaction that ends the turn,
    which appends those events and records their seqs (see conversations.services.turn_finish)."""
    turn.selections.filter(status=Selection.Status.PENDING).update(
        status=Selection.Status.CANCELLED, answered_at=timezone.now()
    )
    owed = turn.selections.filter(resolved_seq__isnull=True).select_related("answered_by")
    return list(owed.order_by("ordinal"))

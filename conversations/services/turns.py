"""The turn state machine: a turn started, begun, asking, steered, stopped and ended.

    queued -> running <-> awaiting_input -> completed | failed | cancelled

Each transition checks where the turn stands, writes its event in the same transaction, and
wakes the turn (see ownership.turn_wake) once that commits. A turn's own writes (asking, its
end) are fenced: see ownership.
"""

from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import ApplicationError
from core.people import person
from core.prepared import PreparedLookup
from core.process import process_id, server_loop

from .. import hooks
from ..events import Frame
from ..models import Conversation, Turn, TurnEvent
from ..notices import people_notify
from .events import append_events
from .ownership import holding, lock_owned_turn, turn_wake

TURN_LOST_ERROR = "The server running this turn stopped before it finished."

# A start and a turn's beginning read these on every turn: compiled once (see core.prepared).
_ACTIVE_TURN = PreparedLookup(
    lambda conversation_id: Turn.objects.filter(
        conversation_id=conversation_id, status__in=Turn.ACTIVE_STATUSES
    ).only("id")[:1]
)
_RUNNING_TURN = PreparedLookup(
    lambda turn_id: Turn.objects.select_related("conversation__workspace", "started_by").filter(
        pk=turn_id
    )
)


def _turn_in_progress(conversation_id: str) -> ApplicationError:
    active = (
        Turn.objects.filter(conversation_id=conversation_id, status__in=Turn.ACTIVE_STATUSES)
        .values_list("id", flat=True)
        .first()
    )
    return ApplicationError(
        "turn_in_progress",
        "This conversation already has an active turn; steer it or stop it first.",
        status=409,
        extra={"turn": active},
    )


def _clean_input(text) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ApplicationError("invalid", "input: may not be blank.")
    if len(text) > settings.PARLEY_MAX_INPUT_CHARS:
        raise ApplicationError(
            "invalid",
            f"input: is longer than {settings.PARLEY_MAX_INPUT_CHARS} characters.",
        )
    return text.strip()


def turn_start(
    *,
    conversation: Conversation,
    user,
    input: str,
    interactive: bool = True,
    confirm_writes: bool = True,
    agent: str = "",
    client: str = "",
    turn_id: str | None = None,
) -> tuple[Turn, Frame]:
    """Start a turn and return it with its ``turn.started`` frame. ``confirm_writes`` false
    lets its agent write and rename files without asking first. ``agent`` names an agent of
    PARLEY_TURN_AGENTS to run it instead of the conversation's (an outside agent's turn);
    ``client``, the outside agent's name (its MCP client), which the page shows for its turn;
    ``turn_id``, an id made beforehand (with models.new_turn_id), for what must be ready to serve
    the turn before it starts.

    The turn and its first event are committed before this returns, so the turn can be tailed
    the moment its id is known; the runner starts once the transaction commits.
    Raises ApplicationError ``turn_in_progress`` (409) when the conversation has an active turn.
    """
    text = _clean_input(input)
    try:
        with transaction.atomic():
            if _ACTIVE_TURN.first(conversation.pk) is not None:
                raise _turn_in_progress(conversation.pk)
            # A process that is shutting down takes no new turns: it leaves them to the others
            # (their upkeep claims turns nobody holds), or to itself once restarted.
            here = {} if server_loop.draining else holding(process_id())
            turn = Turn.objects.create(
                **({"id": turn_id} if turn_id else {}),
                conversation=conversation,
                input=text,
                started_by=user,
                interactive=interactive,
                confirm_writes=confirm_writes,
                agent=agent,
                **here,
            )
            data = {"input": text, "started_by": person(user), "interactive": interactive}
            if not confirm_writes:
                data["confirm_writes"] = False
            if agent:
                data["agent"] = agent
            if client:
                data["client"] = client
            (frame,) = append_events(
                conversation_id=conversation.pk,
                turn_id=turn.pk,
                events=[(TurnEvent.Type.TURN_STARTED, data)],
            )
            if here:
                transaction.on_commit(partial(hooks.turns.get().launch, turn.pk))
    except IntegrityError:
        # The partial unique constraint caught a start that raced ours.
        raise _turn_in_progress(conversation.pk) from None
    return turn, frame


def turn_mark_running(*, turn_id: str, inbox: str, process: str) -> Turn:
    """Move a queued turn to running here. Raises ApplicationError if it is not queued."""
    now = timezone.now()
    updated = Turn.objects.filter(pk=turn_id, status=Turn.Status.QUEUED).update(
        status=Turn.Status.RUNNING,
        inbox=inbox,
        started_at=now,
        **holding(process),
    )
    # A retry whose first attempt committed finds the turn already running here, as wanted.
    retried = Turn.objects.filter(pk=turn_id, status=Turn.Status.RUNNING, runner=process)
    if not updated and not retried.filter(inbox=inbox).exists():
        raise ApplicationError(
            "turn_not_queued", f"Turn {turn_id} is not waiting to run.", status=409
        )
    turn = _RUNNING_TURN.first(str(turn_id))
    if turn is None:
        raise Turn.DoesNotExist("Turn matching query does not exist.")
    return turn


def turn_await_input(*, turn_id: str, process: str) -> Turn:
    """Move a turn that ``process`` runs to awaiting_input, as it asks a question, and return it
    locked: a write of the turn's own, in the caller's transaction (which stores the question;
    see selection.services), fenced (TurnLost unless ``process`` still runs the turn)."""
    turn = lock_owned_turn(turn_id, process)
    turn.status = Turn.Status.AWAITING_INPUT
    turn.save(update_fields=["status"])
    return turn


# Steering and Stop lock the active turn with this (at most one turn is active): compiled once.
_ACTIVE_TURN_FOR_UPDATE = PreparedLookup(
    lambda conversation_id: Turn.objects.select_for_update().filter(
        conversation_id=conversation_id, status__in=Turn.ACTIVE_STATUSES
    )
)


def _active_turn_for_update(conversation_id: str, expected_turn_id) -> Turn:
    """The conversation's active turn, locked; it must be the one the caller expects.

    Raises 409 ``no_active_turn`` or 409 ``turn_mismatch`` (naming the active turn).
    """
    turn = _ACTIVE_TURN_FOR_UPDATE.first(conversation_id)
    if turn is None:
        raise ApplicationError(
            "no_active_turn", "No turn is running in this conversation.", status=409
        )
    if turn.pk != expected_turn_id:
        raise ApplicationError(
            "turn_mismatch",
            f"The active turn is {turn.pk}, not {expected_turn_id}.",
            status=409,
            extra={"turn": turn.pk},
        )
    return turn


def turn_steer(*, conversation: Conversation, user, expected_turn_id: str, input: str) -> Frame:
    """Add input to the active turn, which must be ``expected_turn_id``; the agent gets it at
    its next step. Returns the ``turn.steered`` frame. Starts no turn and takes no overrides."""
    text = _clean_input(input)
    with transaction.atomic():
        turn = _active_turn_for_update(conversation.pk, expected_turn_id)
        (frame,) = append_events(
            conversation_id=conversation.pk,
            turn_id=turn.pk,
            events=[(TurnEvent.Type.TURN_STEERED, {"input": text, "by": person(user)})],
        )
        message = {"type": "turn.steer", "input": text, "seq": frame.seq}
        # Nobody holding it: whoever resumes it reads the steering from the database.
        turn_wake(turn=turn, message=message, resume=False)
    return frame


def turn_cancel(*, conversation: Conversation, user, turn_id: str) -> Turn:
    """Stop the active turn, which must be ``turn_id``. Its task is cancelled (in whichever
    process runs it), its pending questions become cancelled, and it ends with
    ``turn.cancelled`` naming who stopped it. Asking twice is harmless."""
    with transaction.atomic():
        turn = _active_turn_for_update(conversation.pk, turn_id)
        if turn.cancel_requested_at is None:
            turn.cancel_requested_at = timezone.now()
            turn.cancelled_by = user
            turn.save(update_fields=["cancel_requested_at", "cancelled_by"])
        if not turn_wake(turn=turn, message={"type": "turn.cancel"}, resume=False):
            # Nobody runs it (released while it waits, or handed back): end it here.
            turn_finish(turn_id=turn.pk, status=Turn.Status.CANCELLED)
    return turn


def turn_finish(
    *,
    turn_id: str,
    status: str,
    error: str = "",
    detail: str = "",
    process: str | None = None,
    usage: dict | None = None,
) -> list[Frame]:
    """End an active turn with its one terminal event; a turn already ended is left alone.

    ``process`` is given by the process running the turn: the end is then fenced (TurnLost if
    it no longer owns the turn). Without it, the turn is ended whoever runs it (Stop on a turn
    nobody holds).
    Returns the frames written (none when another writer ended the turn first), so every turn
    gets exactly one of turn.completed, turn.failed and turn.cancelled. ``usage`` (the tokens
    its model used) goes into the terminal event's data. A failure's ``error`` is the short
    reason every watcher sees; its ``detail`` is kept on the turn for admins only.
    """
    if status not in Turn.TERMINAL_EVENT_OF_STATUS:
        raise ValueError(f"{status!r} is not a terminal status")
    now = timezone.now()
    with transaction.atomic():
        if process is not None:
            turn = lock_owned_turn(turn_id, process)
        else:
            # Only the turn's own row: PostgreSQL refuses FOR UPDATE across an outer join.
            turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
            if turn is None or not turn.is_active:
                return []
        turn.status = status
        turn.error = error
        turn.failure_detail = detail
        turn.ended_at = now
        turn.save(update_fields=["status", "error", "failure_detail", "ended_at"])
        # Every question the turn asked gets its selection.resolved before the turn ends.
        frames = hooks.questions.get().close_for_turn(turn=turn)
        if status == Turn.Status.FAILED:
            data = {"error": error}
        elif status == Turn.Status.CANCELLED:
            data = {"by": person(turn.cancelled_by)}
        else:
            data = {}
        if usage:
            data["usage"] = usage
        # The person who started it hears of it wherever they are (a notification when the
        # page is hidden), and everyone's count of questions waiting loses the ones it closed.
        people_notify(
            workspace_id=turn.conversation.workspace_id,
            notice={
                "kind": "turn_ended",
                "conversation": turn.conversation_id,
                "turn": turn.pk,
                "status": status,
                "started_by": turn.started_by_id,
            },
        )
        return frames + append_events(
            conversation_id=turn.conversation_id,
            turn_id=turn.pk,
            events=[(Turn.TERMINAL_EVENT_OF_STATUS[status], data)],
        )

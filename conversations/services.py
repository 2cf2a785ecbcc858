"""Every write to conversations, turns and their event log.

Events are appended in the same transaction as the state they record, numbered from the
conversation's counter, and published only once that transaction commits ("write, then
publish"), so whatever a client saw live it can replay.

Lock order. Every transaction that takes more than one row lock takes them in this order, so two
writers never wait on each other in a circle (PostgreSQL's "deadlock detected"):

    Turn  ->  Selection  ->  Conversation (its event counter, always last: see append_events)

Steering, Stop, a turn's writes and its end lock the turn first; an answer locks the turn
before it settles the question (selection.services); the counter is taken by append_events,
which every writer calls last.

Fencing. The writes a turn makes itself (its events, its questions, its end) run only while its
process still owns it: the turn is locked and its ``runner`` checked in the same transaction
(``_lock_owned_turn``). A process whose turn was taken over learns it at its next write, or at its
next lease renewal, and stops that turn. Writes from people and upkeep (answers, steering,
Stop, expiry, claims) are made by whichever process receives them, and are not fenced.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from core.errors import ApplicationError, forbidden, not_found
from core.people import person
from core.process import process_id, server_loop

from . import seams
from .agents import agent_models
from .broadcast import hub
from .events import Frame, FrameEncoder, encode
from .models import Conversation, Membership, Turn, TurnEvent, TurnStep, Watcher, Workspace
from .notices import people_notify

# An event to append: its type and data. It is stamped when it is recorded.
EventSpec = tuple[str, dict]

# A conversation's title, as its column holds it.
MAX_TITLE_CHARS = Conversation._meta.get_field("title").max_length

TURN_LOST_ERROR = "The server running this turn stopped before it finished."


class TurnLost(ApplicationError):
    """This process no longer owns the turn (another took it over, or it has ended): it must
    stop it and write nothing more."""

    def __init__(self, turn_id: str):
        super().__init__(
            "turn_lost", f"Turn {turn_id} is no longer run by this process.", status=409
        )


class TurnReleased(TurnLost):
    """This process let go of the turn on purpose (released from memory while it waits for an
    answer, or handed back at shutdown): whoever claims it next resumes it."""


def _claim_owned_turn(turn_id: str, process: str, **changes) -> bool:
    """Lock a turn this process runs and renew its lease (a turn that writes is alive), in one
    statement. Raises TurnLost if the turn has ended or another process owns it (fencing: see
    the module's docstring). False if ``changes`` holds a ``batches_written`` the turn has
    already reached (the batch is stored: a retry after a lost commit acknowledgement)."""
    owned = Turn.objects.filter(pk=turn_id, runner=process, status__in=Turn.ACTIVE_STATUSES)
    claim = owned
    if "batches_written" in changes:
        claim = owned.filter(batches_written__lt=changes["batches_written"])
    if claim.update(lease_expires_at=_lease_end(), **changes):
        return True
    if not owned.exists():
        raise TurnLost(turn_id)
    return False


def lock_owned_turn(turn_id: str, process: str) -> Turn:
    """Lock a turn this process runs, for one of its own writes, and return it. Raises TurnLost
    if the turn has ended or another process owns it."""
    _claim_owned_turn(turn_id, process)
    return Turn.objects.get(pk=turn_id)


def _lease_end() -> datetime:
    return timezone.now() + timedelta(seconds=settings.PARLEY_TURN_LEASE_SECONDS)


def _unowned(now: datetime) -> Q:
    """Active turns nobody holds: handed back, released, or whose process stopped renewing."""
    return Q(runner="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)


def is_unowned(turn: Turn, now: datetime) -> bool:
    return not turn.runner or turn.lease_expires_at is None or turn.lease_expires_at < now


# What nobody holding a turn looks like.
LET_GO = {"runner": "", "inbox": "", "lease_expires_at": None}


_EVENT_COLUMNS = ("conversation", "turn", "seq", "type", "data", "created_at")
_STEP_COLUMNS = ("turn", "index", "kind", "name", "digest", "said", "outcome")


def _insert_rows(model, fields: tuple[str, ...], rows: list[tuple]) -> None:
    """Insert rows (values in the order of ``fields``, JSON already encoded) with multi-row
    INSERT statements: the hot paths' writes, which skip model instances (the ORM's
    bulk_create spent most of a flood's time preparing fields, per the bench's profiles).

    One statement per chunk, not executemany: Python's sqlite3 releases and retakes the GIL for
    every row of an executemany, and with the server loop busy each retake can wait out the
    interpreter's switch interval (122 rows/s against 44,600 in a test with one busy thread).
    """
    quote = connection.ops.quote_name
    columns = ", ".join(quote(model._meta.get_field(f).column) for f in fields)
    prefix = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES "
    row_placeholder = "(" + ", ".join(["%s"] * len(fields)) + ")"
    limit = connection.features.max_query_params
    per_statement = limit // len(fields) if limit else len(rows)
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            cursor.execute(
                prefix + ", ".join([row_placeholder] * len(chunk)),
                [value for row in chunk for value in row],
            )


def append_events(*, conversation_id: str, turn_id: str, events: list[EventSpec]) -> list[Frame]:
    """Number and store events, and publish them once the surrounding transaction commits.

    Must run inside the transaction that stores the state the events record. The counter
    update takes the conversation's row lock (the write lock on SQLite) until commit, so two
    writers never take the same seq, and a rollback returns the numbers with the rows: no holes.

    This is the hot path of every turn, so it skips model instances: each event's data is
    encoded once, for its row and its frame, and the rows go in as plain multi-row inserts (the
    ORM's bulk_create spent most of a flood's time preparing fields, per the bench's profile).
    """
    count = len(events)
    # The counter's update takes the lock and stamps the conversation's latest activity, never
    # backwards; the stamp read back under that lock is the events' ts, so ts rises with seq
    # across every writer (and every process, whatever its clock says).
    Conversation.objects.filter(pk=conversation_id).update(
        last_seq=F("last_seq") + count,
        last_activity_at=Greatest("last_activity_at", Value(timezone.now(), DateTimeField())),
    )
    last, recorded_at = (
        Conversation.objects.filter(pk=conversation_id)
        .values_list("last_seq", "last_activity_at")
        .get()
    )
    first = last - count + 1
    stored_at = connection.ops.adapt_datetimefield_value(recorded_at)
    encoder = FrameEncoder(conversation_id)
    rows, frames = [], []
    for seq, (type_, data) in enumerate(events, start=first):
        data_json = encode(data)
        rows.append((conversation_id, turn_id, seq, type_, data_json, stored_at))
        frames.append(encoder.frame(seq, type_, turn_id, recorded_at, data_json))
    _insert_rows(TurnEvent, _EVENT_COLUMNS, rows)
    transaction.on_commit(partial(hub.publish, conversation_id, frames))
    return frames


def turn_events_append(
    *,
    conversation_id: str,
    turn_id: str,
    process: str,
    events: list[EventSpec],
    batch: int,
    steps: list[dict] = (),
) -> list[Frame]:
    """Append a running turn's ``batch``-th batch of events (counted from 1), with the journal
    steps completed in it, if ``process`` still owns the turn (else TurnLost, and nothing is
    written). Returns their frames (already numbered), or none if that batch is already stored,
    so that a retry writes it once."""
    with transaction.atomic():
        if not _claim_owned_turn(turn_id, process, batches_written=batch):
            return []
        turn_steps_record(turn_id=turn_id, steps=steps)
        if not events:
            return []
        return append_events(conversation_id=conversation_id, turn_id=turn_id, events=events)


def turn_steps_record(*, turn_id: str, steps) -> None:
    """Store journal steps (dicts of TurnStep's fields but the turn), inside the transaction
    that stores their events."""
    if steps:
        rows = [
            (turn_id, *(step[name] for name in _STEP_COLUMNS[1:-1]), encode(step["outcome"]))
            for step in steps
        ]
        _insert_rows(TurnStep, _STEP_COLUMNS, rows)


def conversation_create(
    *, workspace: Workspace, user, title: str, agent: str | None = None, model: str = ""
) -> Conversation:
    """Create a conversation. ``model`` picks one of the models its agent offers ('' for the
    agent's default). Raises ApplicationError for a blank title, an unknown agent or a model
    the agent does not offer."""
    title = (title or "").strip()
    if not title:
        raise ApplicationError("invalid", "title: may not be blank.")
    agent = agent or settings.PARLEY_DEFAULT_AGENT
    if agent not in settings.PARLEY_AGENTS:
        known = ", ".join(sorted(settings.PARLEY_AGENTS))
        raise ApplicationError("unknown_agent", f"No agent named '{agent}'; known: {known}.")
    model = (model or "").strip()
    if model:
        offered = agent_models(agent)
        if model not in offered:
            choices = ", ".join(offered) if offered else "none (it has one model)"
            raise ApplicationError(
                "invalid",
                f"model: the agent '{agent}' offers no model '{model}'; it offers {choices}.",
            )
    return Conversation.objects.create(
        workspace=workspace, title=title[:200], agent=agent, model=model, created_by=user
    )


@dataclass(frozen=True)
class ConversationRights:
    """What a person may do to a conversation itself (its turns are another matter)."""

    rename: bool
    archive: bool
    delete: bool


def conversation_rights(
    *, conversation: Conversation, user, role: str | None
) -> ConversationRights:
    """What ``user``, whose role in the conversation's workspace is ``role`` (None: no member),
    may do to it: owners rename, archive and delete any conversation; members rename and
    archive (and unarchive) those they started, and delete none (it takes the team's history
    with it); viewers do none of it."""
    if role not in Membership.ACTING_ROLES:
        return ConversationRights(rename=False, archive=False, delete=False)
    owner = role == Membership.Role.OWNER
    started_it = conversation.created_by_id is not None and conversation.created_by_id == user.pk
    return ConversationRights(rename=owner or started_it, archive=owner or started_it, delete=owner)


def _refuse(role: str | None, doing: str, who: str) -> ApplicationError:
    if role not in Membership.ACTING_ROLES:
        return forbidden(f"Viewers may watch but not {doing}.")
    return forbidden(f"Only {who} may {doing}.")


def conversation_update(
    *,
    conversation: Conversation,
    user,
    role: str,
    title: str | None = None,
    archived: bool | None = None,
) -> Conversation:
    """Rename a conversation and/or archive it (``archived`` true; archiving an archived one
    keeps its first date) or bring it back (false), all or nothing. Returns it as stored.

    Raises ApplicationError ``invalid`` (400) when there is nothing to change or the title is
    blank or too long, and ``forbidden`` (403) for a change the person may not make (see
    conversation_rights); then nothing changes.
    """
    if title is None and archived is None:
        raise ApplicationError("invalid", "Nothing to change: give a title, archived, or both.")
    changes = {}
    if title is not None:
        title = title.strip()
        if not title:
            raise ApplicationError("invalid", "title: may not be blank.")
        if len(title) > MAX_TITLE_CHARS:
            raise ApplicationError(
                "invalid", f"title: may be at most {MAX_TITLE_CHARS} characters."
            )
        changes["title"] = title
    if archived is not None:
        changes["archived_at"] = (
            Coalesce("archived_at", Value(timezone.now())) if archived else None
        )
    rights = conversation_rights(conversation=conversation, user=user, role=role)
    started = "the workspace's owners and the person who started a conversation"
    if title is not None and not rights.rename:
        raise _refuse(role, "rename conversations", started)
    if archived is not None and not rights.archive:
        raise _refuse(role, "archive conversations", started)
    # Only these columns: the row's counter and activity belong to append_events.
    Conversation.objects.filter(pk=conversation.pk).update(**changes)
    conversation.refresh_from_db(fields=["title", "archived_at"])
    return conversation


def conversation_delete(*, conversation: Conversation, user, role: str) -> None:
    """Delete a conversation with everything in it: its turns, events, journal and questions.

    Raises ApplicationError ``forbidden`` (403) unless the person is one of the workspace's
    owners, and ``turn_in_progress`` (409, naming the turn) while a turn is active: its agent
    would go on working, and its watchers and whoever waits on its questions with it, in a
    conversation that no longer exists. Stop it first.
    """
    if not conversation_rights(conversation=conversation, user=user, role=role).delete:
        raise _refuse(role, "delete conversations", "the workspace's owners")
    with transaction.atomic():
        # The counter's lock: a turn starting meanwhile has either committed (and is seen
        # below) or waits for this transaction. Taken before the turns' rows, against the
        # module's lock order, but only once no turn is active: nothing then holds one of its
        # turns and waits for the counter.
        locked = Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if locked is None:
            raise not_found("Conversation")
        active = (
            Turn.objects.filter(conversation_id=conversation.pk, status__in=Turn.ACTIVE_STATUSES)
            .values_list("id", flat=True)
            .first()
        )
        if active is not None:
            raise ApplicationError(
                "turn_in_progress",
                "A turn is running in this conversation; stop it before deleting the conversation.",
                status=409,
                extra={"turn": active},
            )
        locked.delete()


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
) -> tuple[Turn, Frame]:
    """Start a turn and return it with its ``turn.started`` frame. ``confirm_writes`` false
    lets its agent write and rename files without asking first. ``agent`` names an agent of
    PARLEY_TURN_AGENTS to run it instead of the conversation's (an outside agent's turn).

    The turn and its first event are committed before this returns, so the turn can be tailed
    the moment its id is known; the runner starts once the transaction commits.
    Raises ApplicationError ``turn_in_progress`` (409) when the conversation has an active turn.
    """
    text = _clean_input(input)
    try:
        with transaction.atomic():
            if Turn.objects.filter(
                conversation=conversation, status__in=Turn.ACTIVE_STATUSES
            ).exists():
                raise _turn_in_progress(conversation.pk)
            # A process that is shutting down takes no new turns: it leaves them to the others
            # (their upkeep claims turns nobody holds), or to itself once restarted.
            here = {} if server_loop.draining else {"runner": process_id()}
            turn = Turn.objects.create(
                conversation=conversation,
                input=text,
                started_by=user,
                interactive=interactive,
                confirm_writes=confirm_writes,
                agent=agent,
                lease_expires_at=_lease_end() if here else None,
                **here,
            )
            data = {"input": text, "started_by": person(user), "interactive": interactive}
            if not confirm_writes:
                data["confirm_writes"] = False
            if agent:
                data["agent"] = agent
            (frame,) = append_events(
                conversation_id=conversation.pk,
                turn_id=turn.pk,
                events=[(TurnEvent.Type.TURN_STARTED, data)],
            )
            if here:
                transaction.on_commit(partial(seams.turns.get().launch, turn.pk))
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
        runner=process,
        started_at=now,
        lease_expires_at=_lease_end(),
    )
    # A retry whose first attempt committed finds the turn already running here, as wanted.
    retried = Turn.objects.filter(pk=turn_id, status=Turn.Status.RUNNING, runner=process)
    if not updated and not retried.filter(inbox=inbox).exists():
        raise ApplicationError(
            "turn_not_queued", f"Turn {turn_id} is not waiting to run.", status=409
        )
    return Turn.objects.select_related("conversation__workspace", "started_by").get(pk=turn_id)


def turn_notify(inbox: str, message: dict) -> None:
    """Send a control message to a turn's inbox, from any thread, after the caller's commit.

    A wake-up only: what it announces is already stored, and a turn that misses it finds out
    from the database (see selection.parking). An empty inbox means the turn has not started
    running; it reads the database when it does.
    """
    if inbox:
        seams.turns.get().notify(inbox, message)


def _active_turn_for_update(conversation_id: str, expected_turn_id) -> Turn:
    """The conversation's active turn, locked; it must be the one the caller expects.

    Raises 409 ``no_active_turn`` or 409 ``turn_mismatch`` (naming the active turn).
    """
    turn = (
        Turn.objects.select_for_update()
        .filter(conversation_id=conversation_id, status__in=Turn.ACTIVE_STATUSES)
        .first()
    )
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
        transaction.on_commit(partial(turn_notify, turn.inbox, message))
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
        if is_unowned(turn, timezone.now()):
            # Nobody runs it (released while it waits, or handed back): end it here.
            turn_finish(turn_id=turn.pk, status=Turn.Status.CANCELLED)
        else:
            transaction.on_commit(partial(turn_notify, turn.inbox, {"type": "turn.cancel"}))
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
        frames = seams.questions.get().close_for_turn(turn=turn)
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


def turns_renew(*, process: str, local_turn_ids: list[str]) -> list[str]:
    """Renew the leases of the turns this process runs. Returns the ids of local turns this
    process no longer owns (taken over, or ended elsewhere), whose agents it must stop."""
    owned = Turn.objects.filter(
        pk__in=local_turn_ids, runner=process, status__in=Turn.ACTIVE_STATUSES
    )
    owned.update(lease_expires_at=_lease_end())
    still_owned = set(owned.values_list("pk", flat=True))
    return [turn_id for turn_id in local_turn_ids if turn_id not in still_owned]


@dataclass(frozen=True)
class Unowned:
    """An active turn nobody holds, as upkeep finds it."""

    turn_id: str
    agent: str
    parked: bool  # waiting for an answer: claimed when the question is settled, not before
    reason: str  # for turn.resumed: why it changed hands


def turns_unowned(*, process: str, local_turn_ids: list[str], any_owner: bool) -> list[Unowned]:
    """The active turns nobody holds, not run here. With ``any_owner`` every active turn not run
    here counts (at start-up, when no other process can exist)."""
    now = timezone.now()
    unowned = _unowned(now)
    if any_owner:
        unowned |= ~Q(runner=process)
    rows = (
        Turn.objects.filter(unowned, status__in=Turn.ACTIVE_STATUSES)
        .exclude(pk__in=local_turn_ids)
        .values_list("pk", "agent", "conversation__agent", "status", "runner", "lease_expires_at")
    )
    found = []
    for turn_id, own_agent, agent, status, runner, lease in rows:
        agent = own_agent or agent
        if any_owner:
            reason = "restart"
        elif not runner or lease is None:
            reason = "handed_back"
        else:
            reason = "process_stopped"
        parked = status == Turn.Status.AWAITING_INPUT
        found.append(Unowned(turn_id, agent, parked, reason))
    return found


def turns_let_go(*, turn_ids: list[str], any_owner: bool = False) -> None:
    """Record that nobody holds these parked turns any more (their process stopped): the admin
    shows no holder, and whoever settles the question resumes the turn. Turns claimed since
    they were found are left alone (unless ``any_owner``: see turns_unowned)."""
    turns = Turn.objects.filter(pk__in=turn_ids, status=Turn.Status.AWAITING_INPUT, runner__gt="")
    if not any_owner:
        turns = turns.filter(_unowned(timezone.now()))
    turns.update(**LET_GO)


def turn_hold(*, turn: Turn) -> str | None:
    """Hold a turn nobody holds for this process, which resumes it once the caller's transaction
    commits (claiming it with ``held``): meanwhile another process's upkeep, finding it active
    and unheld, would take it first and tell its watchers the wrong reason. Held with no inbox,
    which no turn that runs has. Returns who held it before ("" if nobody), or None if this
    process cannot run it (no server loop, or shutting down): upkeep elsewhere will."""
    if server_loop.loop is None or server_loop.draining:
        return None
    Turn.objects.filter(pk=turn.pk).update(
        runner=process_id(), inbox="", lease_expires_at=_lease_end()
    )
    return turn.runner


def turn_claim(
    *, turn_id: str, process: str, inbox: str, any_owner: bool = False, held: bool = False
):
    """Take an active turn nobody holds (see turns_unowned), or one held for this process (see
    turn_hold), to resume it here. Returns the turn, with ``previous_runner`` and
    ``previous_status`` set, or None if it has ended or someone holds it."""
    now = timezone.now()
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or not turn.is_active:
            return None
        held_here = held and turn.runner == process and not turn.inbox
        if turn.runner == process and not held_here:
            return None
        if not (held_here or is_unowned(turn, now) or any_owner):
            return None
        previous, status = turn.runner, turn.status
        turn.runner, turn.inbox, turn.lease_expires_at = process, inbox, _lease_end()
        fields = ["runner", "inbox", "lease_expires_at"]
        if turn.status == Turn.Status.QUEUED:
            turn.status, turn.started_at = Turn.Status.RUNNING, now
            fields += ["status", "started_at"]
        turn.save(update_fields=fields)
    turn = Turn.objects.select_related("conversation__workspace", "started_by").get(pk=turn_id)
    turn.previous_runner, turn.previous_status = previous, status
    return turn


def turn_release(*, turn_id: str, process: str) -> bool:
    """Let go of a turn parked on a question, to free this process's memory: whoever settles
    the question then resumes it. False (and nothing changes) if the question was settled
    meanwhile (the turn goes on here) or the turn is no longer this process's."""
    return bool(
        Turn.objects.filter(pk=turn_id, runner=process, status=Turn.Status.AWAITING_INPUT).update(
            **LET_GO
        )
    )


def turn_hand_back(*, turn_id: str, process: str) -> bool:
    """Let go of a turn at shutdown, so that another process resumes it at once."""
    return bool(
        Turn.objects.filter(pk=turn_id, runner=process, status__in=Turn.ACTIVE_STATUSES).update(
            **LET_GO
        )
    )


def membership_set(*, workspace: Workspace, user, role: str) -> Membership:
    """Add a person to a workspace or change their role."""
    if role not in Membership.Role.values:
        raise ApplicationError(
            "invalid", f"role: must be one of {', '.join(Membership.Role.values)}."
        )
    membership, _ = Membership.objects.update_or_create(
        workspace=workspace, user=user, defaults={"role": role}
    )
    return membership


def watcher_add(*, conversation_id: str, user, process: str) -> Watcher:
    """Record a socket watching a conversation; everyone watching is told who is here."""
    watcher = Watcher.objects.create(
        conversation_id=conversation_id, user=user, process=process, seen_at=timezone.now()
    )
    transaction.on_commit(partial(hub.presence_changed, conversation_id))
    return watcher


def watcher_remove(*, watcher: Watcher) -> None:
    """Forget a socket that closed; everyone still watching is told who is here."""
    Watcher.objects.filter(pk=watcher.pk).delete()
    transaction.on_commit(partial(hub.presence_changed, watcher.conversation_id))


def watchers_upkeep(*, process: str, reap_foreign: bool, forget_others: bool = True) -> None:
    """Renew this process's watchers and (with ``forget_others``) forget those of processes
    that stopped renewing theirs (with ``reap_foreign`` too, those of every other process: see
    turns_unowned)."""
    now = timezone.now()
    Watcher.objects.filter(process=process).update(seen_at=now)
    if not forget_others:
        return
    gone = Watcher.objects.exclude(process=process)
    if not reap_foreign:
        gone = gone.filter(seen_at__lt=now - timedelta(seconds=settings.PARLEY_TURN_LEASE_SECONDS))
    conversation_ids = set(gone.values_list("conversation_id", flat=True))
    if conversation_ids:
        gone.delete()
        for conversation_id in conversation_ids:
            transaction.on_commit(partial(hub.presence_changed, conversation_id))

"""Who holds a turn: the process that runs it (its ``runner``), its control ``inbox``, and the
lease that process renews. The one module that knows what holding a turn means.

A turn's own writes are fenced here (``lock_owned_turn``: TurnLost once another process took it
over); a waiting turn is woken here (``turn_wake``: through its owner's inbox, or resumed in
this process if nobody holds it); and the runtime claims, renews, releases and hands back
turns through the services below.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from core.errors import ApplicationError
from core.prepared import PreparedLookup
from core.process import process_id, server_loop

from .. import hooks
from ..models import Turn


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


def claim_owned_turn(turn_id: str, process: str, *, batches_written: int | None = None) -> bool:
    """Lock a turn this process runs and renew its lease (a turn that writes is alive), in one
    statement. Raises TurnLost if the turn has ended or another process owns it (fencing: see
    conversations.services). With ``batches_written``, records it, and is False if the turn has
    already reached it (the batch is stored: a retry after a lost commit acknowledgement)."""
    batch = batches_written is not None
    lease = connection.ops.adapt_datetimefield_value(_lease_end())
    params = [lease, *([batches_written] if batch else []), turn_id, process]
    params += [*Turn.ACTIVE_STATUSES, *([batches_written] if batch else [])]
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql(batch), params)
        if cursor.rowcount:
            return True
    if not Turn.objects.filter(
        pk=turn_id, runner=process, status__in=Turn.ACTIVE_STATUSES
    ).exists():
        raise TurnLost(turn_id)
    return False


def _claim_sql(batch: bool) -> str:
    """The claim's UPDATE, built once per database: it runs for every batch a turn writes, where
    the ORM compiled it afresh each time (a share of every event's path in the bench's
    profile)."""
    key = (connection.vendor, batch)
    if (sql := _CLAIMS.get(key)) is None:
        quote = connection.ops.quote_name
        lease, batches = quote("lease_expires_at"), quote("batches_written")
        statuses = ", ".join(["%s"] * len(Turn.ACTIVE_STATUSES))
        sql = _CLAIMS[key] = (
            f"UPDATE {quote(Turn._meta.db_table)} SET {lease} = %s"
            + (f", {batches} = %s" if batch else "")
            + f" WHERE {quote('id')} = %s AND {quote('runner')} = %s"
            + f" AND {quote('status')} IN ({statuses})"
            + (f" AND {batches} < %s" if batch else "")
        )
    return sql


_CLAIMS: dict[tuple[str, bool], str] = {}


def lock_owned_turn(turn_id: str, process: str) -> Turn:
    """Lock a turn this process runs, for one of its own writes, and return it. Raises TurnLost
    if the turn has ended or another process owns it."""
    claim_owned_turn(turn_id, process)
    turn = _OWNED_TURN.first(str(turn_id))
    if turn is None:
        raise Turn.DoesNotExist("Turn matching query does not exist.")
    return turn


# A turn's own writes (a question asked, its end) read it here: compiled once, with its
# conversation, which the question's notice needs (see core.prepared).
_OWNED_TURN = PreparedLookup(
    lambda turn_id: Turn.objects.select_related("conversation").filter(pk=turn_id)
)


def _lease_end() -> datetime:
    return timezone.now() + timedelta(seconds=settings.PARLEY_TURN_LEASE_SECONDS)


def holding(process: str) -> dict:
    """The fields of a turn that ``process`` holds from now on (one it starts or begins)."""
    return {"runner": process, "lease_expires_at": _lease_end()}


def unowned(now: datetime | None = None) -> Q:
    """Turns nobody holds: handed back, released, or whose process stopped renewing."""
    now = now or timezone.now()
    return Q(runner="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)


def is_unowned(turn: Turn, now: datetime | None = None) -> bool:
    """Whether nobody holds ``turn`` (see unowned)."""
    return why_unowned(turn, now) is not None


def why_unowned(turn: Turn, now: datetime | None = None) -> str | None:
    """Why nobody holds ``turn``: ``let_go`` (handed back, or released from memory while it
    waits for an answer), ``lapsed`` (its process stopped renewing its lease), or None if a
    process holds it."""
    if not turn.runner or turn.lease_expires_at is None:
        return "let_go"
    if turn.lease_expires_at < (now or timezone.now()):
        return "lapsed"
    return None


# What nobody holding a turn looks like.
LET_GO = {"runner": "", "inbox": "", "lease_expires_at": None}


def turn_wake(*, turn: Turn, message: dict, resume: bool = True) -> bool:
    """Wake ``turn`` once the caller's transaction commits, with ``message`` (a wake-up only:
    what it announces is what that transaction stores). The caller has locked the turn.

    A turn some process holds gets the message in its inbox, wherever it runs (a turn with no
    inbox has not begun, and reads the database when it does). One nobody holds (released from
    memory while it waited, handed back, or its process stopped) is, with ``resume``, held for
    this process and resumed here from its journal once the transaction commits, going on with
    what was stored (if this process cannot run it, upkeep elsewhere claims it); without
    ``resume``, nothing is done and False is returned, for the caller to decide (Stop ends
    it). Answers, dismissals, expiry, a question cancelled, steering and Stop all come here.
    """
    if turn.is_active and is_unowned(turn):
        if not resume:
            return False
        previous = _turn_hold(turn)
        resume_here = partial(
            hooks.turns.get().resume, turn.pk, "question_settled", held_from=previous
        )
        transaction.on_commit(resume_here)
    elif turn.inbox:
        transaction.on_commit(partial(hooks.turns.get().notify, turn.inbox, message))
    return True


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
    nobody = unowned(now)
    if any_owner:
        nobody |= ~Q(runner=process)
    rows = (
        Turn.objects.filter(nobody, status__in=Turn.ACTIVE_STATUSES)
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
        turns = turns.filter(unowned())
    turns.update(**LET_GO)


def _turn_hold(turn: Turn) -> str | None:
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

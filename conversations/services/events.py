"""The event log: events numbered from their conversation's counter, stored in the transaction
that stores what they record, and published once it commits ("write, then publish"); and a
turn's journal steps, stored with its events."""

from datetime import datetime
from functools import partial

from django.db import connection, transaction
from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from .. import hooks
from ..broadcast import hub
from ..events import MESSAGE_EVENT_TYPES, Frame, FrameEncoder, encode
from ..models import Conversation, TurnEvent, TurnStep
from ..notices import people_notify
from .ownership import claim_owned_turn

# An event to append: its type and data. It is stamped when it is recorded.
EventSpec = tuple[str, dict]

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


def _take_seqs_sql() -> str:
    """The counter's statement for this database: it takes ``count`` seqs, stamps the latest
    activity (never backwards) and reads them back, in one round trip (RETURNING: SQLite 3.35+,
    PostgreSQL). Built once: every batch of every turn, and every answer, runs it, and the ORM
    would compile an update and a read for each (a share of the answer's path in the bench's
    profile)."""
    if (sql := _TAKE_SEQS.get(connection.vendor)) is None:
        quote = connection.ops.quote_name
        greatest = "MAX" if connection.vendor == "sqlite" else "GREATEST"
        seq, at = quote("last_seq"), quote("last_activity_at")
        sql = _TAKE_SEQS[connection.vendor] = (
            f"UPDATE {quote(Conversation._meta.db_table)} SET {seq} = {seq} + %s, "
            f"{at} = {greatest}({at}, %s) WHERE {quote('id')} = %s "
            f"RETURNING {seq}, {at}, {quote('workspace_id')}"
        )
    return sql


_TAKE_SEQS: dict[str, str] = {}


def _take_seqs(conversation_id: str, count: int) -> tuple[int, datetime, int]:
    """Take ``count`` seqs from the conversation's counter (its row lock held until commit):
    the last of them, the events' stamp and the conversation's workspace."""
    now = timezone.now()
    if not connection.features.can_return_columns_from_insert:
        Conversation.objects.filter(pk=conversation_id).update(
            last_seq=F("last_seq") + count,
            last_activity_at=Greatest("last_activity_at", Value(now, DateTimeField())),
        )
        return (
            Conversation.objects.filter(pk=conversation_id)
            .values_list("last_seq", "last_activity_at", "workspace_id")
            .get()
        )
    stamp = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(_take_seqs_sql(), [count, stamp, conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"No conversation {conversation_id}")
    last, recorded_at, workspace_id = row
    if not isinstance(recorded_at, datetime) or timezone.is_naive(recorded_at):
        # SQLite's text (or its naive datetime, where the column's declared type converts it),
        # made what the ORM would give: an aware datetime.
        recorded_at = connection.ops.convert_datetimefield_value(recorded_at, None, connection)
    return last, recorded_at, workspace_id


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
    last, recorded_at, workspace_id = _take_seqs(conversation_id, count)
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
    # What people said, asked and answered: indexed for search in this same transaction, and one
    # notice per batch that holds any, never per delta (the sidebars and home lists of the
    # workspace's people read again what changed: see activity).
    if messages := [
        (seq, type_, data)
        for seq, (type_, data) in enumerate(events, start=first)
        if type_ in MESSAGE_EVENT_TYPES
    ]:
        hooks.index.get().store(
            conversation_id=conversation_id, events=messages, created_at=recorded_at
        )
        people_notify(
            workspace_id=workspace_id,
            notice={"kind": "activity", "conversation": conversation_id},
        )
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
        if not claim_owned_turn(turn_id, process, batches_written=batch):
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

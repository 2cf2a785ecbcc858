"""The events a conversation records: their types, the envelope (built in exactly one place),
and its once-per-process encoding as a frame."""

import struct
from dataclasses import dataclass, field
from datetime import datetime

import orjson
from django.db import models

from core.errors import ApplicationError


class EventType(models.TextChoices):
    TURN_STARTED = "turn.started"
    MESSAGE_DELTA = "message.delta"
    MESSAGE_COMPLETED = "message.completed"
    TOOL_STARTED = "tool.started"
    TOOL_COMPLETED = "tool.completed"
    SELECTION_REQUESTED = "selection.requested"
    SELECTION_RESOLVED = "selection.resolved"
    SELECTION_REMINDED = "selection.reminded"
    SELECTION_ESCALATED = "selection.escalated"
    TURN_STEERED = "turn.steered"
    TURN_RESUMED = "turn.resumed"
    TURN_NOTICE = "turn.notice"
    TURN_COMPLETED = "turn.completed"
    TURN_FAILED = "turn.failed"
    TURN_CANCELLED = "turn.cancelled"


# The events that are messages, as people count what is new in a conversation (its unread count):
# inputs, the agent's completed messages, questions and their answers; never the deltas.
MESSAGE_EVENT_TYPES = frozenset(
    {
        EventType.TURN_STARTED.value,
        EventType.TURN_STEERED.value,
        EventType.MESSAGE_COMPLETED.value,
        EventType.SELECTION_REQUESTED.value,
        EventType.SELECTION_RESOLVED.value,
    }
)

# Every turn ends with exactly one of these, last.
TERMINAL_EVENT_TYPES = frozenset(
    {EventType.TURN_COMPLETED.value, EventType.TURN_FAILED.value, EventType.TURN_CANCELLED.value}
)


def format_ts(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a Z, as in ``2026-11-22T10:00:00.123Z``."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def event_envelope(
    *, seq: int, type: str, conversation_id: str, turn_id: str, created_at: datetime, data: dict
) -> dict:
    """The one shape of an event on every channel: WebSocket, SSE, JSON pages and the admin."""
    return {
        "seq": seq,
        "type": type,
        "conversation": conversation_id,
        "turn": turn_id,
        "ts": format_ts(created_at),
        "data": data,
    }


def encode(payload) -> str:
    """Compact JSON text (orjson: the hot paths encode every event once, and fast)."""
    return orjson.dumps(payload).decode()


@dataclass(frozen=True, slots=True)
class Frame:
    """An event encoded once, with what the fan-out needs to read without decoding it."""

    seq: int
    type: str
    turn_id: str
    text: str
    _wire: bytes | None = field(default=None, compare=False, repr=False)

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_EVENT_TYPES

    @property
    def wire(self) -> bytes:
        """The event as a WebSocket text message, as a server sends it (one final frame, not
        masked): made once, however many sockets it goes to."""
        wire = self._wire
        if wire is None:
            wire = websocket_text(self.text.encode())
            object.__setattr__(self, "_wire", wire)
        return wire


def websocket_text(payload: bytes) -> bytes:
    """``payload`` (UTF-8) framed as one unmasked WebSocket text message (RFC 6455, 5.2)."""
    size = len(payload)
    if size < 126:
        header = bytes((0x81, size))
    elif size < 1 << 16:
        header = struct.pack("!BBH", 0x81, 126, size)
    else:
        header = struct.pack("!BBQ", 0x81, 127, size)
    return header + payload


class FrameEncoder:
    """Encodes a conversation's events as frames: ``encode(event_envelope(...))``, assembled
    around the event's already-encoded data, so the data of an event is encoded exactly once
    (for its row and its frame alike). The hot paths (writing, replaying) use this; the test
    suite checks it against event_envelope for every kind of event."""

    def __init__(self, conversation_id: str):
        self._conversation = encode(conversation_id)
        # Quoted strings (types, turn ids) and timestamps, which repeat within a batch or page.
        self._quoted: dict = {}

    def _quote(self, text: str) -> str:
        quoted = self._quoted.get(text)
        if quoted is None:
            quoted = self._quoted[text] = encode(text)
        return quoted

    def frame(self, seq: int, type: str, turn_id: str, created_at: datetime, data_json: str):
        ts = self._quoted.get(created_at)
        if ts is None:
            ts = self._quoted[created_at] = encode(format_ts(created_at))
        text = (
            f'{{"seq":{seq},"type":{self._quote(type)},"conversation":{self._conversation},'
            f'"turn":{self._quote(turn_id)},"ts":{ts},"data":{data_json}}}'
        )
        return Frame(seq=seq, type=type, turn_id=turn_id, text=text)


# The largest number every database stores in a bigint.
MAX_SEQ = 2**63 - 1


def parse_seq(value, name: str = "from_seq") -> int:
    """A non-negative whole number from a frame or a query string; ApplicationError otherwise."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        # A seq fits in 19 digits; a longer string is refused before int() reads it all.
        value = int(value.strip()) if len(value.strip()) <= 19 else -1
    if not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        raise ApplicationError(_seq_code(name), f"{name} must be a whole number, 0 or more.")
    return value


def check_seq_within(seq: int, latest_seq: int, name: str = "from_seq") -> None:
    if seq > latest_seq:
        raise ApplicationError(
            _seq_code(name),
            f"{name} {seq} is beyond the end of this conversation (latest seq {latest_seq}).",
        )


def _seq_code(name: str) -> str:
    return "invalid_" + name.lower().replace("-", "_")

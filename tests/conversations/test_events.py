"""The event envelope has one shape, however it is encoded."""

import json
from datetime import UTC, datetime

import pytest
from websockets.frames import Frame as WebSocketFrame
from websockets.frames import Opcode
from websockets.streams import StreamReader

from conversations.events import Frame, FrameEncoder, encode, event_envelope
from conversations.models import Turn, TurnEvent
from conversations.sse import sse_frame

AWKWARD = {
    "text": 'quotes " and \\ backslashes, </script><b>tags</b>, é, 🦜, tab\t, newline\n',
    "nested": {"list": [1, 2.5, None, True], "empty": {}},
}


@pytest.mark.parametrize("event_type", TurnEvent.Type.values)
def test_frames_decode_to_exactly_the_envelope(event_type):
    moment = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)
    encoder = FrameEncoder('c_"odd"\\id')
    frame = encoder.frame(17, event_type, "t_0123", moment, encode(AWKWARD))
    envelope = event_envelope(
        seq=17,
        type=event_type,
        conversation_id='c_"odd"\\id',
        turn_id="t_0123",
        created_at=moment,
        data=AWKWARD,
    )
    assert json.loads(frame.text) == envelope
    assert frame.text == encode(envelope)
    assert envelope["ts"] == "2026-11-22T10:00:00.123Z"
    assert frame.is_terminal == (event_type in TurnEvent.TERMINAL_TYPES)


def test_sse_frames_split_every_line_of_data():
    assert sse_frame("a\nb", id=3, event="done") == "id: 3\nevent: done\ndata: a\ndata: b\n\n"
    assert sse_frame('{"x":1}') == 'data: {"x":1}\n\n'


def test_each_way_a_turn_ends_writes_a_terminal_event_and_nothing_else_is_one():
    assert set(Turn.TERMINAL_EVENT_OF_STATUS.values()) == set(TurnEvent.TERMINAL_TYPES)
    assert set(Turn.ENDED_STATUSES) | set(Turn.ACTIVE_STATUSES) == set(Turn.Status.values)


def _parsed(wire: bytes):
    """A frame as a WebSocket client reads it (the websockets library's own parser)."""
    reader = StreamReader()
    reader.feed_data(wire)
    reader.feed_eof()
    parsing = WebSocketFrame.parse(reader.read_exact, mask=False)
    try:
        next(parsing)
    except StopIteration as done:
        return done.value
    raise AssertionError("the frame is incomplete")


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65_535, 65_536, 200_000])
def test_an_event_is_framed_once_as_the_websocket_message_clients_read(size):
    # Sizes in bytes, around each of the three lengths a header may give; some of it not ASCII.
    text = ("é" * (size // 4) + "x" * size)[: size - size // 4]
    assert len(text.encode()) == size
    wire = Frame(seq=1, type="message.delta", turn_id="t_1", text=text).wire
    frame = _parsed(wire)
    assert frame.opcode == Opcode.TEXT and frame.fin
    assert frame.data.decode() == text
    header = 2 if len(frame.data) < 126 else 4 if len(frame.data) < 65_536 else 10
    assert len(wire) == len(frame.data) + header

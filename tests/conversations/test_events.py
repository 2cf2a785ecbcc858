"""The event envelope has one shape, however it is encoded."""

import json
from datetime import UTC, datetime

import pytest

from conversations.events import FrameEncoder, encode, event_envelope
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

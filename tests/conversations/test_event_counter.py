"""The conversation's counter, taken in one statement with its stamp read back (RETURNING): the
frames published live say what a replay reads from the database (the same seq, type, ts and
data; PostgreSQL's jsonb stores the data in an order of its own), and the stamp never goes
backwards."""

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from conversations import services
from conversations.models import Conversation
from conversations.selectors import event_frames_after
from tests.helpers import message_events, started, stored_turn

pytestmark = pytest.mark.django_db


def _append(turn, events):
    with transaction.atomic():
        return services.append_events(
            conversation_id=turn.conversation_id, turn_id=turn.pk, events=events
        )


def _read(frames) -> list[dict]:
    return [json.loads(frame.text) for frame in frames]


def test_live_frames_are_the_stored_ones_numbered_on_from_the_counter(conversation, people):
    turn = stored_turn(conversation, people.alice.user, "Hello")
    first = _append(turn, [started(turn)])
    then = _append(turn, message_events("Hi there."))
    assert [frame.seq for frame in first + then] == [1, 2, 3]
    stored = event_frames_after(conversation_id=conversation.pk, after_seq=0, limit=10)
    assert _read(stored) == _read(first + then)
    row = Conversation.objects.get(pk=conversation.pk)
    assert row.last_seq == 3
    assert json.loads(then[-1].text)["ts"] == json.loads(stored[-1].text)["ts"]
    assert row.last_activity_at.tzinfo is not None


def test_the_stamp_never_goes_backwards(conversation, people):
    turn = stored_turn(conversation, people.alice.user, "Hello")
    ahead = timezone.now() + timedelta(hours=1)
    Conversation.objects.filter(pk=conversation.pk).update(last_activity_at=ahead)
    (frame,) = _append(turn, [started(turn)])
    assert Conversation.objects.get(pk=conversation.pk).last_activity_at == ahead
    (stored,) = event_frames_after(conversation_id=conversation.pk, after_seq=0, limit=1)
    assert _read([frame]) == _read([stored])

"""A conversation with its state, as the access rule reads it for every request and socket
(compiled once: core.prepared): what the ORM gives, its active turn read afresh each time."""

import pytest

from conversations.models import Conversation, Turn
from conversations.selectors import _with_active_turn, conversation_with_state
from tests.helpers import compiled_selects, stored_turn

pytestmark = pytest.mark.django_db


def _orm(conversation_id: str) -> Conversation:
    return (
        _with_active_turn(Conversation.objects.select_related("workspace", "created_by"))
        .filter(pk=conversation_id)
        .first()
    )


def _state(conversation: Conversation) -> tuple:
    return (
        conversation.pk,
        conversation.title,
        conversation.last_seq,
        conversation.last_activity_at,
        conversation.workspace.slug,
        conversation.created_by,
        conversation.active_turn_id,
        conversation.active_turn_status,
    )


def test_the_state_is_the_orms_and_read_afresh_without_compiling_again(
    conversation, people, monkeypatch
):
    other = Conversation.objects.create(
        workspace=people.other_workspace, title="Elsewhere", agent="x"
    )
    assert _state(conversation_with_state(conversation_id=conversation.pk)) == _state(
        _orm(conversation.pk)
    )
    compiled = compiled_selects(monkeypatch)
    assert conversation_with_state(conversation_id=conversation.pk).active_turn_id is None
    turn = stored_turn(conversation, people.alice.user, "Go")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.AWAITING_INPUT)
    now = conversation_with_state(conversation_id=conversation.pk)
    assert (now.active_turn_id, now.active_turn_status) == (turn.pk, "awaiting_input")
    assert conversation_with_state(conversation_id=other.pk).workspace == people.other_workspace
    assert conversation_with_state(conversation_id="c_nothing") is None
    reads = [model for model in compiled if model is Conversation]
    monkeypatch.undo()
    assert reads == []
    assert _state(now) == _state(_orm(conversation.pk))

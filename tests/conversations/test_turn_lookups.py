"""The reads a turn's start, its beginning and its question make every time (see core.prepared):
compiled once, then only run, and giving what the ORM gives."""

import pytest
from django.contrib.auth.models import User

from conversations import services
from conversations.access import conversation_access, membership_of
from conversations.models import Membership, Turn
from core.errors import ApplicationError
from core.process import process_id
from selection.models import Selection
from selection.selectors import selection_with_context
from selection.services import selection_reply, selection_request
from tests.helpers import compiled_selects

pytestmark = pytest.mark.django_db

FIELDS = {"kind": Selection.Kind.TEXT, "prompt": "Which venue?"}


def _ask_once(conversation, user, ordinal: int) -> Turn:
    """Start a turn, begin it here, ask a question in it, answer it, and end the turn."""
    process = process_id()
    turn, _ = services.turn_start(conversation=conversation, user=user, input=f"Plan {ordinal}")
    running = services.turn_mark_running(turn_id=turn.pk, inbox=f"inbox-{ordinal}", process=process)
    question = selection_request(
        selection_id=f"s_lookup{ordinal}",
        turn_id=turn.pk,
        ordinal=1,
        fields=FIELDS,
        timeout_seconds=600,
        process=process,
    )
    selection_reply(
        selection=selection_with_context(selection_id=question.pk), user=user, answer="Here"
    )
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.COMPLETED)
    return running


def test_a_turn_started_begun_and_asking_compiles_no_read_of_its_own_again(
    conversation, people, monkeypatch
):
    _ask_once(conversation, people.alice.user, 1)  # compiled here, if this thread had not yet
    compiled = compiled_selects(monkeypatch)
    running = _ask_once(conversation, people.alice.user, 2)
    assert compiled == []
    expected = Turn.objects.select_related("conversation__workspace", "started_by").get(
        pk=running.pk
    )
    # What the runner reads from it comes with it, as the ORM's query gave it.
    assert running.status == Turn.Status.RUNNING and running.inbox == "inbox-2"
    assert (running.conversation.workspace, running.started_by) == (
        expected.conversation.workspace,
        expected.started_by,
    )


def test_a_start_beside_an_active_turn_is_refused_naming_it(conversation, people):
    turn, _ = services.turn_start(conversation=conversation, user=people.alice.user, input="One")
    with pytest.raises(ApplicationError) as refused:
        services.turn_start(conversation=conversation, user=people.alice.user, input="Two")
    assert (refused.value.code, refused.value.status, refused.value.extra) == (
        "turn_in_progress",
        409,
        {"turn": turn.pk},
    )


def test_the_access_rule_reads_a_membership_compiled_once_and_finds_strangers_none(
    conversation, people, monkeypatch
):
    outsider = User.objects.create_user("outsider")
    conversation_access(user=people.alice.user, conversation_id=conversation.pk)
    expected = Membership.objects.get(
        workspace_id=conversation.workspace_id, user=people.alice.user
    )
    compiled = compiled_selects(monkeypatch)
    _, membership = conversation_access(user=people.alice.user, conversation_id=conversation.pk)
    assert (membership, membership.role) == (expected, expected.role)
    assert membership_of(user=outsider, workspace_id=conversation.workspace_id) is None
    assert compiled == []
    with pytest.raises(ApplicationError) as refused:
        conversation_access(user=outsider, conversation_id=conversation.pk)
    assert (refused.value.code, refused.value.status) == ("not_found", 404)

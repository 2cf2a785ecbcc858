"""What led to each waiting question (its turn's input, and the agent's last words before it),
as /api/waiting/ gives it: the right words for each question, cut sensibly, read in the same two
queries however many questions wait."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from selection.models import Selection
from selection.selectors import CONTEXT_CHARS, waiting_for
from tests.helpers import message_events, started, store, stored_turn, waiting_question

pytestmark = pytest.mark.django_db


def test_each_waiting_question_comes_with_what_led_to_it_in_two_queries(
    client, conversation, people
):
    alice = people.alice.user
    turn = stored_turn(conversation, alice, "Plan the offsite\nfor twelve people")
    store(turn, [started(turn), *message_events("First thoughts."), *message_events("Two venues.")])
    first = waiting_question(turn, 1, "Which venue?")
    store(turn, message_events("Said after the first question."))
    second = waiting_question(turn, 2, "Which day?")
    # A turn whose agent asked before saying anything, with a very long input.
    long_input = "word " * 200
    quiet = stored_turn(conversation, alice, long_input)
    store(quiet, [started(quiet)])
    silent = waiting_question(quiet, 1, "Go on?")

    client.force_login(people.bob.user)
    results = {item["id"]: item for item in client.get("/api/waiting/").json()["results"]}
    assert results[first.pk]["turn_input"] == "Plan the offsite\nfor twelve people"
    assert results[first.pk]["agent_said"] == "Two venues."
    assert results[first.pk]["started_by"]["username"] == "alice"
    assert results[second.pk]["agent_said"] == "Said after the first question."
    assert results[silent.pk]["agent_said"] is None
    cut = results[silent.pk]["turn_input"]
    assert len(cut) <= CONTEXT_CHARS and cut.endswith("word…")

    def queries() -> int:
        expected = Selection.objects.count()
        with CaptureQueriesContext(connection) as captured:
            assert len(waiting_for(user=people.bob.user)) == expected
        return len(captured)

    assert queries() == 2
    for index in range(6):
        more = stored_turn(conversation, alice, f"More {index}")
        store(more, [started(more), *message_events(f"Said {index}.")])
        waiting_question(more, 1, f"Question {index}?")
    assert queries() == 2


def test_the_agents_last_words_are_found_by_order_not_by_clock(conversation, people):
    # The event log's times and the question's row come from different clocks: a question
    # whose row says it was made before the message that led to it still shows that message,
    # and not the one said after it.
    alice = people.alice.user
    turn = stored_turn(conversation, alice, "Plan the offsite")
    store(turn, [started(turn), *message_events("Two venues.")])
    question = waiting_question(turn, 1, "Which venue?")
    store(turn, message_events("Said after the question."))
    said = turn.events.get(type="message.completed", data__text="Two venues.")
    Selection.objects.filter(pk=question.pk).update(
        created_at=said.created_at - timedelta(seconds=5)
    )
    (waiting,) = waiting_for(user=people.bob.user)
    assert waiting["agent_said"] == "Two venues."

"""A turn that left memory while its question waited, in a real Chromium: where it carried on,
the transcript says what happened to the question (answered late by someone, or expired), in
words a person reads, not the server's reasons."""

import re

import pytest
from playwright.sync_api import expect

from conversations.models import Turn
from tests.conftest import wait_for_turn_end, wait_until
from tests.helpers import ask, create_conversation, start, wait_pending

pytestmark = pytest.mark.browser


@pytest.fixture
def server(make_server):
    # A parked turn leaves memory at once (as one does after 60 s), and upkeep runs every second
    # (it expires the question that nobody answers).
    return make_server(PARLEY_TURN_LEASE_SECONDS="3", PARLEY_RELEASE_PARKED_AFTER_SECONDS="0.2")


def released(turn_id: str) -> bool:
    turn = Turn.objects.get(pk=turn_id)
    return turn.status == Turn.Status.AWAITING_INPUT and not turn.runner


def test_a_turn_carried_on_after_a_late_answer_and_after_an_expired_question_says_so(
    browsing, people
):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Budget")
        page = browsing.conversation("alice", cid)
        steps = [
            {"say": "Let me ask Bob."},
            ask(kind="text", prompt="Which budget?", addressee="bob"),
            {"say": "Noted."},
            ask(kind="confirm", prompt="Book it now?", timeout=2),
            {"say": "Left for later."},
        ]
        turn_id = start(alice, cid, steps)
        question = wait_pending(alice, cid)
        wait_until(lambda: released(turn_id), timeout=15)
    with browsing.server.client(people.bob) as bob:
        answered = bob.post(f"/api/selections/{question['id']}/reply/", json={"answer": "Q3"})
        assert answered.status_code == 200
        wait_for_turn_end(bob, cid, timeout=30)

    markers = page.locator(".entry-resumed")
    for _ in range(2):  # as it went on live, then as a reload shows it
        expect(markers).to_have_count(2)
        expect(markers.nth(0)).to_have_text(re.compile(r"^Carried on after Bob answered"))
        expect(markers.nth(1)).to_have_text(re.compile(r"^Carried on after the question expired"))
        expect(page.locator("#transcript")).not_to_contain_text("settled")
        expect(page.locator(".turn-end")).to_have_text("Completed")
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")

"""A long conversation in a real Chromium: its latest turns first, earlier ones as the reader
scrolls up (their place kept), then live as always."""

import pytest
from playwright.sync_api import expect

from tests.conftest import wait_for_turn_end
from tests.helpers import message_events, started, store, stored_turn

pytestmark = pytest.mark.browser


def test_a_long_conversation_shows_its_latest_turns_first_and_earlier_ones_on_scroll(
    browsing, conversation, people
):
    turns = []
    for number in range(30):
        turn = stored_turn(conversation, people.alice.user, f"Question {number}")
        store(turn, [started(turn), *message_events(f"Answer {number}."), ("turn.completed", {})])
        turns.append(turn)
    page = browsing.conversation("alice", conversation.pk)
    shown = page.locator(".turn")
    # The latest twenty, the newest at the end, where the page opens.
    expect(shown).to_have_count(20)
    expect(shown.first).to_contain_text("Question 10")
    expect(shown.last).to_contain_text("Answer 29.")
    assert page.evaluate("window.scrollY") > 0
    earliest_shown = page.locator(f'.turn[data-turn="{turns[10].pk}"]')
    # Scrolled to the top, the earlier turns come in above, and what the reader was looking at
    # stays where it was.
    before = page.evaluate(
        """(turn) => {
          window.scrollTo(0, 0);
          return document.querySelector(`.turn[data-turn="${turn}"]`).getBoundingClientRect().top;
        }""",
        turns[10].pk,
    )
    expect(shown).to_have_count(30)
    expect(page.locator("#transcript-earlier")).to_be_hidden()
    after = earliest_shown.evaluate("(element) => element.getBoundingClientRect().top")
    assert abs(after - before) <= 2, (before, after)
    expect(shown.first).to_contain_text("Question 0")
    # Each answer once (ended turns come without their text deltas), in order, on one day.
    text = page.locator("#transcript").inner_text()
    assert [text.count(f"Answer {number}.") for number in range(30)] == [1] * 30
    assert text.index("Answer 9.") < text.index("Answer 10.")
    expect(page.locator(".day-separator")).to_have_count(1)
    # And live as ever.
    with browsing.server.client(people.bob) as bob:
        response = bob.post(f"/api/conversations/{conversation.pk}/turns/", json={"input": "help"})
        assert response.status_code == 202
        wait_for_turn_end(bob, conversation.pk)
    expect(shown).to_have_count(31)
    expect(shown.last.locator(".entry-input")).to_contain_text("help")
    expect(shown.last.locator(".turn-end")).to_have_text("Completed")

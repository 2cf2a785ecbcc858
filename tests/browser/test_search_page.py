"""Search in a real Chromium: from the header's box to highlighted results, and a result's
permalink into a long conversation, where the event lies beyond the first page of history."""

import re

import pytest
from playwright.sync_api import expect

from conversations import services
from tests.browser.conftest import screenshot
from tests.helpers import message_events, started, store, stored_turn

pytestmark = pytest.mark.browser


def test_search_from_the_header_and_follow_a_result_into_a_long_conversation(
    browsing, conversation, people
):
    for number in range(30):
        turn = stored_turn(conversation, people.alice.user, f"Question {number}")
        answer = f"Answer {number}."
        if number == 2:
            answer = "Answer 2: the **Zeppelin** plan, as agreed."
        store(turn, [started(turn), *message_events(answer), ("turn.completed", {})])
    other = services.conversation_create(
        workspace=people.workspace, user=people.bob.user, title="Airships"
    )
    turn = stored_turn(other, people.bob.user, 'Is <img src=x id="injected"> a zeppelin?')
    store(turn, [started(turn), ("turn.completed", {})])
    target_seq = 2 * 4 + 3  # the third turn's message.completed: started, delta, completed

    page = browsing.open("alice")
    box = page.get_by_role("searchbox", name="Search messages")
    box.fill("zeppel*")
    box.press("Enter")
    expect(page).to_have_url(re.compile(r"/search/\?q=zeppel"))
    results = page.locator(".search-result")
    expect(results).to_have_count(2)
    # Newest first; the words highlighted, what was said shown as text (no element made of it).
    expect(results.first).to_contain_text("Airships")
    expect(results.first.locator("mark")).to_have_text("zeppelin")
    expect(results.first).to_contain_text('<img src=x id="injected">')
    expect(page.locator("#injected")).to_have_count(0)
    expect(results.last.locator("mark")).to_have_text("Zeppelin")
    expect(results.last).to_contain_text("Agent replied")
    screenshot(page, "search-results")

    results.last.get_by_role("link").click()
    expect(page).to_have_url(re.compile(rf"/conversations/{conversation.pk}/\?seq={target_seq}$"))
    landed = page.locator(".permalink-target")
    expect(landed).to_have_count(1)
    expect(landed).to_contain_text("the Zeppelin plan")
    expect(landed).to_have_attribute("data-seq", str(target_seq))
    expect(landed).to_be_in_viewport()
    # It was beyond the first page: the earlier turns were read to reach it.
    expect(page.locator(".turn").first).to_contain_text("Question 0")
    screenshot(page, "search-permalink")

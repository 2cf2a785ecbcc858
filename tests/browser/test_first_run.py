"""The first run, as `make run` seeds it (seed_demo, in a process of its own, on the server's
database): conversations made by real turns of the builtin agent, one of them waiting for the
person who signs in, who answers it and sees the turn carry on."""

import pytest
from playwright.sync_api import expect

from conversations.models import Conversation
from tests.browser.conftest import screenshot
from tests.conftest import manage

pytestmark = pytest.mark.browser


def test_alice_finds_the_demo_question_waiting_answers_it_and_the_turn_goes_on(browsing):
    assert "seeded the conversation" in manage("seed_demo")
    alice = browsing.open("alice")
    demo = alice.locator(".workspace", has_text="Demo team")
    for title in ("Getting started", "Summarize the Q3 report"):
        expect(demo.get_by_role("link", name=title)).to_be_visible()
    waiting = alice.locator(".conversation-row", has_text="Where is the budget mentioned?")
    expect(waiting).to_contain_text("waiting for an answer")
    expect(alice.locator("#waiting-count")).to_have_text("1")

    # One asked and answered: Bob picked the file, and the agent carried on with it.
    demo.get_by_role("link", name="Summarize the Q3 report").click()
    card = alice.locator(".question")
    expect(card.locator(".question-outcome")).to_have_text("Answered by Bob: reports/q3-summary.md")
    expect(alice.locator(".entry-agent .markdown").last).to_contain_text(
        "reports/q3-summary.md: 8 lines"
    )
    expect(alice.locator(".turn-end")).to_have_text("Completed")

    # One waiting for whoever signs in: answered here, the turn goes on where it stopped.
    alice.goto("/")
    # From the sidebar, as people switch conversations.
    alice.locator("#sidebar").get_by_role("link", name="Where is the budget mentioned?").click()
    expect(alice.locator("#connection")).to_have_attribute("data-state", "live")
    card = alice.locator(".question")
    expect(card).to_contain_text("What should I look for?")
    screenshot(alice, "first-run")
    card.get_by_label("Your answer").fill("budget")
    card.get_by_role("button", name="Send answer").click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: “budget”")
    expect(alice.locator(".turn-end")).to_have_text("Completed")
    expect(alice.locator(".entry-agent .markdown").last).to_contain_text("“budget” is in 4 file(s)")

    # "Getting started" says what to try.
    alice.goto(f"/conversations/{Conversation.objects.get(title='Getting started').pk}/")
    expect(alice.locator(".entry-agent .markdown")).to_contain_text("Here is what I can do")

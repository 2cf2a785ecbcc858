"""Questions find their people, in a real Chromium: the header's count and the tab's title on
every page, live; the "Waiting for you" page, answered right there; and browser notifications
in a hidden tab, for a question, a reminder, an escalation and a turn that finished."""

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import (
    HeldReplies,
    hidden_tab,
    notifications,
    screenshot,
    wait_for_notification,
)
from tests.conftest import all_events, wait_for_turn_end
from tests.helpers import ask, create_conversation, start, wait_pending

pytestmark = pytest.mark.browser


@pytest.fixture
def server(make_server):
    # Upkeep every second, so that reminders and escalation come within seconds.
    return make_server(
        PARLEY_TURN_LEASE_SECONDS="3", PARLEY_REMIND_AFTER="0.2", PARLEY_ESCALATE_AFTER="0.4"
    )


def test_bob_answers_from_waiting_for_you_and_the_turn_goes_on(browsing, people):
    bob = browsing.open("bob", "/waiting/")
    expect(bob.locator("#waiting-empty")).to_contain_text("Nothing waits for you")
    expect(bob.locator("#waiting-count")).to_be_hidden()
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Release")
        start(alice, cid, [ask(kind="choice", prompt="Ship which build?", options=["rc1", "rc2"])])
        for_bob = create_conversation(alice, title="Review")
        start(alice, for_bob, [ask(kind="text", prompt="Your review?", addressee="bob")])
        wait_pending(alice, cid)
        wait_pending(alice, for_bob)
        # Live, without a reload: the count, the title and the list, his own question first.
        expect(bob.locator("#waiting-count")).to_have_text("2")
        expect(bob).to_have_title(re.compile(r"^\(2\) Waiting for you"))
        items = bob.locator(".waiting-item")
        expect(items).to_have_count(2)
        expect(items.first.locator(".waiting-conversation")).to_have_text("Review")
        expect(items.first).to_contain_text("For you")
        expect(items.nth(1)).to_contain_text("Ship which build?")
        expect(items.nth(1)).to_contain_text("Asked by the agent in Alice’s turn")
        expect(items.nth(1).locator(".question-countdown")).to_contain_text("expires in")
        screenshot(bob, "waiting-for-you")

        # The reply's response is held back until the socket's news that the question left the
        # list has been read (as on a slow network): the answer stays, with its outcome.
        loaded = int(bob.evaluate("document.body.dataset.waitingLoaded"))
        replies = HeldReplies(bob)
        items.nth(1).get_by_role("button", name="rc2").click()
        expect(bob.locator("#waiting-count")).to_have_text("1")
        bob.wait_for_function("(n) => Number(document.body.dataset.waitingLoaded) > n", arg=loaded)
        replies.release()
        expect(items.nth(1).locator(".question-outcome")).to_have_text("Answered by Bob: rc2")
        wait_for_turn_end(alice, cid)
        said = [e for e in all_events(alice, cid) if e["type"] == "message.completed"]
        assert json.loads(said[-1]["data"]["text"])["value"] == "rc2"
        expect(bob.locator("#waiting-count")).to_have_text("1")
        expect(bob).to_have_title(re.compile(r"^\(1\) Waiting for you"))

        # Settled elsewhere: it leaves the list, once Bob's pointer (still where he clicked)
        # has left it, so that nothing under it moves; meanwhile it says why it will go.
        question = wait_pending(alice, for_bob)
        response = alice.post(
            f"/api/selections/{question['id']}/reply/", json={"action": "dismiss"}
        )
        assert response.status_code == 200
    review = items.filter(has_text="Your review?")
    expect(review.locator(".waiting-left-note")).to_have_text(
        "No longer waiting: settled elsewhere."
    )
    bob.mouse.move(0, 0)
    expect(review).to_have_count(0)
    expect(bob.locator("#waiting-count")).to_be_hidden()
    expect(bob).to_have_title("Waiting for you · Parley")


def test_a_question_for_bob_notifies_his_hidden_tab_and_counts_in_the_other(browsing, people):
    hidden = hidden_tab(browsing, "bob")
    visible = browsing.open("bob", "/")
    # Carol (a viewer) answers nothing, so she is not told.
    carol = hidden_tab(browsing, "carol")
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Plans")
        start(alice, cid, [ask(kind="confirm", prompt="Merge it?", addressee="bob")])
        question = wait_pending(alice, cid)
    expect(visible.locator("#waiting-count")).to_have_text("1")
    expect(visible).to_have_title(re.compile(r"^\(1\) "))
    expect(hidden.locator("#waiting-count")).to_have_text("1")
    shown = wait_for_notification(hidden, "A question")
    assert (shown["title"], shown["body"]) == ("A question for you in “Plans”", "Merge it?")
    assert shown["url"] == f"/conversations/{cid}/#question-{question['id']}"
    # The visible tab shows the count, not a notification; the viewer is told nothing.
    assert notifications(visible) == []
    assert notifications(carol) == []
    # Clicking it opens the conversation at the question.
    hidden.evaluate("window.__notifications[0].dispatchEvent(new Event('click'))")
    expect(hidden).to_have_url(re.compile(f"{shown['url']}$"))
    expect(hidden.locator(f'[data-selection="{question["id"]}"]')).to_contain_text("Merge it?")


def test_notifications_are_asked_for_with_a_click(browsing):
    page = browsing.open("alice")
    button = page.get_by_role("button", name="Turn on notifications")
    expect(button).to_be_visible()
    page.context.grant_permissions(["notifications"])
    button.click()
    expect(button).to_be_hidden()


def test_reminders_escalations_and_finished_turns_reach_the_right_hidden_tabs(browsing, people):
    alice = hidden_tab(browsing, "alice")
    bob = hidden_tab(browsing, "bob")
    with browsing.server.client(people.bob) as client:
        steps = [
            ask(kind="text", prompt="Which budget?", addressee="bob", timeout=10, escalate=True),
        ]
        cid = create_conversation(client, title="Plans")
        start(client, cid, steps)
        wait_for_notification(bob, "Reminder")
        wait_for_notification(alice, "Nobody")
        # The question's card in the conversation says who was called on.
        page = browsing.conversation("alice", cid)
        card = page.locator(".question").last
        expect(card.locator(".tag-reminded")).to_have_text("Reminded Bob")
        expect(card.locator(".tag-escalated")).to_have_text("Escalated to Alice")
        screenshot(page, "question-reminded-and-escalated")
        question = wait_pending(client, cid)
        response = client.post(f"/api/selections/{question['id']}/reply/", json={"answer": "Q3"})
        assert response.status_code == 200
        wait_for_turn_end(client, cid)
    wait_for_notification(bob, "Your turn")
    titles = {
        who: [n["title"] for n in notifications(page)]
        for who, page in [("alice", alice), ("bob", bob)]
    }
    assert titles["bob"] == [
        "A question for you in “Plans”",
        "Reminder: a question waits for you in “Plans”",
        "Your turn finished in “Plans”",
    ]
    # Alice owns the workspace: the escalation is for her; Bob's question and turn are not.
    assert titles["alice"] == ["Nobody has answered yet in “Plans”"]

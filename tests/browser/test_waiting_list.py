"""The "Waiting for you" list in a real Chromium: nothing under the reader's pointer moves when
a card is answered and a follow-up arrives; and each question shows, collapsed, what led to it
(the input that started its turn, by whom, and the agent's last words before it)."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.helpers import (
    ask,
    create_conversation,
    message_events,
    reply,
    start,
    started,
    store,
    stored_turn,
    wait_pending,
    waiting_question,
)

pytestmark = pytest.mark.browser


def boxes(items, count: int) -> list[dict]:
    return [items.nth(index).bounding_box() for index in range(count)]


def test_answering_a_card_moves_no_card_under_the_pointer(browsing, people):
    with browsing.server.client(people.alice) as alice:
        for title, steps in [
            ("Alpha", [ask(kind="confirm", prompt="Alpha ready?")]),
            (
                "Beta",
                [
                    ask(kind="confirm", prompt="Beta ready?"),
                    ask(kind="text", prompt="And the follow-up?", addressee="bob"),
                ],
            ),
            ("Gamma", [ask(kind="confirm", prompt="Gamma ready?")]),
        ]:
            cid = create_conversation(alice, title=title)
            start(alice, cid, steps)
            wait_pending(alice, cid)
    bob = browsing.open("bob", "/waiting/")
    items = bob.locator(".waiting-item")
    expect(items).to_have_count(3)
    expect(items.nth(1)).to_contain_text("Beta ready?")
    before = boxes(items, 3)

    # Bob confirms the middle card; its turn goes on and asks him a follow-up, which the
    # server's order would put first (it is addressed to him).
    items.nth(1).get_by_role("button", name="Confirm").click()
    expect(items).to_have_count(4)
    answered = items.filter(has=bob.locator('.question[data-status="answered"]'))
    expect(answered.locator(".question-outcome")).to_have_text("Answered by Bob: yes")
    # Nothing moved: the answered card kept its place and size, the follow-up went at the end.
    assert boxes(items, 3) == before
    expect(items.nth(1)).to_contain_text("Beta ready?")
    expect(items.nth(3)).to_contain_text("And the follow-up?")
    expect(items.nth(3).locator(".tag-new")).to_have_text("New")

    # Once the pointer leaves the list, the answered card gives up the room its form took.
    bob.mouse.move(0, 0)
    expect(items.nth(1)).not_to_have_attribute("style", re.compile("min-height"))
    assert items.nth(1).bounding_box()["height"] < before[1]["height"]


def test_each_waiting_question_shows_what_led_to_it_collapsed(browsing, conversation, people):
    alice = people.alice.user
    turn = stored_turn(
        conversation, alice, "Book a venue for the offsite:\ntwelve people, near the station."
    )
    store(
        turn,
        [
            started(turn),
            *message_events(
                "I found **two venues** near the station: the Old Mill (14 seats) and "
                "Harbour House (12 seats). Both are free in March."
            ),
        ],
    )
    waiting_question(turn, 1, "Which venue should I book?")
    quiet = stored_turn(conversation, alice, "rename notes/ideas.md")
    store(quiet, [started(quiet)])
    waiting_question(quiet, 1, "What should `notes/ideas.md` be called?")

    bob = browsing.open("bob", "/waiting/")
    items = bob.locator(".waiting-item")
    expect(items).to_have_count(2)
    venue = items.filter(has_text="Which venue")
    context = venue.locator(".waiting-context")
    expect(context.locator("summary")).to_have_text("What led to this")
    expect(context.locator(".waiting-input")).to_be_hidden()
    context.locator("summary").click()
    expect(context.locator("dt").first).to_have_text("Alice asked the agent")
    expect(context.locator(".waiting-input")).to_have_text(
        "Book a venue for the offsite:\ntwelve people, near the station."
    )
    expect(context.locator(".waiting-said strong")).to_have_text("two venues")
    expect(context.locator(".waiting-said")).to_contain_text("Both are free in March.")
    other = items.filter(has_text="notes/ideas.md").locator(".waiting-context")
    other.locator("summary").click()
    expect(other.locator(".waiting-said")).to_have_text(re.compile("asked straight away"))
    screenshot(bob, "waiting-context")


# The list has been read at least once (a notice or the socket's reconnect may read it again).
READ = re.compile(r"^[1-9]\d*$")


def test_a_draft_goes_with_its_question_settled_elsewhere(browsing, people):
    bob_id, alice_id = people.bob.user.pk, people.alice.user.pk
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Naming")
        start(alice, cid, [ask(kind="text", prompt="What should we call it?")])
        question = wait_pending(alice, cid)
        bob = browsing.open("bob", "/waiting/")
        expect(bob.locator("body")).to_have_attribute("data-waiting-loaded", READ)
        # Drafts of questions settled while no page of Bob's was open go when the list is read;
        # those of questions still waiting, and other people's, stay.
        bob.evaluate(
            """([bob, alice]) => {
                localStorage.setItem(`parley:draft:${bob}:question:s_settled`, "old words");
                localStorage.setItem(`parley:draft:${alice}:question:s_settled`, "hers");
            }""",
            [bob_id, alice_id],
        )
        bob.reload()
        expect(bob.locator("body")).to_have_attribute("data-waiting-loaded", READ)
        key = f"parley:draft:{bob_id}:question:{question['id']}"
        bob.get_by_label("Your answer").fill("Half a na")
        drafts = "() => Object.keys(localStorage).filter((key) => key.startsWith('parley:draft:'))"
        assert sorted(bob.evaluate(drafts)) == sorted(
            [key, f"parley:draft:{alice_id}:question:s_settled"]
        )

        # Alice answers it elsewhere: the card leaves Bob's list, and his draft with it.
        bob.mouse.move(0, 0)
        assert reply(alice, question["id"], answer="Parley").status_code == 200
        expect(bob.locator(".waiting-item")).to_have_count(0)
        assert bob.evaluate(drafts) == [f"parley:draft:{alice_id}:question:s_settled"]

"""The conversation page as people use chat apps, in a real Chromium: a long title on a phone
still opens at the latest and follows it, a tall question is never hidden under the footer,
Enter sends in every box, the composer names whom the agent asks, and a half-written message
is kept per conversation across reloads and tabs."""

import contextlib
import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PHONE, screenshot
from tests.conftest import all_events, wait_for_turn_end, wait_until
from tests.helpers import ask, create_conversation, start, wait_pending

pytestmark = pytest.mark.browser

LONG_TITLE = (
    "Planning the quarterly release of the billing service with the whole team, "
    "its migration and the customers' questions"
)
TALL = "\n\n".join(f"Paragraph {n} of what came before." for n in range(1, 31))


def test_a_long_title_on_a_phone_opens_at_the_latest_and_follows_new_activity(browsing, people):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title=LONG_TITLE)
        start(alice, cid, [{"say": TALL}])
        wait_for_turn_end(alice, cid)
        page = browsing.conversation("alice", cid, viewport=PHONE)
        title = page.get_by_role("heading", name=LONG_TITLE)
        assert title.bounding_box()["height"] > 80  # three lines, or more
        expect(page.locator(".turn-end")).to_have_text("Completed")
        expect(page.locator(".turn-end")).to_be_in_viewport()

        # A turn streams in, step by step: the page follows it to its end.
        steps = [{"say": f"Step {n}: " + "more words " * 30} for n in range(1, 6)]
        start(alice, cid, [step for say in steps for step in (say, {"sleep": 0.15})])
        expect(page.locator(".turn-end")).to_have_count(2)
        expect(page.locator(".turn-end").last).to_be_in_viewport()
        expect(page.get_by_role("button", name=re.compile("New activity"))).to_be_hidden()
        screenshot(page, "phone-long-title")


PROMPT = "Where should the new servers of the billing service go, now that the old ones are full?"
DESKTOP_720 = {"width": 1280, "height": 720}
# Eight options, described on the desktop (as the builtin agent's are); on a phone, labels only.
EIGHT = [
    {
        "label": f"Region {n}",
        "value": f"r{n}",
        "description": f"Servers in data centre {n}, near its customers.",
    }
    for n in range(1, 9)
]
EIGHT_SHORT = [{"label": f"Region {n}", "value": f"r{n}"} for n in range(1, 9)]


# What hides each part of a question (its prompt, each option), found as a click would find it:
# elementFromPoint at its centre and near two corners, or the part lying outside the viewport.
HIDDEN_PARTS = """(card) => {
  const hidden = {};
  const parts = [card.querySelector(".question-prompt"), ...card.querySelectorAll(".option")];
  for (const [index, part] of parts.entries()) {
    const box = part.getBoundingClientRect();
    const where = [];
    if (box.top < 0 || box.bottom > window.innerHeight) where.push(`${box.top}-${box.bottom}`);
    const points = [
      [box.left + box.width / 2, box.top + box.height / 2],
      [box.left + 8, box.top + 8],
      [box.right - 8, box.bottom - 8],
    ];
    for (const [x, y] of points) {
      const hit = document.elementFromPoint(x, y);
      if (!hit || !part.contains(hit)) where.push(`under ${hit && (hit.id || hit.className)}`);
    }
    if (where.length) hidden[index ? `option ${index}` : "prompt"] = where;
  }
  return hidden;
}"""


@pytest.mark.parametrize("viewport", [DESKTOP_720, PHONE], ids=["desktop", "phone"])
def test_a_tall_question_shows_its_prompt_and_every_option_above_the_footer(
    browsing, people, viewport
):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Regions")
        start(alice, cid, [{"say": TALL}])
        wait_for_turn_end(alice, cid)
    page = browsing.conversation("alice", cid, viewport=viewport)
    box = page.locator("#composer-input")
    box.fill(
        json.dumps(
            [
                ask(
                    kind="choice",
                    prompt=PROMPT,
                    options=EIGHT if viewport == DESKTOP_720 else EIGHT_SHORT,
                )
            ]
        )
    )
    box.press("Enter")
    card = page.locator(".question").last
    options = card.locator(".option")
    expect(options).to_have_count(8)
    # Its prompt and every option in view, none under the footer, once the page has placed it.
    with contextlib.suppress(AssertionError):  # if not, the assertion below says what hides
        wait_until(lambda: card.evaluate(HIDDEN_PARTS) == {}, timeout=5, what="the whole question")
    screenshot(page, "question-tall-" + ("phone" if viewport == PHONE else "desktop"))
    assert card.evaluate(HIDDEN_PARTS) == {}
    options.last.click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: Region 8")


ENTER_RULE = "Enter sends, Shift+Enter starts a new line."


def type_two_lines(box, first: str, second: str) -> None:
    box.press_sequentially(first)
    box.press("Shift+Enter")
    box.press_sequentially(second)


def test_enter_sends_and_shift_enter_starts_a_new_line_in_every_box(browsing, people):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Review")
        start(
            alice,
            cid,
            [
                ask(kind="text", prompt="Your review?"),
                ask(kind="text", prompt="And yours, Bob?", addressee="bob"),
            ],
        )
        page = browsing.conversation("alice", cid)
        # A text question's box in the transcript: the rule said under it, and kept to.
        card = page.locator(".question", has_text="Your review?")
        box = card.get_by_label("Your answer")
        expect(card.get_by_text(ENTER_RULE)).to_be_visible()
        expect(box).to_have_accessible_description(ENTER_RULE)
        type_two_lines(box, "Good", "work")
        expect(box).to_have_value("Good\nwork")
        box.press("Enter")
        expect(card.locator(".question-outcome")).to_contain_text("Answered by Alice")

        # On "Waiting for you": the same rule, and a half-typed answer kept across a reload.
        bob = browsing.open("bob", "/waiting/")
        item = bob.locator(".waiting-item", has_text="And yours, Bob?")
        box = item.get_by_label("Your answer")
        expect(item.get_by_text(ENTER_RULE)).to_be_visible()
        expect(box).to_have_accessible_description(ENTER_RULE)
        box.press_sequentially("Looks")
        bob.reload()
        expect(box).to_have_value("Looks")
        box.press("Shift+Enter")
        box.press_sequentially("right")
        box.press("Enter")
        expect(item.locator(".question-outcome")).to_contain_text("Answered by Bob")
        wait_for_turn_end(alice, cid)
        said = [
            e["data"]["text"] for e in all_events(alice, cid) if e["type"] == "message.completed"
        ]
        assert [json.loads(text)["value"] for text in said] == ["Good\nwork", "Looks\nright"]

    # The composer: the same rule, said under it.
    composer = page.locator("#composer-input")
    expect(page.get_by_text(ENTER_RULE + " While the agent works")).to_be_visible()
    expect(composer).to_have_accessible_description(re.compile(re.escape(ENTER_RULE)))
    type_two_lines(composer, "first", "second")
    composer.press("Enter")
    expect(page.locator(".entry-input").last.locator(".entry-text")).to_have_text("first\nsecond")
    expect(composer).to_have_value("")


def test_the_composer_names_whom_the_agent_asks(browsing, people):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Whom")
        start(
            alice,
            cid,
            [
                ask(kind="text", prompt="Your review, Bob?", addressee="bob"),
                ask(kind="text", prompt="A name, anyone?"),
                ask(kind="choice", prompt="Ship it, Bob?", options=["yes", "no"], addressee="bob"),
            ],
        )
        alice_page = browsing.conversation("alice", cid)
        bob_page = browsing.conversation("bob", cid)
        alices, bobs = (p.locator("#composer-question-text") for p in (alice_page, bob_page))
        # Addressed to Bob: "you" for him only; Alice, an owner, may answer it too.
        expect(bobs).to_have_text(
            "The agent asks you: “Your review, Bob?” — Enter sends your answer."
        )
        expect(alices).to_have_text(
            "The agent asks Bob (as an owner, you may answer it): “Your review, Bob?”"
            " — Enter sends your answer."
        )
        bob_page.locator("#composer-input").fill("Fine by me")
        bob_page.locator("#composer-input").press("Enter")
        # Addressed to nobody: anyone may answer.
        for note in (alices, bobs):
            expect(note).to_have_text(
                "The agent asks anyone: “A name, anyone?” — Enter sends your answer."
            )
        reply_with = wait_pending(alice, cid)
        assert (
            alice.post(
                f"/api/selections/{reply_with['id']}/reply/", json={"answer": "Ada"}
            ).status_code
            == 200
        )
        # A choice for Bob, which the composer points to.
        expect(bobs).to_have_text("The agent is waiting for your answer to “Ship it, Bob?” above.")
        expect(alices).to_have_text(
            "The agent is waiting for Bob’s answer to “Ship it, Bob?” above"
            " (as an owner, you may answer it)."
        )


def test_a_draft_is_kept_per_conversation_across_reloads_and_tabs_until_sent(browsing, people):
    with browsing.server.client(people.alice) as alice:
        first = create_conversation(alice, title="First")
        second = create_conversation(alice, title="Second")
    page = browsing.conversation("alice", first)
    composer = page.locator("#composer-input")
    composer.press_sequentially("half a thought")
    page.reload()
    expect(composer).to_have_value("half a thought")

    # Another tab of the same browser, on the same conversation: the draft, and what is typed
    # on in either tab.
    tab = page.context.new_page()
    tab.goto(f"/conversations/{first}/")
    other = tab.locator("#composer-input")
    expect(other).to_have_value("half a thought")
    other.press_sequentially(", and more")
    expect(composer).to_have_value("half a thought, and more")

    # Another conversation has its own.
    elsewhere = page.context.new_page()
    elsewhere.goto(f"/conversations/{second}/")
    its_box = elsewhere.locator("#composer-input")
    expect(its_box).to_have_value("")
    its_box.press_sequentially("for the second")

    # Sent from one tab: gone from both, and after a reload; the other conversation's stays.
    composer.press("Enter")
    expect(page.locator(".entry-input .entry-text")).to_have_text("half a thought, and more")
    expect(composer).to_have_value("")
    expect(other).to_have_value("")
    tab.reload()
    expect(tab.locator("#connection")).to_have_attribute("data-state", "live")
    expect(other).to_have_value("")
    elsewhere.reload()
    expect(its_box).to_have_value("for the second")
    expect(composer).to_have_value("")

    # Signing out leaves no draft in the browser for whoever uses it next.
    elsewhere.get_by_role("button", name="Log out").click()
    expect(elsewhere.get_by_label("Username")).to_be_visible()
    kept = elsewhere.evaluate("Object.keys(localStorage)")
    assert [key for key in kept if key.startswith("parley:draft")] == []

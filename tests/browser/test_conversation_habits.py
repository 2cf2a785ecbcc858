"""The conversation page's chat habits in a real Chromium: the composer while a question waits,
following the latest (and "New activity" when reading above), the connection where the person
looks, where the focus goes, Stop by Esc (and carefully on a phone), a messages split by
steering that keeps its Markdown whole, a double-click in the file picker, and the time of
every entry with a separator for each day."""

import json
import re
from datetime import timedelta

import httpx
import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from conversations import services
from conversations.models import Turn, TurnEvent
from core.people import person
from tests.browser.conftest import PHONE, HeldReplies, screenshot

pytestmark = pytest.mark.browser

ICON_GLYPHS = "↻⚠✓▍"


def composer(page):
    return page.locator("#composer-input")


def send(page, text: str) -> None:
    box = composer(page)
    box.fill(text)
    box.press("Enter")


def question(page):
    return page.locator(".question").last


def scripted(people, title="Scripted"):
    return services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title=title, agent="scripted"
    )


def stored_turn(conversation, user, input: str, events: list, at=None) -> Turn:
    """A turn that already ended, told only by its stored events (written `at` if given)."""
    turn = Turn.objects.create(
        conversation=conversation,
        input=input,
        started_by=user,
        status=Turn.Status.COMPLETED,
        ended_at=at or timezone.now(),
    )
    started = {"input": input, "started_by": person(user), "interactive": True}
    with transaction.atomic():
        services.append_events(
            conversation_id=conversation.pk,
            turn_id=turn.pk,
            events=[("turn.started", started), *events, ("turn.completed", {})],
        )
    if at is not None:
        TurnEvent.objects.filter(turn=turn).update(created_at=at)
    return turn


def in_viewport(page, locator) -> bool:
    return locator.evaluate(
        """(element) => {
          const box = element.getBoundingClientRect();
          return box.height > 0 && box.top >= 0 && box.bottom <= window.innerHeight;
        }"""
    )


def test_enter_in_the_composer_answers_a_text_question_or_steers_when_asked_to(
    browsing, conversation, files_root
):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "rename notes/ideas.md")
    # Pinned by its prompt: once answered, a confirm question follows it and becomes the last.
    card = page.locator(".question", has_text="be called?")
    expect(card).to_contain_text("What should notes/ideas.md be called?")
    box = page.get_by_role("textbox", name="Answer the agent's question")
    expect(box).to_be_visible()
    note = page.locator("#composer-question")
    expect(note).to_contain_text("What should notes/ideas.md be called?")
    expect(note).to_contain_text("Enter sends your answer")
    expect(page.locator("#composer-send")).to_have_text("Answer")
    screenshot(page, "composer-answers-question")

    # Steer instead: the same Enter now steers, and the question stays open.
    page.get_by_role("button", name="Steer instead").click()
    expect(page.get_by_role("textbox", name="Steer the running turn")).to_be_focused()
    send(page, "keep the date in the name")
    expect(page.locator(".entry-steer .entry-text")).to_have_text("keep the date in the name")
    expect(card).to_have_attribute("data-status", "pending")
    expect(composer(page)).to_have_value("")

    # Back to answering: Enter answers the question, as its own box would.
    page.get_by_role("button", name="Answer it here instead").click()
    expect(box).to_be_focused()
    send(page, "ideas-2026.md")
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: “ideas-2026.md”")
    expect(page.locator(".entry-steer")).to_have_count(1)

    # The confirmation that follows takes no text: the composer points to it, and the focus,
    # still in the empty composer after the answer, goes on to it.
    confirm = question(page)
    expect(confirm).to_contain_text("Rename notes/ideas.md to notes/ideas-2026.md?")
    expect(page.locator("#composer-send")).to_have_text("Go to the question")
    expect(confirm.get_by_role("button", name="Confirm")).to_be_focused()
    page.keyboard.press("Enter")
    expect(confirm.locator(".question-outcome")).to_have_text("Answered by Alice: yes")
    expect(composer(page)).to_be_focused()
    expect(page.locator(".turn-end")).to_have_text("Completed")
    expect(page.locator(".entry-agent").last).to_contain_text("Renamed")
    expect(page.locator("#transcript")).to_contain_text(
        "Noted while I worked: “keep the date in the name”"
    )
    assert (files_root / "notes" / "ideas-2026.md").is_file()
    expect(page.get_by_role("textbox", name="Message the agent")).to_be_visible()
    expect(page.locator("#composer-question")).to_be_hidden()


def test_the_composer_points_to_a_choice_question_and_options_render_markdown(
    browsing, conversation
):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "frobnicate the widgets")
    card = question(page)
    expect(card).to_contain_text("Which of these did you mean?")
    note = page.locator("#composer-question")
    expect(note).to_contain_text(
        "The agent is waiting for an answer to “Which of these did you mean?” above."
    )
    expect(page.locator("#composer-send")).to_have_text("Go to the question")
    # Typing an answer into the composer does not steer: Enter takes the person to the options,
    # and what they typed stays.
    send(page, "list")
    expect(card.get_by_role("button", name=re.compile("^Help"))).to_be_focused()
    expect(composer(page)).to_have_value("list")
    expect(page.locator(".entry-steer")).to_have_count(0)
    screenshot(page, "composer-points-to-question")

    # The options' descriptions are Markdown, like the prompt: code, not backticks.
    descriptions = card.locator(".option-description")
    expect(descriptions.filter(has_text="list a folder").locator("code")).to_have_text(
        "list [folder]"
    )
    for text in descriptions.all_inner_texts():
        assert "`" not in text

    composer(page).fill("")
    card.get_by_role("button", name=re.compile("^List")).click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: List")
    expect(composer(page)).to_be_focused()
    expect(page.locator(".turn-end")).to_have_text("Completed")
    # No empty bubble for the blank line the agent said before listing: every message says
    # something.
    messages = page.locator(".entry-agent")
    expect(messages).to_have_count(2)
    expect(messages.last).to_contain_text("holds")
    for text in page.locator(".entry-agent .markdown").all_inner_texts():
        assert text.strip()


def test_own_send_comes_into_view_and_new_activity_above_is_counted(browsing, people):
    chat = scripted(people)
    page = browsing.conversation("alice", chat.pk)
    tall = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(1, 61))
    send(page, json.dumps([{"say": tall}]))
    expect(page.locator(".turn-end")).to_have_text("Completed")

    # Read from the top, then send: the page goes to what was sent.
    page.evaluate("window.scrollTo(0, 0)")
    script = [{"await_steering": 30}, {"say": "one"}, {"say": "two"}, {"say": "three"}]
    send(page, json.dumps(script))
    mine = page.locator(".entry-input").last
    expect(mine).to_contain_text("await_steering")
    expect(mine).to_be_in_viewport()

    # Reading above while Bob steers: what arrives is counted, not followed.
    page.evaluate("window.scrollTo(0, 0)")
    jump = page.get_by_role("button", name=re.compile("New activity"))
    expect(jump).to_be_hidden()
    with httpx.Client(base_url=browsing.server.url, headers=people.bob.headers) as bob:
        turn = bob.get(f"/api/conversations/{chat.pk}/in-flight/").json()["turn"]
        steered = bob.post(
            f"/api/conversations/{chat.pk}/steer/",
            json={"expected_turn_id": turn, "input": "and be quick"},
        )
        assert steered.status_code == 202
    expect(page.locator(".turn-end")).to_have_count(2)
    # Bob's steering, what the agent said of it, "one", "two", "three", and how the turn ended.
    expect(page.locator("#jump-latest-count")).to_have_text("6")
    expect(jump).to_be_visible()
    expect(jump).to_have_accessible_name(re.compile("6 new entries"))
    assert page.evaluate("window.scrollY") == 0
    screenshot(page, "jump-to-latest")
    jump.click()
    expect(page.locator(".turn-end").last).to_be_in_viewport()
    expect(jump).to_be_hidden()
    expect(composer(page)).to_be_focused()


def test_the_connection_and_a_page_not_live_are_shown_where_the_person_looks(
    browsing, people, proxy
):
    browsing.allow_network_noise = True
    chat = scripted(people)
    page = browsing.conversation("alice", chat.pk, base_url=proxy.url)
    tall = "\n\n".join(f"Paragraph {n}." for n in range(1, 61))
    send(page, json.dumps([{"say": tall}]))
    expect(page.locator(".turn-end")).to_have_text("Completed")
    send(page, json.dumps([{"await_steering": 60}]))
    status = page.locator("#turn-status")
    expect(status).to_have_text("The agent is working…")
    connection = page.locator("#connection")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight / 3)")
    expect(connection).to_have_text(re.compile("Live"))
    assert in_viewport(page, connection)

    proxy.refuse_websockets = True
    proxy.cut_websockets()
    expect(connection).to_have_attribute("data-state", "reconnecting")
    expect(connection).to_contain_text("Reconnecting…")
    expect(status).to_have_text(re.compile("^Not live: the agent may still be working"))
    page.evaluate("window.scrollTo(0, 0)")
    assert in_viewport(page, connection) and in_viewport(page, status)
    screenshot(page, "offline-visible")

    page.context.set_offline(True)
    expect(connection).to_have_attribute("data-state", "offline")
    expect(connection.locator(".connection-text")).to_have_text("Offline")
    expect(status).to_have_text(re.compile("^Not live"))
    assert in_viewport(page, connection)

    proxy.refuse_websockets = False
    page.context.set_offline(False)
    expect(connection).to_have_attribute("data-state", "live")
    expect(status).to_have_text("The agent is working…")


def test_focus_moves_on_after_dismiss_and_stop(browsing, conversation):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "tidy")
    card = question(page)
    card.get_by_role("button", name="Dismiss").click()
    expect(card.locator(".question-outcome")).to_have_text("Dismissed by Alice")
    expect(composer(page)).to_be_focused()
    expect(page.locator(".turn-end")).to_have_text("Completed")

    send(page, "summarize")
    card = question(page)
    expect(card).to_contain_text("Which file should I summarize?")
    stop = page.get_by_role("button", name="Stop")
    stop.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".turn-end").last).to_have_text("Stopped by Alice")
    expect(composer(page)).to_be_focused()


def test_esc_stops_the_turn_but_not_from_inside_a_question(browsing, conversation):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "rename notes/ideas.md")
    # Pinned by its prompt: once answered, a confirm question follows it and becomes the last.
    card = page.locator(".question", has_text="be called?")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_have_attribute("title", re.compile(r"\(Esc\)"))
    expect(stop).to_have_attribute("aria-keyshortcuts", "Escape")
    # Esc in the question's own box is the box's: the question is still there to answer.
    answer = card.get_by_label("Your answer")
    answer.fill("ideas-2026.md")
    answer.press("Escape")
    # The reply's response is held back until the next question has come over the socket and
    # Alice has gone to the composer (as on a slow network): her focus stays there.
    replies = HeldReplies(page)
    answer.press("Control+Enter")
    confirm = question(page)
    expect(confirm).to_contain_text("Rename notes/ideas.md to notes/ideas-2026.md?")
    composer(page).focus()
    replies.release()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: “ideas-2026.md”")
    expect(composer(page)).to_be_focused()
    # From anywhere else (the composer here), Esc stops it.
    page.keyboard.press("Escape")
    expect(page.locator(".turn-end")).to_have_text("Stopped by Alice")
    expect(confirm.locator(".question-outcome")).to_have_text("Cancelled")
    expect(composer(page)).to_be_focused()


def test_stop_on_a_phone_asks_to_be_tapped_again(browsing, conversation):
    page = browsing.conversation("alice", conversation.pk, viewport=PHONE)
    send(page, "summarize")
    expect(question(page)).to_contain_text("Which file should I summarize?")
    stop = page.locator("#stop")
    send_button = page.locator("#composer-send")
    # Stop sits apart from Send (above the box), smaller than it.
    stop_box, send_box = stop.bounding_box(), send_button.bounding_box()
    assert stop_box["y"] + stop_box["height"] < send_box["y"]
    assert stop_box["height"] < send_box["height"]
    stop.click()
    expect(stop).to_have_text("Tap again to stop")
    screenshot(page, "phone-stop-confirm")
    expect(page.locator("#turn-status")).to_have_text("The agent is waiting for an answer.")
    stop.click()
    expect(page.locator(".turn-end")).to_have_text("Stopped by Alice")


def test_double_click_on_a_file_row_picks_it(browsing, conversation):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "summarize")
    card = question(page)
    row = card.locator(".picker-row", has_text="README.md")
    expect(row).to_be_visible()
    row.locator(".picker-size").dblclick()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: README.md")
    expect(page.locator(".entry-agent strong").last).to_have_text("README.md")


def test_a_steer_mid_message_keeps_lists_and_code_blocks_whole(browsing, conversation, people):
    bob = person(people.bob.user)
    whole = (
        "Three steps:\n\n1. Open the file\n2. Change the name\n3. Save it\n\n"
        "Then run:\n\n```sh\nmake test\n```\n\nDone."
    )
    cuts = [whole.index("ange the name"), whole.index("st\n```")]
    parts = [whole[: cuts[0]], whole[cuts[0] : cuts[1]], whole[cuts[1] :]]
    stored_turn(
        conversation,
        people.alice.user,
        "how do I rename it?",
        [
            ("message.delta", {"text": parts[0]}),
            ("turn.steered", {"input": "mention the tests", "by": bob}),
            ("message.delta", {"text": parts[1]}),
            ("turn.steered", {"input": "and say when it is done", "by": bob}),
            ("message.delta", {"text": parts[2]}),
            ("message.completed", {"text": whole}),
        ],
    )
    page = browsing.conversation("alice", conversation.pk)
    expect(page.locator(".turn-end")).to_have_text("Completed")
    body = page.locator(".turn-body > *")
    expect(body).to_have_count(5)
    first, second, third = (page.locator(".entry-agent .markdown").nth(n) for n in range(3))
    # The list item cut by the first steer is whole below it, and the list goes on from 2.
    expect(first.locator("ol > li")).to_have_text(["Open the file"])
    expect(second.locator("ol")).to_have_attribute("start", "2")
    expect(second.locator("ol > li")).to_have_text(["Change the name", "Save it"])
    expect(second.locator("p").last).to_have_text("Then run:")
    # The code block cut by the second steer is whole below it.
    expect(third.locator("pre code")).to_have_text("make test\n")
    expect(third.locator("p")).to_have_text("Done.")
    shown = page.locator("#transcript").inner_text()
    for words in ("Open the file", "Change the name", "Save it", "Then run:", "make test"):
        assert shown.count(words) == 1, words
    assert "ange the name" not in shown.replace("Change the name", "")


def test_a_turn_ends_once_on_the_page_and_one_that_did_nothing_says_so(browsing, people):
    chat = scripted(people)
    page = browsing.conversation("alice", chat.pk)
    send(page, json.dumps([{"say": "Done and dusted."}]))
    ending = page.locator(".turn-end")
    expect(ending).to_have_text("Completed")
    # The footer's status line says it to screen readers only: the page shows it once.
    status = page.locator("#turn-status")
    expect(status).to_have_text("Completed")
    expect(status).to_have_class(re.compile("turn-status-ended"))
    assert status.evaluate("(element) => element.getBoundingClientRect().width") <= 1
    tick = "(element) => getComputedStyle(element, '::before').backgroundImage"
    assert "svg" in ending.evaluate(tick)

    send(page, "[]")
    quiet = page.locator(".turn-end").last
    expect(quiet).to_have_text("Completed with no reply")
    assert quiet.evaluate(tick) == "none"
    expect(status).to_have_text("Completed with no reply")
    screenshot(page, "turn-with-no-reply")


def test_every_entry_has_its_time_and_days_are_separated(browsing, conversation, people):
    alice = people.alice.user
    now = timezone.now()
    earlier = now - timedelta(days=3)
    yesterday = now - timedelta(days=1)
    recently = now - timedelta(minutes=5)
    stored_turn(conversation, alice, "the oldest", [*said("From three days ago.")], at=earlier)
    stored_turn(
        conversation,
        alice,
        "from yesterday",
        [
            ("turn.resumed", {"process": "web-2", "previous": "web-1", "reason": "restart"}),
            ("turn.notice", {"kind": "retry", "text": "The model is busy; trying again."}),
            ("tool.started", {"id": "call_1", "name": "list", "arguments": {"folder": ""}}),
            ("tool.completed", {"id": "call_1", "name": "list", "result": {"entries": []}}),
            *said("From yesterday."),
        ],
        at=yesterday,
    )
    stored_turn(conversation, alice, "five minutes ago", [*said("Recent.")], at=recently)

    page = browsing.open("alice")
    page.clock.install()
    page.goto(f"/conversations/{conversation.pk}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator(".turn-end")).to_have_count(3)
    send(page, "help")
    expect(page.locator(".turn-end")).to_have_count(4)
    expect(page.locator(".turn-end").last).to_have_text("Completed")

    separators = page.locator(".day-separator")
    expect(separators).to_have_text([re.compile(r"^\w+day\b"), "Yesterday", "Today"])
    expect(separators.first.locator("time")).to_have_attribute(
        "datetime", earlier.astimezone().date().isoformat()
    )
    # Each separator comes right before the first entry of its day.
    expect(page.locator(".day-separator + .turn .entry-input")).to_have_text(
        [re.compile("the oldest"), re.compile("from yesterday"), re.compile("five minutes ago")]
    )
    times = page.evaluate(
        """() => [...document.querySelectorAll(
            ".entry, details.tool, .question, .entry-resumed, .entry-notice, .turn-end-row",
          )].map((entry) => {
            const time = entry.querySelector("time.entry-time");
            return time && time.dateTime && time.title ? time.textContent : entry.className;
          })"""
    )
    bad = [t for t in times if not re.match(r"^\d|just now|\d+ min ago", t)]
    assert times and not bad, bad
    inputs = page.locator(".entry-input time.entry-time")
    expect(inputs.nth(1)).to_have_text(re.compile(r"^\d{1,2}:\d{2}"))
    expect(inputs.nth(1)).to_have_attribute("title", re.compile(str(yesterday.astimezone().year)))
    expect(inputs.nth(2)).to_have_text("5 min ago")
    expect(inputs.nth(3)).to_have_text("just now")
    page.locator(".day-separator").nth(1).scroll_into_view_if_needed()
    screenshot(page, "day-separators")
    # Kept fresh as time goes by.
    page.clock.fast_forward("02:00")
    expect(inputs.nth(2)).to_have_text("7 min ago")
    expect(inputs.nth(3)).to_have_text("2 min ago")
    # Icons are drawn, not glyphs a machine without an emoji font would lack.
    shown = page.locator("#transcript").inner_text()
    assert not any(glyph in shown for glyph in ICON_GLYPHS)
    expect(page.locator(".entry-resumed .icon-retry")).to_have_count(1)
    expect(page.locator(".entry-notice .icon-retry")).to_have_count(1)


def said(text: str) -> list[tuple[str, dict]]:
    return [("message.delta", {"text": text}), ("message.completed", {"text": text})]

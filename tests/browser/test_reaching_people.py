"""What reaches people, in a real Chromium against a Daphne that emails through a real SMTP server:
the notification settings page (reached from every page's header), browser notifications that
follow the person's choice, "Where it went" on a question's card, and an emailed answer link
opened where nobody is signed in, answering a path question with the picker."""

import re

import pytest
from playwright.sync_api import expect

from reach.models import Delivery
from tests.browser.conftest import hidden_tab, notifications, screenshot, wait_for_notification
from tests.conftest import all_events, wait_for_turn_end, wait_until
from tests.helpers import ask, create_conversation, outcomes, start, wait_pending

pytestmark = pytest.mark.browser

LINK = re.compile(r"(http://127\.0\.0\.1:\d+/answer/[^/\s]+/#k=[^\s\"<]+)")
ME = "/api/me/notifications/"


@pytest.fixture
def server(make_server, mailbox):
    return make_server(PARLEY_EMAIL_URL=mailbox.url)


def heard(page, kind: str, selection: str) -> bool:
    """Whether the page's socket brought news of ``selection`` (shown or not)."""
    return page.evaluate(
        "([kind, id]) => window.parleyPeople.heard.some("
        "(n) => n.kind === kind && n.selection === id)",
        [kind, selection],
    )


def test_bob_chooses_what_reaches_him_on_his_settings_page(browsing, people):
    page = browsing.open("bob")
    page.get_by_role("link", name="Settings").click()
    page.get_by_role("navigation", name="Your settings").get_by_role(
        "link", name="Notifications"
    ).click()
    expect(page).to_have_url(re.compile(r"/settings/notifications/$"))
    expect(page.get_by_role("heading", name="Notifications")).to_be_visible()
    expect(page.locator("#settings-defaults")).to_contain_text("these are the defaults")
    email = page.get_by_role("group", name="Email")
    expect(email).to_contain_text("Sent to bob@example.com.")
    expect(email.get_by_label("Questions for me")).to_be_checked()
    expect(page.get_by_role("group", name="Slack")).to_contain_text("Slack is not set up")
    browser = page.get_by_role("group", name="Browser notifications")
    expect(browser.get_by_label("Every question I may answer")).to_be_checked()
    expect(page.locator("#notify-toggle")).to_be_visible()  # the browser has not been asked yet
    screenshot(page, "notification-settings")

    # Quiet hours need both ends: the page says so, and saves nothing.
    email.get_by_label("Every question I may answer").check()
    page.get_by_label("Quiet from").fill("22:00")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#settings-error")).to_have_text(
        "Give both times for quiet hours (or leave both empty for none)."
    )
    with browsing.server.client(people.bob) as api:
        assert api.get(ME).json()["chosen"] is False

    page.get_by_label("until").fill("07:00")
    page.get_by_label("Time zone").select_option("Europe/Paris")
    page.get_by_role("group", name="Browser notifications").get_by_label("Nothing").check()
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".flash")).to_have_text("Your notification settings are saved.")
    expect(page.get_by_role("group", name="Email").get_by_label("Every question")).to_be_checked()
    expect(page.get_by_label("Quiet from")).to_have_value("22:00")
    expect(page.get_by_label("until")).to_have_value("07:00")
    expect(page.get_by_label("Time zone")).to_have_value("Europe/Paris")
    expect(page.locator("#settings-defaults")).to_have_count(0)
    # No browser notifications: the header offers none.
    expect(page.locator("#site-user")).to_have_attribute("data-browser-notifications", "off")
    expect(page.locator("#notify-toggle")).to_be_hidden()
    with browsing.server.client(people.bob) as api:
        body = api.get(ME).json()
    assert (body["email"], body["browser"], body["quiet_from"], body["quiet_until"]) == (
        "all",
        "off",
        "22:00",
        "07:00",
    )
    assert body["timezone"] == "Europe/Paris"


def test_browser_notifications_follow_the_person_s_choice(browsing, people):
    with browsing.server.client(people.bob) as bob_api:
        assert bob_api.put(ME, json={"browser": "addressed"}).status_code == 200
    bob = hidden_tab(browsing, "bob")
    with browsing.server.client(people.alice) as alice:
        # A question for anyone: Bob hears of it, and is not notified (he chose his own only).
        for_anyone = create_conversation(alice, title="Open")
        start(alice, for_anyone, [ask(kind="text", prompt="Anyone?")])
        anyone = wait_pending(alice, for_anyone)
        wait_until(lambda: heard(bob, "asked", anyone["id"]), what="Bob's tab hearing of it")
        assert notifications(bob) == []
        # One addressed to him: notified.
        for_bob = create_conversation(alice, title="Review")
        start(alice, for_bob, [ask(kind="text", prompt="Your review?", addressee="bob")])
        shown = wait_for_notification(bob, "A question")
        assert (shown["title"], shown["body"]) == ("A question for you in “Review”", "Your review?")

        # Off: nothing at all, not even what is addressed to him.
        with browsing.server.client(people.bob) as bob_api:
            assert bob_api.put(ME, json={"browser": "off"}).status_code == 200
        bob.reload()
        expect(bob.locator("#site-user")).to_have_attribute("data-browser-notifications", "off")
        again = create_conversation(alice, title="Again")
        start(alice, again, [ask(kind="text", prompt="And now?", addressee="bob")])
        question = wait_pending(alice, again)
        wait_until(lambda: heard(bob, "asked", question["id"]), what="Bob's tab hearing of it")
        assert notifications(bob) == []


def test_a_question_card_shows_where_the_question_went(browsing, people, mailbox):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Release")
        start(alice, cid, [ask(kind="confirm", prompt="Ship it?", addressee="bob")])
        question = wait_pending(alice, cid)
        mailbox.wait_for(1)
        delivery = wait_until(
            lambda: Delivery.objects.filter(selection_id=question["id"], status="sent").first(),
            what="the email recorded as sent",
        )
        page = browsing.conversation("alice", cid)
        card = page.locator(f'[data-selection="{question["id"]}"]')
        where = card.locator(".question-deliveries")
        where.get_by_text("Where it went").click()
        line = where.locator(".delivery")
        expect(line).to_have_count(1)
        expect(line).to_have_text(re.compile(r"^Emailed Bob · sent \d"))
        expect(line).to_have_attribute("data-status", "sent")
        sent_at = alice.get(f"/api/selections/{question['id']}/deliveries/").json()[0]["sent_at"]
        expect(line.locator("time")).to_have_attribute("datetime", sent_at)
        assert delivery.sent_at is not None
        screenshot(page, "question-where-it-went")
        # Answered: the outcome reads as ever, and where it went stays.
        assert alice.post(
            f"/api/selections/{question['id']}/reply/", json={"answer": True}
        ).is_success
        expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: yes")
        expect(line).to_have_text(re.compile(r"^Emailed Bob · sent"))
    # A viewer may not read it: the card does not offer it.
    carol = browsing.conversation("carol", cid)
    expect(carol.locator(f'[data-selection="{question["id"]}"]')).to_be_visible()
    expect(carol.locator(".question-deliveries")).to_have_count(0)


def test_an_emailed_link_answers_a_path_question_where_nobody_is_signed_in(
    browsing, people, mailbox
):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Reports")
        start(
            alice,
            cid,
            [ask(kind="path", mode="file", prompt="Which report?", addressee="bob")],
        )
        question = wait_pending(alice, cid)
        (message,) = mailbox.wait_for(1)
        text = message.get_body(preferencelist=("plain",)).get_content()
        link = LINK.search(text).group(1)

        page = browsing.signed_out(link, who="bob's link")
        expect(page.get_by_role("heading", name="A question in “Reports”")).to_be_visible()
        expect(page.locator(".site-user")).to_have_count(0)  # nobody is signed in
        card = page.locator(f'[data-selection="{question["id"]}"]')
        expect(card).to_contain_text("Which report?")
        expect(card.locator(".question-deliveries")).to_have_count(0)
        card.get_by_role("button", name="Open folder reports").click()
        expect(card.locator(".picker-crumbs [aria-current]")).to_have_text("reports")
        card.get_by_label("q4-plan.md").check()
        screenshot(page, "answer-link-path-picker")
        card.get_by_role("button", name="Choose").click()
        expect(card.locator(".question-outcome")).to_have_text(
            "Answered by Bob from an answer link: reports/q4-plan.md"
        )
        # The same turn goes on with Bob's answer.
        wait_for_turn_end(alice, cid)
        events = all_events(alice, cid)
    assert outcomes(events) == [{"status": "answered", "value": "reports/q4-plan.md", "by": "bob"}]
    (resolved,) = [e for e in events if e["type"] == "selection.resolved"]
    assert resolved["data"]["answered_via"] == "link"

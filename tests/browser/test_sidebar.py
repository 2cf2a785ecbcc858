"""The sidebar in a real Chromium, with two people at once: conversations across workspaces by
latest activity, kept live over the person's socket (a new one, a rename, a turn running), unread
counts that rise while the person is elsewhere and clear when they look (stored: a reload keeps
them); the home list and others' open pages kept live the same way (issue 30's bug 6); the
latest 50 and "Show more"; seen marks that back off when they fail and stop when refused; and the
drawer on a phone."""

import json
import re

import pytest
from playwright.sync_api import expect

from conversations import services
from tests.browser.conftest import PHONE, screenshot
from tests.conftest import wait_until
from tests.helpers import (
    ask,
    create_conversation,
    reply,
    start,
    started,
    store,
    stored_turn,
    wait_pending,
)

pytestmark = pytest.mark.browser


def sidebar_item(page, title: str):
    return page.locator("#sidebar .sidebar-item").filter(
        has=page.locator(".sidebar-title", has_text=re.compile(rf"^{re.escape(title)}$"))
    )


def home_row(page, title: str):
    return page.locator(".conversation-row").filter(
        has=page.get_by_role("link", name=title, exact=True)
    )


def test_the_sidebar_home_list_and_open_pages_follow_what_others_do(browsing, people, conversation):
    quiet = services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Quiet one", agent="scripted"
    )
    # Carol watches Plans; Bob is on the home page.
    carol = browsing.conversation("carol", conversation.pk)
    bob = browsing.open("bob")
    expect(bob.locator("#sidebar")).to_be_visible()
    expect(bob.locator("#sidebar-toggle")).to_have_attribute("aria-expanded", "true")
    expect(bob.locator("#sidebar .sidebar-title")).to_have_text(["Quiet one", "Plans"])
    expect(bob.locator(".conversation-row .conversation-link")).to_have_text(["Quiet one", "Plans"])

    with browsing.server.client(people.alice) as alice:
        # Alice starts a conversation: it appears in Bob's sidebar and home list.
        alice.post("/api/conversations/", json={"workspace": "team", "title": "Launch"})
        expect(bob.locator("#sidebar .sidebar-title")).to_have_text(
            ["Launch", "Quiet one", "Plans"]
        )
        expect(home_row(bob, "Launch")).to_be_visible()

        # She renames Plans: Bob's sidebar and home row, and Carol's open page (heading, tab).
        alice.patch(f"/api/conversations/{conversation.pk}/", json={"title": "Plans for May"})
        expect(sidebar_item(bob, "Plans for May")).to_be_visible()
        expect(home_row(bob, "Plans for May")).to_be_visible()
        expect(carol.get_by_role("heading", level=1)).to_have_text("Plans for May")
        expect(carol).to_have_title(re.compile(r"^Plans for May · The Team · Parley$"))

        # A turn starts in the oldest: "running", first again in both lists, and unread for Bob.
        script = [{"say": "Working on it."}, {"sleep": 60}]
        turn = alice.post(
            f"/api/conversations/{quiet.pk}/turns/", json={"input": json.dumps(script)}
        ).json()["turn"]
        expect(home_row(bob, "Quiet one").locator(".pill-running")).to_have_text("running")
        expect(bob.locator(".conversation-row .conversation-link")).to_have_text(
            ["Quiet one", "Launch", "Plans for May"]
        )
        quiet_item = sidebar_item(bob, "Quiet one")
        expect(quiet_item.locator(".sidebar-marker")).to_have_text("running")
        expect(bob.locator("#sidebar .sidebar-title").first).to_have_text("Quiet one")
        # Its input and the agent's message: two, whatever deltas came.
        expect(quiet_item.locator(".unread-count")).to_have_text("2 unread")
        screenshot(bob, "home-live")

        # Bob opens it from the sidebar: no unread while he looks, nor after a reload.
        quiet_item.get_by_role("link").click()
        expect(bob.locator("#connection")).to_have_attribute("data-state", "live")
        expect(bob.get_by_role("heading", level=1)).to_have_text("Quiet one")
        quiet_item = sidebar_item(bob, "Quiet one")
        expect(quiet_item.get_by_role("link")).to_have_attribute("aria-current", "page")
        expect(quiet_item.locator(".unread-count")).to_have_count(0)
        wait_until(lambda: bob.evaluate("window.parleySidebar.marked") >= 2, what="Bob's seen mark")
        screenshot(bob, "sidebar-desktop")
        bob.goto("/")
        expect(sidebar_item(bob, "Quiet one").locator(".sidebar-marker")).to_have_text("running")
        expect(sidebar_item(bob, "Quiet one").locator(".unread-count")).to_have_count(0)
        # Plans' unread stays Bob's own (he never opened it): its rename event is no message.
        expect(sidebar_item(bob, "Plans for May").locator(".unread-count")).to_have_count(0)
        stopping = alice.post(f"/api/conversations/{quiet.pk}/cancel/", json={"turn_id": turn})
        assert stopping.status_code == 202, stopping.text
        expect(sidebar_item(bob, "Quiet one").locator(".sidebar-marker")).to_have_count(0)
        expect(home_row(bob, "Quiet one").locator(".pill-running")).to_have_count(0)


def test_the_phone_drawer_opens_and_closes_with_its_button_and_the_desktop_choice_is_kept(
    browsing, people, conversation
):
    page = browsing.open("bob", viewport=PHONE)
    toggle = page.get_by_role("button", name="Conversations", exact=True)
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(toggle).to_be_visible()  # shown by sidebar.js once it runs: Tab waits for it
    # By keyboard: the toggle is the first stop after the skip link.
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(toggle).to_be_focused()
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.get_by_role("button", name="Close the conversations list")).to_be_focused()
    expect(page.locator("#sidebar .sidebar-title")).to_have_text(["Plans"])
    screenshot(page, "sidebar-phone-drawer")
    page.keyboard.press("Escape")
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()
    # On a wide screen the person's choice is remembered across pages.
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(page.locator("#sidebar")).to_be_visible()
    toggle.click()
    expect(page.locator("#sidebar")).to_be_hidden()
    page.reload()
    expect(page.get_by_role("button", name="Conversations", exact=True)).to_have_attribute(
        "aria-expanded", "false"
    )
    expect(page.locator("#sidebar")).to_be_hidden()


def test_fifty_then_more_and_seen_marks_back_off_on_failure_and_stop_when_refused(browsing, people):
    talk = services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Talk", agent="scripted"
    )
    for n in range(50):
        newer = services.conversation_create(
            workspace=people.workspace, user=people.alice.user, title=f"Newer {n}"
        )
    turn = stored_turn(newer, people.alice.user, "Many")
    store(turn, [started(turn), *[("message.completed", {"text": "."})] * 120])

    bob = browsing.conversation("bob", talk.pk)
    # The latest 50 (Talk is the 51st); counts above 99 say so.
    expect(bob.locator("#sidebar .sidebar-item")).to_have_count(50)
    expect(sidebar_item(bob, "Newer 49").locator(".unread-count")).to_have_text("99+ unread")
    bob.get_by_role("button", name="Show more conversations").click()
    expect(bob.locator("#sidebar .sidebar-item")).to_have_count(51)
    expect(sidebar_item(bob, "Talk").get_by_role("link")).to_be_focused()
    expect(sidebar_item(bob, "Talk").get_by_role("link")).to_have_attribute("aria-current", "page")
    expect(bob.locator(".sidebar-more")).to_be_hidden()
    screenshot(bob, "sidebar-show-more")

    seen = []
    bob.on("request", lambda request: "/seen/" in request.url and seen.append(request.url))

    def talk_turn(first: str, last: str, turns: int) -> None:
        script = [{"say": first}, {"sleep": 2}, {"say": last}]
        with browsing.server.client(people.alice) as alice:
            alice.post(f"/api/conversations/{talk.pk}/turns/", json={"input": json.dumps(script)})
        # Its end, after the agent's last message (the input shows the script itself).
        expect(bob.locator(".turn-end")).to_have_text(["Completed"] * turns)

    # The network fails: marks try again later and later, not every 300 ms.
    browsing.allow_network_noise = True
    bob.route("**/seen/", lambda route: route.abort())
    talk_turn("One.", "Two.", 1)
    assert 1 <= len(seen) <= 4, seen
    assert bob.evaluate("window.parleySidebar.markFailures") >= 1

    # Refused (as once the person is removed, or the conversation deleted): one try, then none.
    bob.unroute("**/seen/")
    refusal = json.dumps({"error": {"code": "forbidden", "message": "No."}})
    bob.route(
        "**/seen/",
        lambda route: route.fulfill(status=403, content_type="application/json", body=refusal),
    )
    bob.reload()
    expect(bob.locator("#connection")).to_have_attribute("data-state", "live")
    seen.clear()
    talk_turn("Three.", "Four.", 2)
    assert len(seen) == 1, seen
    assert bob.evaluate("window.parleySidebar.markRefused") == 403


def test_a_turn_waiting_on_a_question_is_marked_waiting_until_answered(browsing, people):
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Naming")
        bob = browsing.open("bob")
        start(alice, cid, [ask(kind="text", prompt="What should we call it?"), {"say": "Done."}])
        question = wait_pending(alice, cid)
        marker = sidebar_item(bob, "Naming").locator(".sidebar-marker")
        expect(marker).to_have_text("waiting")
        assert reply(alice, question["id"], answer="Parley").status_code == 200
        expect(marker).to_have_count(0)

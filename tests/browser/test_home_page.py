"""The home list in a real Chromium: latest activity first, rename in place, archive (gone from
the list, found by search and under Archived), delete after a confirmation, paging beyond 50
without JavaScript; and the same controls in a conversation's header."""

import json
import re

import pytest
from playwright.sync_api import expect

from conversations import services
from conversations.models import Conversation
from tests.browser.conftest import DESKTOP, screenshot
from tests.conftest import wait_for_turn_end, wait_until

pytestmark = pytest.mark.browser


def row(page, title: str):
    return page.locator(".conversation-row").filter(
        has=page.get_by_role("link", name=title, exact=True)
    )


def make(people, title: str, user=None) -> Conversation:
    return services.conversation_create(
        workspace=people.workspace, user=user or people.alice.user, title=title
    )


def test_the_list_shows_latest_activity_first_with_when_and_the_running_pill(
    browsing, people, conversation
):
    quiet = make(people, "Quiet one")
    with browsing.server.client(people.alice) as client:
        # The older conversation gets a turn: it comes first again.
        client.post(f"/api/conversations/{conversation.pk}/turns/", json={"input": "help"})
        wait_for_turn_end(client, conversation.pk)
        script = [{"ask": {"kind": "confirm", "prompt": "Go on?"}}]
        busy = client.post(
            "/api/conversations/", json={"workspace": "team", "title": "Busy", "agent": "scripted"}
        ).json()["id"]
        client.post(f"/api/conversations/{busy}/turns/", json={"input": json.dumps(script)})
        wait_until(
            lambda: (
                client.get(f"/api/conversations/{busy}/in-flight/").json()["status"]
                == "awaiting_input"
            ),
            what="the question",
        )
    page = browsing.open("alice")
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(
        ["Busy", "Plans", "Quiet one"]
    )
    expect(row(page, "Busy").locator(".pill-awaiting_input")).to_have_text("waiting for an answer")
    when = row(page, "Plans").locator("time")
    expect(when).to_have_text("just now")
    stored = Conversation.objects.get(pk=conversation.pk).last_activity_at
    expect(when).to_have_attribute("title", re.compile(rf"^Latest activity: .* {stored.year}, "))
    expect(row(page, "Quiet one")).to_contain_text("started by Alice")
    expect(row(page, "Quiet one")).to_have_attribute("data-conversation", quiet.pk)


def test_alice_renames_a_conversation_in_place(browsing, conversation):
    page = browsing.open("alice")
    # By its id: while it is edited, its link is hidden.
    plans = page.locator(f'.conversation-row[data-conversation="{conversation.pk}"]')
    plans.get_by_role("button", name="Rename Plans").click()
    box = page.get_by_label("New title for Plans")
    expect(box).to_be_focused()
    expect(box).to_have_value("Plans")
    # A blank title is refused with the reason, and nothing changes.
    box.fill("   ")
    box.press("Enter")
    expect(plans.locator(".form-error")).to_have_text("title: This field may not be blank.")
    assert Conversation.objects.get(pk=conversation.pk).title == "Plans"
    # Escape gives up.
    box.press("Escape")
    expect(box).to_have_count(0)
    expect(page.get_by_role("link", name="Plans", exact=True)).to_be_visible()
    plans.get_by_role("button", name="Rename Plans").click()
    box = page.get_by_label("New title for Plans")
    box.fill("Launch plans")
    screenshot(page, "home-rename")
    box.press("Enter")
    renamed = row(page, "Launch plans")
    expect(renamed).to_be_visible()
    expect(renamed.get_by_role("button", name="Rename Launch plans")).to_be_focused()
    expect(page.locator("#home-status")).to_have_text("Renamed to “Launch plans”.")
    assert Conversation.objects.get(pk=conversation.pk).title == "Launch plans"
    page.reload()
    expect(row(page, "Launch plans")).to_be_visible()


def test_archiving_hides_a_conversation_and_search_finds_it(browsing, people, conversation):
    make(people, "Lunch order")
    page = browsing.open("alice")
    row(page, "Plans").get_by_role("button", name="Archive Plans").click()
    expect(row(page, "Plans")).to_have_count(0)
    status = page.locator("#home-status")
    expect(status).to_contain_text("Archived “Plans”")
    wait_until(lambda: Conversation.objects.get(pk=conversation.pk).archived_at, what="archived")
    # Undo puts it back where it was.
    status.get_by_role("button", name="Undo").click()
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(
        ["Lunch order", "Plans"]
    )
    wait_until(
        lambda: Conversation.objects.get(pk=conversation.pk).archived_at is None, what="back"
    )
    row(page, "Plans").get_by_role("button", name="Archive Plans").click()
    expect(row(page, "Plans")).to_have_count(0)
    page.reload()
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(["Lunch order"])

    # Searching (in any case) finds it, marked as archived.
    search = page.get_by_role("searchbox", name="Search conversations")
    search.fill("PLANS")
    search.press("Enter")
    expect(page).to_have_url(re.compile(r"\?q=PLANS$"))
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(["Plans"])
    expect(row(page, "Plans").locator(".pill-archived")).to_be_visible()
    expect(page.locator(".home-summary")).to_contain_text("archived ones included")
    screenshot(page, "home-search")

    # The Archived view lists it; unarchiving there sends it back to the list.
    page.get_by_role("link", name="Clear the search").click()
    page.get_by_role("link", name="Archived", exact=True).click()
    expect(page.get_by_role("link", name="Archived", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(["Plans"])
    screenshot(page, "home-archived")
    row(page, "Plans").get_by_role("button", name="Unarchive Plans").click()
    expect(row(page, "Plans")).to_have_count(0)
    expect(page.locator("#home-status")).to_contain_text("back in the list")
    page.get_by_role("link", name="Conversations", exact=True).click()
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(
        ["Lunch order", "Plans"]
    )


def test_delete_asks_first_and_then_removes_it(browsing, people, conversation):
    make(people, "Keep me")
    page = browsing.open("alice")
    row(page, "Plans").get_by_role("button", name="Delete Plans").click()
    dialog = page.get_by_role("dialog", name="Delete “Plans”?")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    screenshot(page, "home-delete-confirm")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    expect(row(page, "Plans")).to_be_visible()
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    # Escape is "no" too.
    row(page, "Plans").get_by_role("button", name="Delete Plans").click()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert Conversation.objects.filter(pk=conversation.pk).exists()

    row(page, "Plans").get_by_role("button", name="Delete Plans").click()
    dialog.get_by_role("button", name="Delete", exact=True).click()
    expect(dialog).to_have_count(0)
    expect(row(page, "Plans")).to_have_count(0)
    expect(page.locator("#home-status")).to_have_text("Deleted “Plans”.")
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    page.reload()
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(["Keep me"])


def test_deleting_while_a_turn_runs_is_refused_in_the_dialog(browsing, people):
    script = [{"ask": {"kind": "confirm", "prompt": "Go on?"}}]
    with browsing.server.client(people.alice) as client:
        cid = client.post(
            "/api/conversations/", json={"workspace": "team", "title": "Busy", "agent": "scripted"}
        ).json()["id"]
        client.post(f"/api/conversations/{cid}/turns/", json={"input": json.dumps(script)})
        wait_until(
            lambda: client.get(f"/api/conversations/{cid}/in-flight/").json()["in_flight"],
            what="the turn",
        )
    page = browsing.open("alice")
    row(page, "Busy").get_by_role("button", name="Delete Busy").click()
    dialog = page.get_by_role("dialog", name="Delete “Busy”?")
    dialog.get_by_role("button", name="Delete", exact=True).click()
    expect(dialog.get_by_role("alert")).to_have_text(
        "A turn is running in this conversation; stop it before deleting the conversation."
    )
    dialog.get_by_role("button", name="Cancel").click()
    expect(row(page, "Busy")).to_be_visible()
    assert Conversation.objects.filter(pk=cid).exists()


def test_each_person_sees_only_the_controls_they_may_use(browsing, people, conversation):
    make(people, "Bob's own", user=people.bob.user)
    bob = browsing.open("bob")
    own = row(bob, "Bob's own")
    expect(own.get_by_role("button")).to_have_text(["Rename", "Archive"])
    expect(row(bob, "Plans").get_by_role("button")).to_have_count(0)
    carol = browsing.open("carol")
    expect(carol.locator(".conversation-row")).to_have_count(2)
    expect(carol.locator(".conversation-row").get_by_role("button")).to_have_count(0)
    alice = browsing.open("alice")
    expect(row(alice, "Bob's own").get_by_role("button")).to_have_text(
        ["Rename", "Archive", "Delete"]
    )


def test_reading_searching_and_paging_beyond_fifty_work_without_javascript(
    browsing, people, chromium
):
    titles = [f"Topic {n:03}" for n in range(120)]
    for title in titles:
        make(people, title)
    newest_first = list(reversed(titles))
    context = chromium.new_context(
        base_url=browsing.server.url, viewport=DESKTOP, java_script_enabled=False
    )
    browsing.contexts.append(context)
    page = context.new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pw")
    page.get_by_role("button", name="Log in").click()
    team = page.locator("section.workspace", has=page.get_by_role("heading", name="The Team"))
    links = team.locator(".conversation-link")
    expect(links).to_have_text(newest_first[:50])
    # Without the script there are no controls that would do nothing.
    expect(page.locator(".conversation-actions").first).to_be_hidden()
    pager = team.get_by_role("navigation", name="Pages of The Team")
    expect(pager).to_contain_text("Page 1 of 3 (120 conversations)")
    pager.scroll_into_view_if_needed()
    screenshot(page, "home-paging")
    pager.get_by_role("link", name="Older").click()
    expect(page).to_have_url(re.compile(r"workspace=team&page=2"))
    expect(pager).to_contain_text("Page 2 of 3")
    expect(links).to_have_text(newest_first[50:100])
    pager.get_by_role("link", name="Older").click()
    expect(links).to_have_text(newest_first[100:])
    expect(pager.get_by_role("link", name="Older")).to_have_count(0)
    pager.get_by_role("link", name="Newer").click()
    expect(pager).to_contain_text("Page 2 of 3")
    expect(links).to_have_text(newest_first[50:100])

    # A search pages too, and keeps its words from page to page.
    page.get_by_role("searchbox", name="Search conversations").fill("topic 1")
    page.get_by_role("button", name="Search").click()
    expect(links).to_have_text(newest_first[:20])  # Topic 119 to Topic 100
    expect(pager).to_have_count(0)
    page.get_by_role("searchbox", name="Search conversations").fill("topic")
    page.get_by_role("button", name="Search").click()
    pager.get_by_role("link", name="Older").click()
    expect(page).to_have_url(re.compile(r"q=topic&workspace=team&page=2"))
    expect(pager).to_contain_text("Page 2 of 3")
    expect(links).to_have_text(newest_first[50:100])


# The conversation's own page. ---------------------------------------------------------------


def test_alice_renames_and_archives_from_the_conversation_header(browsing, conversation):
    # A title with what String.replace reads as patterns ("$&", "$'", "$`") is shown as typed,
    # in her tab and heading and in Carol's open page of it.
    renamed = "Plans $& $' $` for Q3"
    carol = browsing.conversation("carol", conversation.pk)
    page = browsing.conversation("alice", conversation.pk)
    header = page.locator(".conversation-title")
    header.get_by_role("button", name="Rename").click()
    box = header.get_by_label("New title for Plans")
    box.fill(renamed)
    screenshot(page, "conversation-rename")
    box.press("Enter")
    for each in (page, carol):
        expect(each.get_by_role("heading", level=1)).to_have_text(renamed)
        expect(each).to_have_title(f"{renamed} · The Team · Parley")
    expect(page.locator('.crumbs [aria-current="page"]')).to_have_text(renamed)
    assert Conversation.objects.get(pk=conversation.pk).title == renamed
    header.get_by_role("button", name="Archive").click()
    expect(header.locator(".pill-archived")).to_be_visible()
    expect(header.get_by_role("button", name="Unarchive")).to_be_visible()
    expect(header.get_by_role("status")).to_contain_text("Archived")
    wait_until(lambda: Conversation.objects.get(pk=conversation.pk).archived_at, what="archived")
    # The page goes on working: the connection is still live.
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")


def test_deleting_from_the_conversation_page_asks_then_goes_home(browsing, people, conversation):
    make(people, "Another")
    page = browsing.conversation("alice", conversation.pk)
    page.locator(".conversation-title").get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog", name="Delete “Plans”?")
    expect(dialog).to_contain_text("cannot be undone")
    screenshot(page, "conversation-delete-confirm")
    dialog.get_by_role("button", name="Delete", exact=True).click()
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    expect(page.locator("#home-status")).to_have_text("Deleted “Plans”.")
    expect(page.locator(".conversation-row .conversation-link")).to_have_text(["Another"])
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_the_header_offers_only_what_the_person_may_do(browsing, people, conversation):
    own = make(people, "Bob's own", user=people.bob.user)
    bob = browsing.conversation("bob", own.pk)
    actions = bob.locator(".conversation-title .conversation-actions")
    expect(actions.get_by_role("button")).to_have_text(["Rename", "Archive"])
    bob.goto(f"/conversations/{conversation.pk}/")
    for page in (bob, browsing.conversation("carol", conversation.pk)):
        header = page.locator(".conversation-title")
        expect(header).to_have_attribute("data-permissions", "loaded")
        expect(header.get_by_role("button")).to_have_count(0)
    alice = browsing.conversation("alice", conversation.pk)
    expect(alice.locator(".conversation-title").get_by_role("button")).to_have_text(
        ["Rename", "Archive", "Delete"]
    )

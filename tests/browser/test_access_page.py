"""A conversation page whose reader loses access while it is open: lowered to viewer in the
admin, the page reloads as a viewer's; removed from the workspace, it says so, takes nothing more
and does not reconnect."""

import re

import pytest
from playwright.sync_api import expect

from conversations.models import Membership
from tests.browser.conftest import screenshot
from tests.helpers import admin_of, message_after, post_form

pytestmark = pytest.mark.browser

MEMBERSHIPS = "/admin/conversations/membership/"


def test_bobs_page_follows_his_role_and_says_when_his_access_is_removed(
    browsing, people, conversation
):
    admin = admin_of(browsing.server, people)
    membership = Membership.objects.get(user=people.bob.user, workspace=people.workspace)
    change = f"{MEMBERSHIPS}{membership.pk}/change/"
    form = {"user": people.bob.user.pk, "workspace": people.workspace.pk, "source": "admin"}
    try:
        bob = browsing.conversation("bob", conversation.pk)
        box = bob.get_by_role("textbox", name=re.compile("Message the agent"))
        expect(box).to_be_visible()
        bob.evaluate("window.parleyBeforeReload = true")

        assert post_form(admin, change, {**form, "role": "viewer"}).status_code == 302
        # The page reloads itself, as a viewer's: no composer, the viewer's note.
        expect(bob.locator(".viewer-note")).to_be_visible(timeout=60_000)
        assert bob.evaluate("window.parleyBeforeReload") is None
        expect(bob.get_by_role("textbox")).to_have_count(0)
        expect(bob.locator("#connection")).to_have_attribute("data-state", "live")

        assert post_form(admin, change, {**form, "role": "member"}).status_code == 302
        bob.reload()
        expect(box).to_be_visible()
        expect(bob.locator("#connection")).to_have_attribute("data-state", "live")

        done = post_form(admin, f"{MEMBERSHIPS}{membership.pk}/delete/", {"post": "yes"})
        assert "was deleted successfully" in message_after(admin, done)
        connection = bob.locator("#connection")
        expect(connection).to_contain_text(
            "Your access to this workspace was removed.", timeout=60_000
        )
        expect(connection).to_have_attribute("data-state", "closed")
        expect(box).to_be_disabled()
        screenshot(bob, "access-removed")
    finally:
        admin.close()

"""The conversation page as people use chat apps, in a real Chromium: a long title on a phone
still opens at the latest and follows it, a tall question is never hidden under the footer,
Enter sends in every box, the composer names whom the agent asks, and a half-written message
is kept per conversation across reloads and tabs."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PHONE, screenshot
from tests.conftest import wait_for_turn_end
from tests.helpers import create_conversation, start

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

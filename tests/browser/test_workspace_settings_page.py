"""A workspace's settings page in a real Chromium: an owner finds it from the home page, adds a
webhook endpoint and sees its secret once, a question is delivered to a real receiver (which
verifies the signature) and shows in the page's deliveries, and the endpoint is disabled there."""

import pytest
from playwright.sync_api import expect

from reach.models import Delivery
from tests.browser.conftest import PHONE, screenshot
from tests.conftest import wait_until
from tests.helpers import ask, create_conversation, start, wait_pending
from tests.webhook_server import Receiver

pytestmark = pytest.mark.browser


@pytest.fixture
def receiver():
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


def test_an_owner_adds_an_endpoint_sees_its_secret_once_and_its_deliveries(
    browsing, people, receiver
):
    page = browsing.open("alice")
    page.get_by_role("link", name="Settings of The Team").click()
    expect(page.get_by_role("heading", name="The Team: where its questions go")).to_be_visible()
    expect(page.locator("#no-endpoints")).to_have_text("No webhook endpoints yet.")

    page.get_by_label("URL").fill(receiver.url)
    page.get_by_label("Description").fill("Team bot")
    page.get_by_label("question.reminded").uncheck()
    page.get_by_role("button", name="Add the endpoint").click()
    expect(page.get_by_role("heading", name="Webhook endpoint added")).to_be_visible()
    secret = page.locator("#new-secret").inner_text()
    assert secret.startswith("whsec_")
    screenshot(page, "workspace-settings-secret")
    receiver.secret = secret
    endpoint = page.locator(".endpoint")
    expect(endpoint.locator(".endpoint-url")).to_have_text(receiver.url)
    expect(endpoint.locator(".endpoint-meta")).to_contain_text(
        "question.asked, question.escalated, question.resolved"
    )

    # A question, asked over REST: the receiver gets it, signed with that secret.
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Release plan")
        start(alice, cid, [ask(kind="confirm", prompt="Deploy?")])
        wait_pending(alice, cid)
    (asked,) = receiver.wait_for(1)
    assert asked.refusal == "" and asked.type == "question.asked"
    wait_until(
        lambda: Delivery.objects.filter(pk=asked.id, status="sent").exists(),
        what="the delivery recorded as sent",
    )

    # Seen again, the page never shows the secret; it shows the delivery.
    page.reload()
    expect(page.locator("#new-secret")).to_have_count(0)
    assert secret not in page.content()
    row = page.locator(f'tr[data-delivery="{asked.id}"]')
    expect(row).to_contain_text("question.asked")
    expect(row.locator(".pill")).to_have_text("sent")
    expect(row.locator(".delivery-said")).to_contain_text("200 OK")
    screenshot(page, "workspace-settings-deliveries")

    page.get_by_role("button", name=f"Disable {receiver.url}").click()
    expect(page.locator(".flash")).to_contain_text(f"{receiver.url}: disabled.")
    expect(endpoint.locator(".pill-disabled")).to_have_text("disabled")
    expect(endpoint.locator(".endpoint-reason")).to_have_text("Disabled by Alice.")
    expect(page.get_by_role("button", name=f"Enable {receiver.url}")).to_be_visible()


def test_members_get_no_settings_link_and_a_refusal(browsing, people):
    page = browsing.open("bob")
    expect(page.get_by_role("heading", name="The Team")).to_be_visible()
    expect(page.get_by_role("link", name="Settings of The Team")).to_have_count(0)
    response = page.goto("/workspaces/team/settings/")
    assert response.status == 403
    expect(page.get_by_role("heading", name="The Team: where its questions go")).to_have_count(0)


def test_the_settings_page_fits_a_phone(browsing, people):
    page = browsing.open("alice", "/workspaces/team/settings/", viewport=PHONE)
    expect(page.get_by_role("button", name="Add the endpoint")).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], width
    screenshot(page, "workspace-settings-phone")

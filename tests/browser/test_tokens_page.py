"""The API tokens page in a real Chromium: a person finds it from their settings, makes a token
with an expiry, sees its key once (and copies it), the key works over REST, and revoking it
(confirmed) stops it at once."""

import httpx
import pytest
from playwright.sync_api import expect

from accounts.models import ApiToken
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser


def test_a_person_makes_a_token_sees_its_key_once_and_revokes_it(browsing, people):
    page = browsing.open("bob", "/settings/notifications/")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", name="API tokens", exact=True)).to_be_visible()
    expect(page.locator("#tokens")).to_contain_text("tests")

    # Nothing named: refused, nothing made.
    page.get_by_role("button", name="Make token").click()
    expect(page.locator("#token-form")).to_contain_text("This field is required.")
    assert ApiToken.objects.filter(user=people.bob.user).count() == 1

    page.get_by_label("Name").fill("CI deploys")
    page.get_by_label("Expires").select_option("30")
    page.get_by_role("button", name="Make token").click()
    expect(page.get_by_role("heading", name="Your new token “CI deploys”")).to_be_visible()
    key = page.get_by_label("Key").input_value()
    assert key.startswith("prl_")
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("#token-copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == key
    screenshot(page, "tokens-created")
    token = ApiToken.objects.get(user=people.bob.user, name="CI deploys")
    row = page.locator(f"#token-{token.pk}")
    expect(row).to_contain_text(key[:12])

    with httpx.Client(
        base_url=browsing.server.url, headers={"Authorization": f"Token {key}"}
    ) as client:
        assert client.get("/api/workspaces/").status_code == 200

    # Shown once: seen again, the page never shows it (it is kept nowhere to show).
    page.goto("/settings/tokens/")
    expect(page.locator("#token-created")).to_have_count(0)
    assert key not in page.content()
    expect(row).to_contain_text("CI deploys")

    # Revoking asks first, then it stops working at once.
    row.get_by_text("Revoke…").click()
    row.get_by_role("button", name="Revoke “CI deploys”").click()
    expect(page.locator(".flash")).to_contain_text("“CI deploys” is revoked")
    expect(page.locator(f"#token-{token.pk}")).to_have_count(0)
    screenshot(page, "tokens-revoked")
    with httpx.Client(
        base_url=browsing.server.url, headers={"Authorization": f"Token {key}"}
    ) as client:
        assert client.get("/api/workspaces/").status_code == 401


def test_the_page_needs_a_signed_in_person(browsing):
    page = browsing.signed_out(f"{browsing.server.url}/settings/tokens/")
    expect(page).to_have_url(f"{browsing.server.url}/login/?next=/settings/tokens/")

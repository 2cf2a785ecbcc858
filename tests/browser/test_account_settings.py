"""A person's own account in Chromium, against a real Daphne that mails through a real SMTP
server: a name changed; an email changed from the link that reaches the new address (the old one
told); a password changed, then used; a forgotten password reset from its emailed link; links
that are tampered with or past their time refused with a page saying so; and a reset for an
unknown address that looks the same as for a known one and sends nothing."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts.email_change import SALT
from accounts.models import AuditEntry
from tests.browser.conftest import screenshot
from tests.helpers import signed_in_the_past

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EMAIL_LINK = re.compile(r"http://127\.0\.0\.1:\d+/settings/account/email/confirm/#k=\S+")
RESET_LINK = re.compile(r"http://127\.0\.0\.1:\d+/reset/#u=\S+")


@pytest.fixture
def server(make_server, mailbox):
    """The browsing fixture's server, here one that sends email."""
    return make_server(PARLEY_EMAIL_URL=mailbox.url, PARLEY_EMAIL_FROM="Parley <team@parley.test>")


def _text(message) -> str:
    return message.get_body(preferencelist=("plain",)).get_content()


def _sign_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def _user(username: str):
    return get_user_model().objects.get(username=username)


def test_alice_changes_her_name_from_her_account_page(browsing, people):
    page = browsing.open("alice")
    page.get_by_role("link", name="Settings", exact=True).click()
    expect(page).to_have_url(re.compile(r"/settings/account/$"))
    nav = page.get_by_role("navigation", name="Your settings")
    expect(nav.get_by_role("link", name="Account")).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="API tokens")).to_have_attribute(
        "href", "/settings/tokens/"
    )
    page.get_by_label("First name").fill("Alice")
    page.get_by_label("Last name").fill("Liddell")
    page.get_by_role("button", name="Save name").click()
    expect(page.get_by_role("status")).to_contain_text("Your name is saved.")
    expect(page.get_by_label("Signed in as")).to_have_text("Alice Liddell")
    assert _user("alice").get_full_name() == "Alice Liddell"
    # The same navigation on the notifications page.
    nav.get_by_role("link", name="Notifications").click()
    expect(page.get_by_role("heading", name="Notifications")).to_be_visible()
    expect(
        page.get_by_role("navigation", name="Your settings").get_by_role("link", name="Account")
    ).to_be_visible()


def test_alice_changes_her_email_by_following_the_link_sent_to_the_new_address(
    browsing, people, mailbox, server
):
    page = browsing.open("alice", "/settings/account/")
    # An address another account has is refused, whatever its case.
    page.get_by_label("New email address").fill("BOB@example.com")
    page.get_by_role("button", name="Send a confirmation link").click()
    expect(page.locator("#email-error")).to_have_text(
        "Another account already uses this email address: choose another one."
    )

    page.get_by_label("New email address").fill("alice@wonderland.example")
    page.get_by_role("button", name="Send a confirmation link").click()
    expect(page.get_by_role("status")).to_contain_text("We sent a link to alice@wonderland.example")
    (message,) = mailbox.wait_for(1)
    assert message["To"] == "alice@wonderland.example"
    link = EMAIL_LINK.search(_text(message)).group(0)
    assert _user("alice").email == "alice@example.com"  # not before the link is followed

    page.goto(link)
    expect(page.get_by_role("heading", name="Confirm your new email address")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/settings/account/email/confirm/$"))  # fragment gone
    assert _user("alice").email == "alice@example.com"  # opening it changes nothing
    screenshot(page, "account-email-confirm")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#email-confirm-done")).to_contain_text(
        "Your address is now alice@wonderland.example."
    )
    assert _user("alice").email == "alice@wonderland.example"

    notice = mailbox.wait_for(2)[1]
    assert notice["To"] == "alice@example.com"
    assert notice["Subject"] == "Your Parley email address was changed"
    assert "to alice@wonderland.example" in _text(notice)
    entry = AuditEntry.objects.get(action="email_changed")
    assert entry.detail == {"old": "alice@example.com", "new": "alice@wonderland.example"}
    # The link's signature reached no log (the server's, access log included) and no audit.
    signature = link.partition("#k=")[2]
    assert signature not in server.log_text()
    assert not any(signature in str(e.detail) for e in AuditEntry.objects.all())

    # Followed again (from elsewhere: a link differing only in its fragment does not reload),
    # it no longer works.
    page.goto("/")
    page.goto(link)
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#email-confirm-refusal")).to_contain_text(
        "your email address has changed since it was sent"
    )


def test_a_tampered_or_expired_email_link_is_refused_with_a_page_saying_so(
    browsing, people, server
):
    page = browsing.open("alice")
    alice = _user("alice")
    payload = {"u": alice.pk, "e": "alice@new.example", "o": "0" * 20}
    expired = signed_in_the_past(payload, salt=SALT, hours=48)
    page.goto(f"{server.url}/settings/account/email/confirm/#k={expired}")
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("heading", name="This link does not work")).to_be_visible()
    expect(page.locator("#email-confirm-refusal")).to_have_text(
        "This link has expired: ask for the change again on your account page."
    )
    screenshot(page, "account-email-link-refused")

    page.goto("/")
    page.goto(f"{server.url}/settings/account/email/confirm/#k={expired[:-4]}AAAA")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#email-confirm-refusal")).to_have_text(
        "This link is not valid: open the one you were sent, whole."
    )
    # A link cut before its fragment: nothing to confirm.
    page.goto(f"{server.url}/settings/account/email/confirm/")
    expect(page.get_by_text("This link is not whole")).to_be_visible()
    expect(page.get_by_role("button", name="Confirm")).to_be_disabled()
    assert _user("alice").email == "alice@example.com"


def test_bob_changes_his_password_and_signs_in_with_the_new_one(browsing, people):
    page = browsing.open("bob", "/settings/account/")
    page.get_by_role("link", name="Change your password").click()
    page.get_by_label("Old password").fill("bob-pw")
    page.get_by_label("New password", exact=True).fill("marmalade-skies-42")
    page.get_by_label("New password confirmation").fill("marmalade-skies-42")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("status")).to_contain_text("Your password is changed.")
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()  # still signed in
    assert AuditEntry.objects.filter(action="password_changed", subject=people.bob.user).exists()

    page.get_by_role("button", name="Log out").click()
    _sign_in(page, "bob", "bob-pw")
    expect(page.get_by_role("alert")).to_contain_text("didn't match")
    _sign_in(page, "bob", "marmalade-skies-42")
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()


def test_bob_resets_a_forgotten_password_from_the_emailed_link(browsing, people, mailbox, server):
    page = browsing.signed_out(f"{server.url}/login/", who="bob")
    page.get_by_role("link", name="Forgot your password?").click()
    page.get_by_label("Email").fill("Bob@Example.com")
    page.get_by_role("button", name="Send the link").click()
    expect(page.get_by_role("heading", name="Check your email")).to_be_visible()
    (message,) = mailbox.wait_for(1)
    assert message["To"] == "bob@example.com"
    assert message["Subject"] == "Reset your Parley password"
    link = RESET_LINK.search(_text(message)).group(0)

    page.goto(link)
    expect(page).to_have_url(re.compile(r"/reset/$"))
    page.get_by_role("button", name="Choose a new password").click()
    page.get_by_label("New password", exact=True).fill("tangerine-trees-77")
    page.get_by_label("New password confirmation").fill("tangerine-trees-77")
    page.get_by_role("button", name="Set the new password").click()
    expect(page.get_by_role("heading", name="Your password is set")).to_be_visible()
    entry = AuditEntry.objects.get(action="password_reset")
    assert entry.subject == people.bob.user and entry.detail == {}
    token = link.partition("&k=")[2]
    assert token not in server.log_text()

    _sign_in(page, "bob", "tangerine-trees-77")
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()

    # The link is spent.
    other = browsing.signed_out(link)
    other.get_by_role("button", name="Choose a new password").click()
    expect(other.locator("#reset-link-refusal")).to_contain_text("This reset link is not valid")


def test_a_reset_for_an_unknown_address_looks_the_same_and_sends_nothing(
    browsing, people, mailbox, server
):
    def ask(address: str) -> str:
        page = browsing.signed_out(f"{server.url}/password-reset/")
        page.get_by_label("Email").fill(address)
        page.get_by_role("button", name="Send the link").click()
        expect(page.get_by_role("heading", name="Check your email")).to_be_visible()
        return page.url, page.locator("main").inner_text()

    unknown = ask("nobody@example.com")
    known = ask("carol@example.com")
    assert unknown == known
    # Carol's arrives; nothing went to the unknown address, asked first.
    (message,) = mailbox.wait_for(1)
    assert message["To"] == "carol@example.com"
    assert [m["To"] for m in mailbox.messages] == ["carol@example.com"]

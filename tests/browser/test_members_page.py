"""A workspace's members page in a real Chromium: the owner lowers Bob while his conversation
page is open (it reloads as a viewer's, live), the last owner is refused, ownership is
transferred; the audit page shows what was done. An invitation emailed through a real SMTP
server is followed: signed in as the invited person, by signing up, as the wrong account, and
after it was revoked."""

import re

import pytest
from playwright.sync_api import expect

from conversations.models import Membership
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser

LINK = re.compile(r"http://127\.0\.0\.1:\d+/invitations/open/#k=\S+")


@pytest.fixture
def server(make_server, mailbox):
    """The browsing fixture's server, sending email to the test's SMTP server."""
    return make_server(PARLEY_EMAIL_URL=mailbox.url)


def _role(people, username) -> str | None:
    row = Membership.objects.filter(workspace=people.workspace, user__username=username).first()
    return row.role if row else None


def test_an_owner_lowers_bob_live_is_kept_as_last_owner_and_transfers(
    browsing, people, conversation
):
    bob = browsing.conversation("bob", conversation.pk)
    expect(bob.get_by_role("textbox", name=re.compile("Message the agent"))).to_be_visible()

    alice = browsing.open("alice")
    alice.get_by_role("link", name="Settings of The Team").click()
    alice.get_by_role("link", name="Members and invitations").click()
    expect(alice.get_by_role("heading", name="The Team: members")).to_be_visible()
    row = alice.locator('tr[data-member="bob"]')
    expect(row.locator(".member-role")).to_have_text("Member")

    alice.get_by_label("Role of bob", exact=True).select_option("viewer")
    alice.get_by_role("button", name="Change the role of bob").click()
    expect(alice.locator(".flash")).to_contain_text("bob is now viewer.")
    # Bob's open page hears it at once and reloads as a viewer's.
    expect(bob.locator(".viewer-note")).to_be_visible(timeout=60_000)
    expect(bob.get_by_role("textbox")).to_have_count(0)

    # The only owner stays one.
    alice.get_by_label("Role of alice", exact=True).select_option("member")
    alice.get_by_role("button", name="Change the role of alice").click()
    expect(alice.locator("#members-error")).to_contain_text("always keeps an owner")
    alice.get_by_role("button", name="Remove alice").click()
    expect(alice.locator("#members-error")).to_contain_text("only owner")
    assert _role(people, "alice") == "owner"
    screenshot(alice, "members-last-owner")

    alice.get_by_role("link", name="Audit log").click()
    expect(alice.locator('tr[data-action="role_changed"]')).to_contain_text("bob")

    alice.goto("/workspaces/team/members/")
    alice.get_by_role("button", name="Transfer ownership to carol").click()
    expect(alice.locator(".flash")).to_contain_text("carol now owns The Team; you are a member.")
    assert (_role(people, "alice"), _role(people, "carol")) == ("member", "owner")
    assert alice.goto("/workspaces/team/members/").status == 403


def _link(mailbox, count: int) -> str:
    message = mailbox.wait_for(count)[-1]
    return LINK.search(message.get_body(preferencelist=("plain",)).get_content()).group(0)


def _opened(page, link: str | None = None) -> None:
    """Open the invitation's page (from its link, if given) and press its button, which posts
    the signature the page's script took from the link's fragment."""
    if link:
        page.goto(link)
        expect(page).to_have_url(re.compile(r"/invitations/open/$"))  # the fragment is gone
    page.get_by_role("button", name="Open the invitation").click()


def _invite(page, email: str, role: str) -> None:
    page.get_by_label("Email").fill(email)
    page.get_by_label("Role", exact=True).select_option(role)
    page.get_by_role("button", name="Send the invitation").click()
    expect(page.locator(".flash")).to_contain_text(f"Invitation sent to {email}.")


def test_invitations_followed_from_the_email(browsing, people, mailbox, server):
    alice = browsing.open("alice", "/workspaces/team/members/")

    # A wrong account is told why; Dave, signed out, signs in from the page and comes back.
    _invite(alice, "dave@example.com", "viewer")
    link = _link(mailbox, 1)
    bob = browsing.open("bob")
    _opened(bob, link)
    expect(bob.locator("#wrong-account")).to_contain_text("This invitation is for dave@example.com")
    dave = browsing.signed_out(link, who="dave")
    screenshot(dave, "invitation-open")
    _opened(dave)
    expect(dave.locator("#invitation-what")).to_contain_text(
        "Alice invited dave@example.com to The Team as a viewer"
    )
    dave.get_by_role("button", name="Sign in", exact=True).click()
    dave.get_by_label("Username").fill("dave")
    dave.get_by_label("Password").fill("dave-pw")
    dave.get_by_role("button", name="Log in").click()
    expect(dave).to_have_url(re.compile(r"/invitations/open/$"))
    _opened(dave)  # the signature was kept while he signed in
    assert _role(people, "dave") is None  # opening it accepted nothing
    dave.get_by_role("button", name="Join The Team").click()
    expect(dave.locator(".flash")).to_contain_text("Welcome to The Team: you are a viewer.")
    assert _role(people, "dave") == "viewer"
    _opened(dave, link)
    expect(dave.locator("#invitation-message")).to_have_text("This invitation was already used.")

    # Erin has no account: she makes one on the invitation's page.
    _invite(alice, "erin@example.com", "member")
    erin = browsing.signed_out(_link(mailbox, 2), who="erin")
    _opened(erin)
    expect(erin.get_by_role("button", name="Sign in", exact=True)).to_be_visible()
    expect(erin.locator("#sign-in-sso")).to_have_count(0)  # no single sign-on set up
    erin.get_by_label("Username").fill("erin")
    erin.get_by_label("Your name").fill("Erin")
    erin.get_by_label("Password").fill("erin")
    erin.get_by_role("button", name="Create my account and join").click()
    expect(erin.locator("#invitation-error")).to_contain_text("password:")
    erin.get_by_label("Password").fill("a long and good passphrase")
    erin.get_by_role("button", name="Create my account and join").click()
    expect(erin.locator(".flash")).to_contain_text("Welcome to The Team: you are a member.")
    expect(erin.get_by_role("heading", name="The Team")).to_be_visible()
    assert _role(people, "erin") == "member"

    # Revoked before it is used: the link says so.
    alice.reload()
    _invite(alice, "frank@example.com", "member")
    frank_link = _link(mailbox, 3)
    alice.get_by_role("button", name="Revoke the invitation to frank@example.com").click()
    expect(alice.locator("#no-invitations")).to_be_visible()
    frank = browsing.signed_out(frank_link, who="frank")
    _opened(frank)
    expect(frank.locator("#invitation-message")).to_contain_text("withdrawn")
    screenshot(frank, "invitation-revoked")

    # A link cut before its fragment opens nothing.
    nobody = browsing.signed_out(f"{server.url}/invitations/open/")
    expect(nobody.get_by_text("This link is not whole")).to_be_visible()
    expect(nobody.get_by_role("button", name="Open the invitation")).to_be_disabled()

    # After the whole flow, no signature reached the server's log (its access log included).
    log = server.log_text()
    for each in (link, _link(mailbox, 2), frank_link):
        assert each.partition("#k=")[2] not in log
    assert "/invitations/open/" in log  # the access log is there, and saw the pages

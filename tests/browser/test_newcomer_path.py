"""README's "From an empty database to your team", followed as written, in a real Chromium: an
empty database; ``manage.py createsuperuser`` makes the first owner; the workspace is added in
the Django admin with them as its owner; Parley runs with single sign-on (panva's
oidc-provider on loopback, tests/oidc_provider.py) and email (a real SMTP server,
tests/smtp_server.py); the owner invites Dave from the Members page and starts a conversation
whose builtin agent asks a question; Dave, who has no account in Parley, opens the emailed link,
signs in with SSO, joins, opens the conversation and answers, and the turn goes on to its end."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from accounts.models import AuditEntry
from conversations.models import Membership, Workspace
from tests.browser.conftest import Browsing, screenshot
from tests.oidc_provider import OidcProvider

pytestmark = pytest.mark.browser

LINK = re.compile(r"http://127\.0\.0\.1:\d+/invitations/open/#k=\S+")
OWNER_PASSWORD = "a long owner passphrase"
# Dave at the identity provider: an address it vouches for, and no account in Parley yet.
PROVIDER_ACCOUNTS = {
    "dave": {
        "email": "dave@example.com",
        "email_verified": True,
        "given_name": "Dave",
        "family_name": "Davies",
        "preferred_username": "dave",
    }
}


@pytest.fixture
def provider(tmp_path):
    provider = OidcProvider(tmp_path, PROVIDER_ACCOUNTS)
    yield provider
    provider.close()


@pytest.fixture
def server(make_server, provider, mailbox):
    """Parley as the README starts it: the provider's settings and email (its public URL is
    the server's own, as `make run` sets it)."""
    live = make_server(**provider.settings(PARLEY_EMAIL_URL=mailbox.url))
    provider.start(f"{live.url}/oidc/callback/")
    return live


@pytest.fixture
def browsing(chromium, server):
    """Browsers against an empty database: no people fixture, nobody there yet."""
    browsing = Browsing(chromium, server, None)
    yield browsing
    browsing.close()
    assert browsing.problems == []


def test_from_an_empty_database_to_a_teammate_who_answers(browsing, server, mailbox, monkeypatch):
    User = get_user_model()
    assert not User.objects.exists() and not Workspace.objects.exists()

    # 1. The first owner: `python manage.py createsuperuser` (migrate is the test database's).
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", OWNER_PASSWORD)
    call_command(
        "createsuperuser", interactive=False, username="olivia", email="olivia@example.com"
    )

    # (2. Serving with the provider's and email's settings is the server fixture.)
    # 3. The workspace, in the admin: Workspaces, Add, its name, Olivia as its owner.
    olivia = browsing.signed_out("/admin/", who="olivia")
    olivia.get_by_label("Username").fill("olivia")
    olivia.get_by_label("Password").fill(OWNER_PASSWORD)
    olivia.get_by_role("button", name="Log in").click()
    olivia.get_by_role("link", name="Workspaces").click()
    olivia.get_by_role("link", name="Add workspace").click()
    olivia.get_by_label("Name").press_sequentially("Acme")  # typed, as a person does
    expect(olivia.get_by_label("Slug")).to_have_value("acme")  # filled in from the name
    inline = olivia.locator("#memberships-0")
    inline.locator(".select2-selection").click()
    olivia.locator(".select2-search__field").fill("olivia")
    olivia.get_by_role("option", name="olivia").click()
    inline.locator("select[name$='-role']").select_option("owner")
    olivia.get_by_role("button", name="Save", exact=True).click()
    expect(olivia.locator(".messagelist")).to_contain_text("was added successfully")
    workspace = Workspace.objects.get(slug="acme")
    assert Membership.objects.get(workspace=workspace).role == "owner"

    # 4. Home, then the Members page: invite Dave as a member; the email arrives.
    olivia.goto("/")  # signed in already, by the admin's login
    olivia.get_by_role("link", name="Members of Acme").click()
    expect(olivia.get_by_role("heading", name="Acme: members")).to_be_visible()
    olivia.get_by_label("Email").fill("dave@example.com")
    olivia.get_by_label("Role", exact=True).select_option("member")
    olivia.get_by_role("button", name="Send the invitation").click()
    expect(olivia.locator(".flash")).to_contain_text("Invitation sent to dave@example.com.")
    message = mailbox.wait_for(1)[0]
    assert message["To"] == "dave@example.com"
    link = LINK.search(message.get_body(preferencelist=("plain",)).get_content()).group(0)

    # 5. Home: the owner starts a conversation, and its builtin agent asks (find, no text).
    olivia.goto("/")
    olivia.get_by_label("New conversation").fill("Plans")
    olivia.get_by_role("button", name="Start a conversation").click()
    expect(olivia.get_by_role("heading", name="Plans")).to_be_visible()
    expect(olivia.locator("#connection")).to_have_attribute("data-state", "live")
    box = olivia.get_by_role("textbox", name=re.compile("Message the agent"))
    box.fill("find")
    box.press("Enter")
    question = olivia.locator(".question", has_text="What should I look for?")
    expect(question).to_have_attribute("data-status", "pending")
    conversation_url = olivia.url

    # 6. Dave, in a browser of his own, opens it, signs in with SSO and joins.
    assert not User.objects.filter(email__iexact="dave@example.com").exists()
    dave = browsing.signed_out(link, who="dave")
    # The provider's development pages import a web font; this machine has no Internet.
    dave.context.route(
        "https://fonts.googleapis.com/**", lambda route: route.fulfill(body="", status=200)
    )
    dave.get_by_role("button", name="Open the invitation").click()
    expect(dave.locator("#invitation-what")).to_contain_text(
        "invited dave@example.com to Acme as a member"
    )
    dave.get_by_role("link", name="Sign in with Test ID").click()
    dave.get_by_placeholder("Enter any login").fill("dave")
    dave.get_by_placeholder("and password").fill("whatever")
    dave.get_by_role("button", name="Sign-in").click()
    dave.get_by_role("button", name="Continue").click()
    expect(dave).to_have_url(re.compile(r"/invitations/open/$"))
    dave.get_by_role("button", name="Open the invitation").click()
    dave.get_by_role("button", name="Join Acme").click()
    expect(dave.locator(".flash")).to_contain_text("Welcome to Acme: you are a member.")
    screenshot(dave, "newcomer-joined")
    joined = Membership.objects.get(workspace=workspace, user__email="dave@example.com")
    assert (joined.role, joined.source) == ("member", "invitation")
    assert (
        AuditEntry.objects.get(action=AuditEntry.Action.SIGNED_IN, subject=joined.user).detail["by"]
        == "sso"
    )

    # 7. The question waits for him: he opens the conversation and answers it in the page.
    expect(dave.locator("#waiting-count")).to_have_text("1")
    dave.get_by_role("main").get_by_role("link", name="Plans").click()
    expect(dave).to_have_url(conversation_url)
    expect(dave.locator("#connection")).to_have_attribute("data-state", "live")
    answer = dave.get_by_role("textbox", name="Answer the agent's question")
    answer.fill("roadmap")
    answer.press("Enter")
    card = dave.locator(".question", has_text="What should I look for?")
    expect(card.locator(".question-outcome")).to_have_text("Answered by Dave Davies: “roadmap”")
    expect(dave.locator(".turn-end")).to_have_text("Completed")
    expect(dave.locator(".entry-agent").last).to_contain_text("Nothing contains “roadmap”.")
    screenshot(dave, "newcomer-answered")
    # The owner's page saw it too, live.
    olivia.goto(conversation_url)
    expect(olivia.locator(".turn-end")).to_have_text("Completed")

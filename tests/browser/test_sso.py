"""Single sign-on in a real Chromium against a real OpenID provider on loopback (panva's
oidc-provider, see tests/oidc_provider.py): the whole redirect flow, a person created or
matched by email, memberships from the roles claim followed live, and each way a sign-in is
refused (consent, a forged state, an unverified email); a provider that forgot its sessions,
and password sign-in turned off."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from accounts.models import AuditEntry
from conversations.models import Membership
from tests.browser.conftest import screenshot
from tests.oidc_provider import OidcProvider

pytestmark = pytest.mark.browser

Action = AuditEntry.Action
User = get_user_model()


def accounts(**changes) -> dict:
    people = {
        "ada": {
            "email": "ada@example.com",
            "email_verified": True,
            "given_name": "Ada",
            "family_name": "Lovelace",
            "preferred_username": "ada",
            "roles": ["team:member", "nowhere:owner"],
        },
        # Alice of the people fixture, her address in other case.
        "alice": {"email": "Alice@Example.com", "email_verified": True, "name": "Alice"},
        "eve": {"email": "eve@example.com", "email_verified": False},
    }
    for name, claims in changes.items():
        people[name] = {**people[name], **claims}
    return people


@pytest.fixture
def server_env() -> dict:
    return {}


@pytest.fixture
def provider(tmp_path):
    provider = OidcProvider(tmp_path, accounts())
    yield provider
    provider.close()


@pytest.fixture
def server(make_server, provider, server_env):
    # Parley starts before its provider: nothing is asked of the provider until a sign-in.
    live = make_server(
        **provider.settings(
            PARLEY_OIDC_SCOPES="openid email profile roles",
            PARLEY_OIDC_ROLES_CLAIM="roles",
            **server_env,
        )
    )
    provider.start(f"{live.url}/oidc/callback/")
    return live


def sign_in_at_provider(page, login: str, *, consent: bool = True) -> None:
    """The provider's development pages: any password, then consent."""
    page.get_by_placeholder("Enter any login").fill(login)
    page.get_by_placeholder("and password").fill("whatever")
    page.get_by_role("button", name="Sign-in").click()
    if consent:
        page.get_by_role("button", name="Continue").click()


def fresh_page(browsing, path: str = "/login/"):
    page = browsing.signed_out(path)
    # The provider's development pages import a web font; this machine has no Internet.
    page.context.route(
        "https://fonts.googleapis.com/**", lambda route: route.fulfill(body="", status=200)
    )
    return page


def session_socket(server, page, conversation_id):
    cookie = next(c for c in page.context.cookies() if c["name"] == "sessionid")
    return connect(
        server.ws_url(conversation_id),
        additional_headers={"Cookie": f"sessionid={cookie['value']}", "Origin": server.url},
        open_timeout=10,
    )


def closed_with(ws, timeout: float = 15) -> int:
    try:
        while True:
            ws.recv(timeout=timeout)
    except ConnectionClosed as closed:
        return closed.rcvd.code
    except TimeoutError:
        return 0


def test_a_new_person_signs_in_lands_on_next_and_follows_the_roles_claim_live(
    browsing, server, provider, conversation
):
    page = fresh_page(browsing, f"/conversations/{conversation.id}/")
    expect(page).to_have_url(re.compile(r"/login/\?next="))
    page.get_by_role("link", name="Sign in with Test ID").click()
    sign_in_at_provider(page, "ada")
    expect(page).to_have_url(f"{server.url}/conversations/{conversation.id}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    screenshot(page, "sso-signed-in")

    ada = User.objects.get(email="ada@example.com")
    assert (ada.username, ada.first_name, ada.last_name) == ("ada", "Ada", "Lovelace")
    membership = Membership.objects.get(user=ada)
    assert (membership.workspace.slug, membership.role, membership.source) == (
        "team",
        "member",
        "sso",
    )
    entries = AuditEntry.objects.filter(subject=ada)
    assert entries.get(action=Action.SIGNED_IN).detail["by"] == "sso"
    assert entries.get(action=Action.MEMBER_ADDED).detail == {"role": "member", "source": "sso"}

    # Lowered at the provider: at the next sign-in her open socket is closed as lowered. (The
    # page leaves the conversation first: its own socket would reload it meanwhile.)
    page.goto("/")
    with session_socket(server, page, conversation.id) as ws:
        ws.recv(timeout=10)
        provider.set_accounts(accounts(ada={"roles": ["team:viewer"]}))
        page.goto("/oidc/authenticate/?next=/")  # the provider remembers her: straight back
        expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
        assert closed_with(ws) == 4409
    assert Membership.objects.get(user=ada).role == "viewer"

    # Removed there: removed here, and her socket closed as no longer a member.
    with session_socket(server, page, conversation.id) as ws:
        ws.recv(timeout=10)
        provider.set_accounts(accounts(ada={"roles": []}))
        page.goto("/oidc/authenticate/?next=/")
        expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
        assert closed_with(ws) == 4403
    assert not Membership.objects.filter(user=ada).exists()
    assert entries.filter(action=Action.MEMBER_REMOVED).count() == 1
    assert User.objects.filter(email__iexact="ada@example.com").count() == 1


def test_an_existing_person_is_matched_by_email_and_keeps_memberships_from_elsewhere(
    browsing, server, people
):
    page = fresh_page(browsing)
    page.get_by_role("link", name="Sign in with Test ID").click()
    sign_in_at_provider(page, "alice")
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    expect(page.get_by_text("The Team")).to_be_visible()
    assert User.objects.filter(email__iexact="alice@example.com").count() == 1
    # Given by an admin and not named by the claim: left alone.
    assert Membership.objects.get(user=people.alice.user).role == "owner"


def test_refused_consent_a_forged_state_and_an_unverified_email_come_back_saying_why(
    browsing, server, provider, people
):
    page = fresh_page(browsing)
    page.get_by_role("link", name="Sign in with Test ID").click()
    page.get_by_role("link", name="[ Cancel ]").click()
    expect(page.get_by_role("status")).to_have_text(
        "You did not allow Parley to sign you in with Test ID."
    )
    expect(page).to_have_url(f"{server.url}/login/")

    # A callback whose state was tampered with (one character off the one this browser sent).
    with page.expect_request(re.compile(r"/auth\?.*state=")) as sent:
        page.get_by_role("link", name="Sign in with Test ID").click()
    state = re.search(r"state=([^&]+)", sent.value.url).group(1)
    forged = ("A" if state[0] != "A" else "B") + state[1:]
    page.goto(f"/oidc/callback/?code=anything&state={forged}")
    expect(page.get_by_role("status")).to_contain_text("That sign-in could not be checked")
    assert not User.objects.filter(email="ada@example.com").exists()

    second = fresh_page(browsing)
    second.get_by_role("link", name="Sign in with Test ID").click()
    sign_in_at_provider(second, "eve")
    expect(second.get_by_role("status")).to_contain_text(
        "Your email address at Test ID is not verified"
    )
    assert not User.objects.filter(email="eve@example.com").exists()
    reasons = sorted(
        e.detail["reason"] for e in AuditEntry.objects.filter(action=Action.SIGN_IN_FAILED)
    )
    assert reasons == ["consent_refused", "email_unverified", "state_mismatch"]


def test_a_provider_that_forgot_its_session_asks_again_and_signs_in(browsing, server, provider):
    page = fresh_page(browsing)
    page.get_by_role("link", name="Sign in with Test ID").click()
    sign_in_at_provider(page, "ada")
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    page.get_by_role("button", name="Log out").click()

    provider.restart()
    page.get_by_role("link", name="Sign in with Test ID").click()
    sign_in_at_provider(page, "ada")  # asked again: the old session is gone
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    assert AuditEntry.objects.filter(action=Action.SIGNED_IN, detail__by="sso").count() == 2


@pytest.mark.parametrize("server_env", [{"PARLEY_PASSWORD_LOGIN": "0"}])
def test_with_password_sign_in_off_only_sso_signs_in_the_admin_too(browsing, server, people):
    alice = people.alice.user
    alice.is_staff = alice.is_superuser = True
    alice.save()
    page = fresh_page(browsing, "/admin/")
    expect(page).to_have_url(re.compile(r"/login/\?next=%2Fadmin%2F$"))
    expect(page.get_by_label("Password")).to_have_count(0)
    page.get_by_role("link", name="Sign in with Test ID").click()
    sign_in_at_provider(page, "alice")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()

    # A password is refused unchecked, on either form, the right one too.
    client = server.client(follow_redirects=False)
    secret = "a" * 32
    client.cookies.set("csrftoken", secret)
    for path in ("/login/", "/admin/login/"):
        response = client.post(
            path,
            data={"username": "bob", "password": "bob-pw", "csrfmiddlewaretoken": secret},
        )
        assert response.status_code == 403, path
        assert "Password sign-in is turned off here" in response.text
        assert "sessionid" not in response.cookies

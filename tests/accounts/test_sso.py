"""Single sign-on without a browser: discovery against a real provider (kept, and refused when
it is unreachable, missing or names another issuer), a provider that is down met with the login
page saying so, the roles claim's mapping onto memberships, and the password switch."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import authenticate
from django.test import RequestFactory, override_settings

from accounts import sso, sso_roles
from accounts.models import AuditEntry
from conversations.models import Membership
from tests.oidc_provider import OidcProvider

Action = AuditEntry.Action


@pytest.fixture
def provider(tmp_path):
    provider = OidcProvider(tmp_path, {})
    provider.start("http://127.0.0.1:9/oidc/callback/")
    yield provider
    provider.close()
    sso.forget_discovery()


def test_discovery_is_fetched_when_first_needed_and_kept(provider):
    with override_settings(**provider.settings()):
        sso.forget_discovery()
        document = sso.discovery()
        assert document["token_endpoint"] == f"{provider.issuer}/token"
        provider.stop()
        assert sso.discovery() is document  # kept: not asked again


def test_discovery_refuses_another_issuer_a_missing_document_and_no_provider(tmp_path):
    named_otherwise = OidcProvider(tmp_path, {}, host="localhost")
    named_otherwise.start("http://127.0.0.1:9/oidc/callback/")
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    closed_port = free.getsockname()[1]
    free.close()
    try:
        for issuer, says in (
            (f"http://127.0.0.1:{named_otherwise.port}", "names the issuer"),
            (f"http://127.0.0.1:{named_otherwise.port}/nope", "HTTPError"),
            (f"http://127.0.0.1:{closed_port}", "ConnectionError"),
        ):
            with override_settings(PARLEY_OIDC_ISSUER=issuer):
                sso.forget_discovery()
                with pytest.raises(sso.ProviderUnavailable, match=says):
                    sso.discovery()
    finally:
        named_otherwise.close()
        sso.forget_discovery()


def test_a_provider_that_is_down_is_said_so_on_the_login_page(make_server, tmp_path):
    provider = OidcProvider(tmp_path, {})  # its socket bound, nothing answering
    try:
        server = make_server(**provider.settings())
        with server.client(follow_redirects=True) as client:
            page = client.get("/login/")
            assert "Sign in with Test ID" in page.text
            response = client.get("/oidc/authenticate/?next=/waiting/")
            assert response.status_code == 200
            assert str(response.url).endswith("/login/?next=%2Fwaiting%2F")
            assert "Test ID could not be reached" in response.text
    finally:
        provider.close()


def test_without_a_provider_there_is_no_sso(server):
    with server.client() as client:
        assert "Sign in with" not in client.get("/login/").text
        assert client.get("/oidc/authenticate/").status_code == 404
        assert client.get("/oidc/callback/?code=a&state=b").status_code == 404


def test_the_roles_claim_is_read_as_slugs_and_roles():
    assert sso_roles.parse(["team:member", "team:owner", "x:admin", "bad", 3, "a:b:viewer"]) == {
        "team": "owner",
        "a:b": "viewer",
    }
    assert sso_roles.parse("team:viewer") == {"team": "viewer"}
    assert sso_roles.parse(None) == {}


def test_memberships_follow_the_claim_and_leave_others_alone(people):
    carol, alice = people.carol.user, people.alice.user
    # Carol's viewer membership came from an invitation; the claim names it: it becomes SSO's.
    Membership.objects.filter(user=carol).update(source=Membership.Source.INVITATION)
    sso_roles.memberships_sync(
        user=carol, claimed={"team": "member", "other": "viewer", "nowhere": "owner"}
    )
    held = {m.workspace.slug: (m.role, m.source) for m in Membership.objects.filter(user=carol)}
    assert held == {"team": ("member", "sso"), "other": ("viewer", "sso")}

    sso_roles.memberships_sync(user=carol, claimed={"team": "viewer"})
    held = {m.workspace.slug: (m.role, m.source) for m in Membership.objects.filter(user=carol)}
    assert held == {"team": ("viewer", "sso")}

    # Alice's membership was given by an admin: a claim that names nothing leaves it.
    sso_roles.memberships_sync(user=alice, claimed={})
    assert Membership.objects.get(user=alice).role == "owner"

    entries = AuditEntry.objects.filter(subject=carol).order_by("id")
    assert [(e.action, e.workspace_slug, e.detail) for e in entries] == [
        (Action.MEMBER_ADDED, "other", {"role": "viewer", "source": "sso"}),
        (
            Action.ROLE_CHANGED,
            "team",
            {"role": "member", "previous_role": "viewer", "source": "sso"},
        ),
        (Action.MEMBER_REMOVED, "other", {"role": "viewer", "source": "sso"}),
        (
            Action.ROLE_CHANGED,
            "team",
            {"role": "viewer", "previous_role": "member", "source": "sso"},
        ),
    ]


def test_with_password_sign_in_off_no_password_signs_in(people):
    backends = [
        "axes.backends.AxesStandaloneBackend",
        "accounts.sso.PasswordLoginSwitch",
        "django.contrib.auth.backends.ModelBackend",
    ]
    with override_settings(AUTHENTICATION_BACKENDS=backends, PARLEY_PASSWORD_LOGIN=False):
        assert (
            authenticate(RequestFactory().post("/login/"), username="bob", password="bob-pw")
            is None
        )
    with override_settings(AUTHENTICATION_BACKENDS=backends, PARLEY_PASSWORD_LOGIN=True):
        assert (
            authenticate(RequestFactory().post("/login/"), username="bob", password="bob-pw")
            == people.bob.user
        )


def test_the_claim_never_leaves_a_workspace_without_an_owner(people, caplog):
    alice, bob = people.alice.user, people.bob.user
    sso_roles.memberships_sync(user=alice, claimed={"team": "owner"})
    assert Membership.objects.get(user=alice).source == "sso"

    # The only owner's next sign-in says viewer, then names nothing: she stays the owner.
    with caplog.at_level("WARNING", logger="accounts.sso_roles"):
        sso_roles.memberships_sync(user=alice, claimed={"team": "viewer"})
        sso_roles.memberships_sync(user=alice, claimed={})
    assert Membership.objects.get(user=alice).role == "owner"
    assert "without an owner" in caplog.text
    kept = AuditEntry.objects.filter(subject=alice, detail__kept="last_owner").order_by("id")
    assert [(e.action, e.detail["claimed_role"]) for e in kept] == [
        (Action.ROLE_CHANGED, "viewer"),
        (Action.MEMBER_REMOVED, "none"),
    ]
    assert all("last owner" in e.detail["reason"] for e in kept)

    # With another owner, the claim's word goes.
    Membership.objects.filter(user=bob).update(role="owner")
    sso_roles.memberships_sync(user=alice, claimed={"team": "viewer"})
    assert Membership.objects.get(user=alice).role == "viewer"
    Membership.objects.filter(user=bob).update(role="member")
    sso_roles.memberships_sync(user=alice, claimed={"team": "owner"})
    Membership.objects.filter(user=bob).update(role="owner")
    sso_roles.memberships_sync(user=alice, claimed={})
    assert not Membership.objects.filter(user=alice).exists()


class _Provider(BaseHTTPRequestHandler):
    """A provider whose discovery document is whole and whose userinfo is about someone else."""

    def do_GET(self):
        issuer = f"http://127.0.0.1:{self.server.server_port}"
        if self.path == "/.well-known/openid-configuration":
            body = {"issuer": issuer}
            body.update({key: f"{issuer}/{key}" for key in sso.ENDPOINTS.values()})
        else:
            body = {"sub": "someone-else", "email": "mallory@example.com"}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_a_userinfo_about_someone_else_is_refused_with_a_reason(db):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with override_settings(PARLEY_OIDC_ISSUER=f"http://127.0.0.1:{httpd.server_port}"):
            sso.forget_discovery()
            backend = sso.ParleyOIDCBackend()
            backend.request = RequestFactory().get("/oidc/callback/")
            with pytest.raises(sso.SsoRefused) as refused:
                backend.get_or_create_user("access", "id", {"sub": "alice-at-the-provider"})
        assert refused.value.reason == "userinfo_mismatch"
        assert "someone else" in refused.value.message
    finally:
        httpd.shutdown()
        httpd.server_close()
        sso.forget_discovery()

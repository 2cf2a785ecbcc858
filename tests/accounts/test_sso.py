"""Single sign-on without a browser: discovery against a real provider (kept, and refused when
it is unreachable, missing or names another issuer), a provider that is down met with the login
page saying so, the roles claim's mapping onto memberships, and the password switch."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import authenticate, get_user_model
from django.core.exceptions import SuspiciousOperation
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


ISSUER, CLIENT_ID = "https://id.example.test", "parley"


def _id_token(key, **claims) -> str:
    payload = {
        "iss": ISSUER,
        "aud": CLIENT_ID,
        "sub": "ada-at-the-provider",
        "iat": int(time.time()),
        "exp": int(time.time()) + 300,
        **claims,
    }
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": "k1"})


def test_the_id_token_must_be_rs256_for_this_client_from_this_issuer():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    public = jwt.PyJWK({**jwk, "kid": "k1"})  # as the library passes it, from the JWKS
    backend = sso.ParleyOIDCBackend()
    with override_settings(PARLEY_OIDC_ISSUER=ISSUER, PARLEY_OIDC_CLIENT_ID=CLIENT_ID):
        assert backend._verify_jws(_id_token(private), public)["sub"] == "ada-at-the-provider"
        secret = "the-client-secret-of-32-bytes-or-more"
        hs256 = jwt.encode(
            {"iss": ISSUER, "aud": CLIENT_ID, "sub": "x", "exp": int(time.time()) + 300},
            secret,
            algorithm="HS256",
        )
        for token, key in (
            (_id_token(private, aud="another-client"), public),
            (_id_token(private, iss="https://id.elsewhere.test"), public),
            (hs256, public),
            (hs256, secret),
        ):
            with pytest.raises(SuspiciousOperation):
                backend._verify_jws(token, key)


def _signed_in_with(claims: dict):
    backend = sso.ParleyOIDCBackend()
    backend.request = RequestFactory().get("/oidc/callback/")
    backend.get_userinfo = lambda access_token, id_token, payload: payload
    return backend.get_or_create_user("access", "id", claims)


def test_an_address_two_accounts_share_is_refused(db):
    User = get_user_model()
    User.objects.create_user("one", email="a@x.org")
    User.objects.create_user("two", email="A@x.org")
    with pytest.raises(sso.SsoRefused) as refused:
        _signed_in_with({"sub": "s", "email": "a@x.org", "email_verified": True})
    assert refused.value.reason == "email_ambiguous"
    assert User.objects.count() == 2


def test_a_new_person_gets_a_unique_username_and_a_name_from_name_alone(people):
    user = _signed_in_with(
        {
            "sub": "s",
            "email": "ada@example.org",
            "email_verified": True,
            "preferred_username": "BOB",
            "name": "Ada Lovelace",
        }
    )
    assert user.pk != people.bob.user.pk and user.email == "ada@example.org"
    assert user.username == "BOB-2"
    assert (user.first_name, user.last_name) == ("Ada Lovelace", "")


def test_with_password_sign_in_off_an_api_token_still_works(make_server, people):
    live = make_server(
        PARLEY_PASSWORD_LOGIN="0",
        PARLEY_OIDC_ISSUER="http://127.0.0.1:9",
        PARLEY_OIDC_CLIENT_ID="parley",
        PARLEY_OIDC_CLIENT_SECRET="secret",
    )
    with live.client(people.bob) as bob:
        response = bob.get("/api/workspaces/")
    assert response.status_code == 200, response.text
    assert [w["slug"] for w in response.json()] == ["team"]
    with live.client() as browser:  # the switch is on in that server: no password form
        assert 'name="password"' not in browser.get("/login/").text


def _django_setup(env: dict) -> subprocess.CompletedProcess:
    """Django started with ``env``, as a process starting Parley would."""
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_password_sign_in_off_without_an_issuer_does_not_start():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PARLEY_PASSWORD_LOGIN": "0"}
    env.pop("PARLEY_OIDC_ISSUER", None)
    env.update(PARLEY_OIDC_CLIENT_ID="parley", PARLEY_OIDC_CLIENT_SECRET="secret")
    started = _django_setup(env)
    assert started.returncode != 0
    assert "PARLEY_OIDC_ISSUER" in started.stderr and "PARLEY_PASSWORD_LOGIN" in started.stderr
    # The same with an issuer starts: it is the missing issuer that stopped it.
    env["PARLEY_OIDC_ISSUER"] = "http://127.0.0.1:9"
    started = _django_setup(env)
    assert started.returncode == 0, started.stderr

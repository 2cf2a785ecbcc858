"""PARLEY_HTTPS=1, behind a proxy that ends TLS: Django's deploy check finds nothing to say (and
without it, says what is missing); through the proxy (X-Forwarded-Proto: https) cookies are
Secure and HSTS is sent, plain http is redirected but for the operator's endpoints, and the
address the login locks count is the one the proxy saw."""

import asyncio
import os
import re
import secrets
import subprocess
import sys

import httpx
import websockets
from axes.models import AccessAttempt
from django.test.utils import override_settings

from core.checks import check_middleware_by_class
from tests.conftest import ROOT, receive_json

HTTPS = {"X-Forwarded-Proto": "https"}


def deploy_check(tmp_path, **env) -> subprocess.CompletedProcess:
    """``manage.py check --deploy --fail-level WARNING`` with Parley's own settings, as an
    operator runs it, with a strong secret key."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PARLEY_VAR_DIR": str(tmp_path),
        "SECRET_KEY": secrets.token_urlsafe(50),
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_deploy_check_reports_nothing_under_parley_https(tmp_path):
    result = deploy_check(tmp_path, PARLEY_HTTPS="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_parley_https_the_deploy_check_names_what_is_missing(tmp_path):
    """Django's checks of HSTS, the redirect and the secure cookies do run (they would not,
    with Parley's subclasses of its middleware, without core.checks)."""
    result = deploy_check(tmp_path)
    assert result.returncode == 1
    found = set(re.findall(r"\((security\.\w+)\)", result.stderr))
    assert found == {"security.W004", "security.W008", "security.W010", "security.W016"}, (
        result.stderr
    )


def test_a_middleware_missing_altogether_is_named_once(settings):
    """(The test settings are plain http's: HSTS, the redirect and the CSRF cookie are named.)"""
    without = [m for m in settings.MIDDLEWARE if not m.endswith("XFrameOptionsMiddleware")]
    with override_settings(MIDDLEWARE=without):
        messages = check_middleware_by_class(None)
    assert [m.id for m in messages] == [
        "security.W004",
        "security.W008",
        "core.W001",
        "security.W016",
    ]
    assert "django.middleware.clickjacking.XFrameOptionsMiddleware" in messages[2].msg
    # Django's own middleware where a subclass was: Django checks it, nothing said twice.
    django_path = "django.middleware.security.SecurityMiddleware"
    with override_settings(MIDDLEWARE=[django_path, *settings.MIDDLEWARE[1:]]):
        assert [m.id for m in check_middleware_by_class(None)] == ["security.W016"]


def test_through_the_proxy_cookies_are_secure_hsts_is_sent_and_http_redirected(make_server, people):
    server = make_server(PARLEY_HTTPS="1")
    origin = f"https://127.0.0.1:{server.port}"
    with httpx.Client(base_url=server.url, timeout=20) as client:
        page = client.get("/login/", headers=HTTPS)
        assert page.status_code == 200
        assert page.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
        assert re.search(r"csrftoken=\w+;.*; Secure", page.headers["Set-Cookie"])
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        signed_in = client.post(
            "/login/",
            data={"username": "alice", "password": "alice-pw", "csrfmiddlewaretoken": token},
            headers={
                **HTTPS,
                "Origin": origin,
                "Referer": f"{origin}/login/",
                "Cookie": f"csrftoken={page.cookies['csrftoken']}",
            },
        )
        assert signed_in.status_code == 302, signed_in.text
        session = signed_in.headers["Set-Cookie"]
        assert re.search(r"sessionid=\w+;.*HttpOnly;.*Secure", session), session
        home = client.get(
            "/", headers={**HTTPS, "Cookie": f"sessionid={signed_in.cookies['sessionid']}"}
        )
        assert home.status_code == 200 and "Your workspaces" in home.text
        # Plain http (not through the proxy) is sent to https...
        plain = client.get("/login/?next=/")
        assert plain.status_code == 301
        assert plain.headers["Location"] == f"{origin}/login/?next=/"
        assert "Strict-Transport-Security" not in plain.headers
        # ...but the balancer and Prometheus reach each process directly.
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").json()["status"] == "ready"
        assert client.get("/metrics").status_code == 200
        # The login locks count the address the proxy saw: the last in X-Forwarded-For.
        wrong = client.get(
            "/api/workspaces/",
            headers={
                **HTTPS,
                "Authorization": "Token nope",
                "X-Forwarded-For": "198.51.100.1, 203.0.113.9",
            },
        )
        assert wrong.status_code == 401
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["203.0.113.9"]


def test_a_browsers_socket_through_the_proxy_is_https_origin_checked(
    make_server, people, conversation
):
    server = make_server(PARLEY_HTTPS="1")
    origin = f"https://127.0.0.1:{server.port}"

    async def handshake(headers: dict) -> str:
        try:
            async with websockets.connect(
                server.ws_url(conversation.pk), additional_headers=headers, open_timeout=10
            ) as ws:
                return (await receive_json(ws))["type"]
        except websockets.InvalidStatus as refused:
            return str(refused.response.status_code)

    page_socket = {**people.alice.headers, "Origin": origin}
    assert asyncio.run(handshake({**page_socket, **HTTPS})) == "ws.ready"
    # Not through the proxy: an https page's socket arriving over plain ws is another origin.
    assert asyncio.run(handshake(page_socket)) == "403"

"""A browser's sockets last as long as its session does: signing out, changing the password
(elsewhere) or resetting it closes the sockets opened with the sessions it ends, with 4401, at
once, through a real Daphne and real sockets; sockets of sessions it leaves alone go on."""

import asyncio
import re

import httpx
import websockets
from django.contrib.auth.tokens import default_token_generator
from django.db import connection
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from tests.conftest import log_in, receive_json, wait_until
from tests.helpers import (
    CEILING,
    closed_with,
    parked_conversation,
    post_form,
    ready,
    sse_events,
)


def _browser(server, username: str):
    try:
        return log_in(server, username)
    finally:
        connection.close()


def _cookie_headers(server, browser) -> dict:
    return {"Cookie": f"sessionid={browser.cookies['sessionid']}", "Origin": server.url}


def _socket(server, cid, browser):
    return websockets.connect(
        server.ws_url(cid), additional_headers=_cookie_headers(server, browser), open_timeout=10
    )


def _me(server, browser):
    return websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/me/",
        additional_headers=_cookie_headers(server, browser),
        open_timeout=10,
    )


async def _still_open(ws) -> None:
    """The socket still answers (a frame it does not read gets a ws.error back)."""
    await ws.send('{"type": "nonsense"}')
    frame = await receive_json(ws, timeout=CEILING)
    while frame["type"] != "ws.error":
        frame = await receive_json(ws, timeout=CEILING)


def _change_password(server, browser) -> int:
    response = post_form(
        browser,
        "/settings/account/password/",
        {
            "old_password": "bob-pw",
            "new_password1": "a new Pass phrase 42",
            "new_password2": "a new Pass phrase 42",
        },
    )
    return response.status_code


async def test_a_password_change_closes_the_other_sessions_sockets(server, people):
    cid, _ = await asyncio.to_thread(parked_conversation, server, people)
    here = await asyncio.to_thread(_browser, server, "bob")
    there = await asyncio.to_thread(_browser, server, "bob")  # a stolen cookie, say
    async with (
        _socket(server, cid, there) as theirs,
        _me(server, there) as their_me,
        _socket(server, cid, here) as mine,
    ):
        await ready(theirs)
        await ready(mine)
        assert (await receive_json(their_me, timeout=CEILING))["type"] == "waiting"
        assert await asyncio.to_thread(_change_password, server, here) == 302

        assert await closed_with(theirs) == 4401
        assert await closed_with(their_me) == 4401
        # The changing browser's own socket was opened with the session key the change retired
        # (Django cycles it, so that a thief of that cookie is signed out too): it closes as
        # well, and a socket opened with the browser's new cookie works.
        assert await closed_with(mine) == 4401
    async with _socket(server, cid, here) as again:
        await ready(again)
        await _still_open(again)
    refused = await asyncio.to_thread(there.get, "/settings/account/")
    assert refused.status_code == 302 and refused.headers["Location"].startswith("/login/")


async def test_signing_out_closes_that_session_s_sockets_only(server, people):
    cid, _ = await asyncio.to_thread(parked_conversation, server, people)
    leaving = await asyncio.to_thread(_browser, server, "bob")
    staying = await asyncio.to_thread(_browser, server, "bob")
    async with (
        _socket(server, cid, leaving) as gone,
        _me(server, leaving) as gone_me,
        _socket(server, cid, staying) as kept,
    ):
        await ready(gone)
        await ready(kept)
        assert (await receive_json(gone_me, timeout=CEILING))["type"] == "waiting"
        out = await asyncio.to_thread(_sign_out, server, leaving)
        assert out.status_code == 302

        assert await closed_with(gone) == 4401
        assert await closed_with(gone_me) == 4401
        await _still_open(kept)


def _sign_out(server, browser):
    """The sign-out button's POST (with the CSRF token of the page it is on)."""
    page = browser.get("/settings/account/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return browser.post(
        "/logout/",
        data={"csrfmiddlewaretoken": token},
        headers={"Referer": f"{server.url}/settings/account/"},
    )


def _reset_password(server, people) -> int:
    try:
        user = people.bob.user
        user.refresh_from_db()
        uid = urlsafe_base64_encode(force_bytes(user.pk))
        token = default_token_generator.make_token(user)
    finally:
        connection.close()
    anyone = server.client(follow_redirects=True)
    with anyone:
        response = post_form(anyone, "/reset/", {"u": uid, "k": token})
        assert response.status_code == 200, response.text
        done = post_form(
            anyone,
            str(response.url.path),
            {"new_password1": "a reset Pass phrase 7", "new_password2": "a reset Pass phrase 7"},
        )
        assert str(done.url.path) == "/reset/done/", done.text
        return done.status_code


async def test_a_password_reset_closes_every_session_s_sockets(server, people, settings):
    cid, _ = await asyncio.to_thread(parked_conversation, server, people)
    one = await asyncio.to_thread(_browser, server, "bob")
    two = await asyncio.to_thread(_browser, server, "bob")
    async with _socket(server, cid, one) as first, _me(server, two) as second:
        await ready(first)
        assert (await receive_json(second, timeout=CEILING))["type"] == "waiting"
        assert await asyncio.to_thread(_reset_password, server, people) == 200

        assert await closed_with(first) == 4401
        assert await closed_with(second) == 4401


async def _session_tail(server, cid, browser, into: list[str]) -> None:
    """A tail read as a browser reads it: with its session cookie (no token)."""
    headers = {"Cookie": f"sessionid={browser.cookies['sessionid']}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers) as client:
        path = f"/api/conversations/{cid}/tail/"
        async with client.stream("GET", path, timeout=CEILING) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                into.append(line)


async def test_signing_out_ends_that_session_s_tails_only(server, people):
    cid, _ = await asyncio.to_thread(parked_conversation, server, people)
    leaving = await asyncio.to_thread(_browser, server, "bob")
    staying = await asyncio.to_thread(_browser, server, "bob")
    gone_lines, kept_lines = [], []
    gone = asyncio.create_task(_session_tail(server, cid, leaving, gone_lines))
    kept = asyncio.create_task(_session_tail(server, cid, staying, kept_lines))
    try:
        for lines in (gone_lines, kept_lines):
            await asyncio.to_thread(wait_until, lambda ls=lines: ": connected" in ls, CEILING)
        out = await asyncio.to_thread(_sign_out, server, leaving)
        assert out.status_code == 302

        async with asyncio.timeout(CEILING):
            await gone
        *_, (name, data) = sse_events(gone_lines)
        assert name == "error" and data["error"]["code"] == "signed_out", gone_lines[-3:]
        assert not kept.done()
    finally:
        kept.cancel()

"""Login throttling against a real Daphne: wrong passwords on the login forms (the site's and the
admin's) and wrong API tokens (REST, the socket's handshake, MCP) lock an account from an
address, or an address; the lock refuses even the right password or a valid token, says why and
for how long, ends after its cool-off, is forgotten on a sign-in that succeeds, and an admin
lifts it in the admin. The address is the connection's own: these tests connect from 127.0.0.1
and from 127.0.0.2 (Linux routes all of 127/8 to loopback)."""

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import websockets
from axes.models import AccessAttempt, AccessLog

from tests.conftest import receive_json, wait_until
from tests.helpers import admin_of, post_form, shown
from tests.mcp_client import ACCEPT, INITIALIZE

ELSEWHERE = "127.0.0.2"
ACCOUNT_LOCKED = "Too many failed sign-ins to this account from your address: try again in"
ADDRESS_LOCKED = "Too many failed sign-ins from your address: try again in"


def browser(server, address: str | None = None) -> httpx.Client:
    """A client as a browser is one: cookies kept, redirects not followed; from ``address``."""
    transport = httpx.HTTPTransport(local_address=address) if address else None
    return httpx.Client(base_url=server.url, timeout=20, transport=transport)


def sign_in(client, username: str, password: str, path: str = "/login/") -> httpx.Response:
    return post_form(client, path, {"username": username, "password": password})


def assert_locked_page(response, message: str) -> None:
    assert response.status_code == 429, response.text
    assert 0 < int(response.headers["Retry-After"]) <= 15 * 60
    page = shown(response)
    assert '<h1 id="locked-heading">Signing in is paused</h1>' in page
    assert message in page
    assert "sessionid" not in response.cookies


def test_wrong_passwords_lock_the_login_form_and_then_the_right_one_is_refused(server, people):
    with browser(server) as client:
        for _ in range(4):
            refused = sign_in(client, "alice", "guess")
            assert refused.status_code == 200
            assert "Your username and password didn't match" in shown(refused)
        # The fifth failure sets the lock, and says so.
        assert_locked_page(sign_in(client, "alice", "guess"), ACCOUNT_LOCKED)
        locked = sign_in(client, "alice", "alice-pw")
        assert_locked_page(locked, ACCOUNT_LOCKED)
        assert re.search(r"try again in 1[45] minutes", shown(locked))
        # Not signed in: the home page still sends this client to log in.
        assert client.get("/").status_code == 302
    # The lock is on alice from this address: bob signs in here, alice from elsewhere.
    with browser(server) as client:
        assert sign_in(client, "bob", "bob-pw").status_code == 302
    with browser(server, ELSEWHERE) as client:
        assert sign_in(client, "alice", "alice-pw").status_code == 302
    (attempt,) = AccessAttempt.objects.all()
    assert (attempt.username, attempt.ip_address, attempt.failures_since_start) == (
        "alice",
        "127.0.0.1",
        5,
    )
    # The sign-in refused while locked was not counted: five, as the fifth failure left it. And
    # no password is kept.
    assert "alice-pw" not in attempt.post_data and "guess" not in attempt.post_data


def test_the_admin_login_is_locked_the_same_way_at_the_configured_limit(make_server, people):
    server = make_server(PARLEY_LOGIN_FAILURE_LIMIT="3")
    people.alice.user.is_staff = people.alice.user.is_superuser = True
    people.alice.user.save()
    with browser(server) as client:
        for _ in range(2):
            assert sign_in(client, "alice", "guess", "/admin/login/").status_code == 200
        assert_locked_page(sign_in(client, "alice", "guess", "/admin/login/"), ACCOUNT_LOCKED)
        assert_locked_page(sign_in(client, "alice", "alice-pw", "/admin/login/"), ACCOUNT_LOCKED)
        # One count for both forms: the site's login is locked for alice too.
        assert_locked_page(sign_in(client, "alice", "alice-pw"), ACCOUNT_LOCKED)
        assert client.get("/admin/").status_code == 302


def test_a_sign_in_that_succeeds_forgets_its_own_failures_only(server, people):
    with browser(server) as client:
        for _ in range(4):
            assert sign_in(client, "alice", "guess").status_code == 200
        assert sign_in(client, "bob", "guess").status_code == 200
        assert sign_in(client, "alice", "alice-pw").status_code == 302
    assert list(AccessAttempt.objects.values_list("username", flat=True)) == ["bob"]
    assert AccessLog.objects.filter(username="alice", ip_address="127.0.0.1").count() == 1
    with browser(server) as client:
        for _ in range(4):
            assert sign_in(client, "alice", "guess").status_code == 200
        assert_locked_page(sign_in(client, "alice", "guess"), ACCOUNT_LOCKED)


def test_failures_across_accounts_lock_the_address(make_server, people):
    server = make_server(PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT="6")
    with browser(server) as client:
        for name in ("alice", "bob", "dave", "alice", "bob"):
            assert sign_in(client, name, "guess").status_code == 200
        # Sixth failure from the address, none of its accounts at five.
        assert_locked_page(sign_in(client, "nobody", "guess"), ADDRESS_LOCKED)
        assert_locked_page(sign_in(client, "carol", "carol-pw"), ADDRESS_LOCKED)
        # API tokens from the address are refused too, a valid one included.
        api = client.get("/api/workspaces/", headers=people.carol.headers)
        assert api.status_code == 429
    with browser(server, ELSEWHERE) as client:
        assert sign_in(client, "carol", "carol-pw").status_code == 302


def test_the_lock_ends_after_its_cool_off_and_tries_meanwhile_do_not_stretch_it(
    make_server, people
):
    server = make_server(PARLEY_LOGIN_FAILURE_LIMIT="2", PARLEY_LOGIN_COOLOFF_MINUTES="0.05")
    refused = []

    def signed_in() -> bool:
        response = sign_in(client, "alice", "alice-pw")
        if response.status_code == 429:
            refused.append(response)
        return response.status_code == 302

    with browser(server) as client:
        sign_in(client, "alice", "guess")
        assert sign_in(client, "alice", "guess").status_code == 429
        # Tried again and again while locked (3 s), each refused unchecked: were each try to
        # stretch the lock, it would never end.
        wait_until(signed_in, timeout=30, what="the lock to end")
    assert refused


def test_wrong_tokens_lock_the_address_over_rest_the_socket_and_mcp(
    make_server, people, conversation
):
    server = make_server(PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT="4")
    with server.client() as client:
        for _ in range(3):
            wrong = client.get("/api/workspaces/", headers={"Authorization": "Token nope"})
            assert wrong.status_code == 401
            assert wrong.json()["error"]["code"] == "authentication_failed"
        locked = client.get("/api/workspaces/", headers={"Authorization": "Token nope"})
        assert locked.status_code == 429
        assert locked.json() == {
            "error": {"code": "locked_out", "message": locked.json()["error"]["message"]}
        }
        assert locked.json()["error"]["message"].startswith(ADDRESS_LOCKED)
        assert 0 < int(locked.headers["Retry-After"]) <= 15 * 60
        # A valid token from the locked address is refused unchecked, on every edge.
        valid = client.get("/api/workspaces/", headers=people.alice.headers)
        assert valid.status_code == 429 and valid.json()["error"]["code"] == "locked_out"
        mcp = client.post(
            "/mcp/",
            json=INITIALIZE,
            headers={"Accept": ACCEPT, "Authorization": f"Bearer {people.alice.token}"},
        )
        assert mcp.status_code == 429, mcp.text
        assert mcp.json()["error"]["code"] == "locked_out"
        assert int(mcp.headers["Retry-After"]) > 0

    async def handshake() -> int:
        async with server.connect(conversation.pk, people.alice) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await receive_json(ws)
        return closed.value.rcvd.code

    assert asyncio.run(handshake()) == 4401
    # Token failures name no account: one row, the address's.
    (attempt,) = AccessAttempt.objects.all()
    assert (attempt.username, attempt.ip_address, attempt.failures_since_start) == (
        None,
        "127.0.0.1",
        4,
    )
    with browser(server, ELSEWHERE) as client:
        assert client.get("/api/workspaces/", headers=people.alice.headers).status_code == 200


async def test_wrong_tokens_count_on_the_socket_and_over_mcp(make_server, people, conversation):
    server = make_server(PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT="3")
    async with websockets.connect(
        server.ws_url(conversation.pk), additional_headers={"Authorization": "Token wrong"}
    ) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await receive_json(ws)
    assert closed.value.rcvd.code == 4401
    async with server.async_client() as client:
        headers = {"Accept": ACCEPT, "Authorization": "Bearer wrong"}
        first = await client.post("/mcp/", json=INITIALIZE, headers=headers)
        assert first.status_code == 401
        third = await client.post("/mcp/", json=INITIALIZE, headers=headers)
        assert third.status_code == 429 and third.json()["error"]["code"] == "locked_out"
        rest = await client.get("/api/workspaces/", headers=people.alice.headers)
        assert rest.status_code == 429


def test_basic_credentials_are_not_an_api_login(server, people):
    """The API takes tokens, not passwords: a Basic header, right or wrong, is no credential at
    all (401, nothing checked or counted), so the API offers no way to guess passwords."""
    with server.client() as client:
        for password in ("bob-pw", "guess"):
            response = client.get("/api/workspaces/", auth=("bob", password))
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "not_authenticated"
            assert response.headers["WWW-Authenticate"] == "Token"
    assert not AccessAttempt.objects.exists()


def test_an_admin_sees_the_lockout_and_lifts_it_in_the_admin(server, people):
    with browser(server) as client:
        for _ in range(5):
            sign_in(client, "bob", "guess")
        assert sign_in(client, "bob", "bob-pw").status_code == 429
        client.get("/api/workspaces/", headers={"Authorization": "Token nope"})
    admin = admin_of(server, people)
    everything = shown(admin.get("/admin/axes/accessattempt/"))
    assert everything.count('name="_selected_action"') == 2
    assert (
        "account 5 of 5, address 6 of 20" in everything
        and "account from this address" in everything
    )
    assert (
        '<td class="field-counted">address 6 of 20</td><td class="field-lock">none</td>'
        in everything
    )
    listing = admin.get("/admin/axes/accessattempt/?locked=yes")
    assert listing.status_code == 200
    (pk,) = re.findall(r'name="_selected_action" value="(\d+)"', listing.text)
    page = shown(listing)
    assert ">bob<" in page and "127.0.0.1" in page and "account from this address" in page
    # Django's delete action: its confirmation page, then the delete.
    confirm = post_form(
        admin,
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": [pk], "index": "0"},
    )
    assert "<title>Delete multiple objects" in shown(confirm)
    deleted = post_form(
        admin,
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": [pk], "post": "yes"},
    )
    assert deleted.status_code == 302
    assert list(AccessAttempt.objects.values_list("username", flat=True)) == [None]
    with browser(server) as client:
        assert sign_in(client, "bob", "bob-pw").status_code == 302


def test_wrong_tokens_arriving_together_are_each_counted_and_none_is_a_500(make_server, people):
    # The first failures from an address arriving at once each make their own record (axes
    # keys them by account, and a token names none): they are folded together, not a 500.
    server = make_server(PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT="1000")

    def wrong(n: int) -> int:
        with server.client() as client:
            headers = {"Authorization": f"Token wrong{n}"}
            return client.get("/api/workspaces/", headers=headers).status_code

    with ThreadPoolExecutor(16) as pool:
        for _ in range(10):
            AccessAttempt.objects.all().delete()
            assert list(pool.map(wrong, range(16))) == [401] * 16
            counted = sum(AccessAttempt.objects.values_list("failures_since_start", flat=True))
            assert counted == 16


def test_a_failed_sign_in_keeps_no_secret_of_its_query_or_form(server, people):
    # What a failed sign-in carries (an OIDC callback's code and state, a signed link's k and
    # u, a token, a password) is masked in what axes keeps of it.
    secrets = {"code": "C0DE-SECRET", "state": "ST4TE-SECRET", "k": "K-SECRET", "u": "U-SECRET"}
    query = "&".join(f"{name}={value}" for name, value in secrets.items())
    with browser(server) as client:
        refused = post_form(
            client,
            f"/login/?{query}&token=T0KEN-SECRET",
            {"username": "alice", "password": "PW-SECRET", "token": "T0KEN-SECRET", **secrets},
        )
        assert refused.status_code == 200
    (attempt,) = AccessAttempt.objects.all()
    kept = attempt.get_data + attempt.post_data
    assert "code=" in attempt.get_data and "state=" in attempt.post_data
    for value in [*secrets.values(), "T0KEN-SECRET", "PW-SECRET"]:
        assert value not in kept, kept

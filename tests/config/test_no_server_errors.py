"""No request is a server error: every URL pattern (the pages', the admin's, the API's, MCP's)
with every method, as someone signed out, a member and an admin, with and without the CSRF
token, and every socket route (and paths no route serves) as each of them, through a real
Daphne, answer something other than a 5xx, and nothing is logged at ERROR."""

import asyncio
import re
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
import websockets
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.urls import URLResolver, get_resolver
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.models import ApiToken, Invitation
from conversations import services
from conversations.models import Conversation
from reach.preferences import preference_update
from reach.services.channels import workspace_slack_channel_set
from reach.services.webhooks import webhook_endpoint_create
from tests.conftest import log_in
from tests.helpers import close_reading_on, parked_conversation

# Run once, in the SQLite pass: what the database could make a 5xx of, the API, is fuzzed on
# PostgreSQL (tests/fuzz/test_schema.py), which keeps the PostgreSQL pass, which carries the
# cluster's deploys, within make test's time.
pytestmark = pytest.mark.once

SAFE = ("GET", "HEAD", "OPTIONS")
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
NONSENSE = "nope"
# Requests in flight at once: enough to keep Daphne busy, few enough for a shared machine.
CONCURRENCY = 8
# What no route serves, for sockets and for HTTP.
UNKNOWN_SOCKET_PATHS = ("/ws/nope/", "/", "/ws/", "/ws/conversations/", "/ws/me/more/", "/mcp")
UNKNOWN_HTTP_PATHS = ("/nope", "/api/nope/", "/ws/conversations/nope/", "/admin/nope/")
# And odd ones: a NUL, a query no database stores, an id far too long.
ODD_HTTP_PATHS = (
    "/conversations/%00/",
    "/api/conversations/%00/",
    "/?q=%00",
    "/admin/conversations/conversation/%00/change/",
    f"/api/selections/{'x' * 300}/",
)


@dataclass
class Identity:
    name: str
    client: httpx.AsyncClient

    @property
    def csrf_token(self) -> str:
        return self.client.cookies["csrftoken"]


@dataclass
class Fixture:
    """What the walk aims at: the ids that exist (the member's conversation and its pending
    question, another workspace's conversation, a row of every model in the admin)."""

    conversation: str
    others: str
    selection: str
    member_token: str
    endpoint: str = ""
    paths: list[str] | None = None


@pytest.fixture
def fixture(server, people) -> Fixture:
    get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")
    cid, question = parked_conversation(server, people)
    other = services.conversation_create(
        workspace=people.other_workspace, user=people.dave.user, title="Theirs"
    )
    # A webhook endpoint (to where nothing listens), a person's settings and a workspace's
    # Slack channel: rows for the reach app's pages, API and admin.
    endpoint = webhook_endpoint_create(
        workspace=people.workspace,
        user=people.alice.user,
        url="http://127.0.0.1:9/hooks",
        event_types=["question.asked"],
    )
    preference_update(user=people.bob.user, email="all")
    workspace_slack_channel_set(workspace=people.workspace, slack_channel="C0TEAM01")
    # A pending invitation: a row for the accounts app's API and admin.
    Invitation.objects.create(
        workspace=people.workspace,
        email="erin@example.com",
        invited_by=people.alice.user,
        expires_at=timezone.now() + timedelta(days=7),
    )
    fixture = Fixture(
        conversation=cid,
        others=other.pk,
        selection=question["id"],
        member_token=people.bob.token,
        endpoint=endpoint.pk,
    )
    fixture.paths = every_path(fixture)
    return fixture


def _patterns(patterns, prefix=""):
    """Every URL pattern, with the route of the resolvers above it."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern


def _admin_row(pattern) -> list[str]:
    """The pk of a row of the model an admin view serves (none if it has no row)."""
    model_admin = getattr(pattern.callback, "model_admin", None)
    if model_admin is None:
        return []
    row = model_admin.model._default_manager.order_by("pk").first()
    return [str(row.pk)] if row is not None else []


def _values(name: str, pattern, fixture: Fixture) -> list[str]:
    """Plausible values for a path's parameter: ones that exist, and nonsense."""
    known = {
        "conversation_id": lambda: [fixture.conversation, fixture.others],
        "selection_id": lambda: [fixture.selection],
        "object_id": lambda: _admin_row(pattern),
        "content_type_id": lambda: [str(ContentType.objects.get_for_model(Conversation).pk)],
        "id": lambda: [str(get_user_model().objects.get(username="bob").pk)],
        "app_label": lambda: ["conversations", "selection"],
        "url": lambda: [],
        "slug": lambda: ["team", "other"],
        "endpoint_id": lambda: [fixture.endpoint],
        # Password reset links: a person's id as Django encodes it, and the token Django puts
        # in the session's place (a wrong one is the nonsense).
        "uidb64": lambda: [
            urlsafe_base64_encode(force_bytes(get_user_model().objects.get(username="bob").pk))
        ],
        "token": lambda: ["set-password"],
        "invitation_id": lambda: list(Invitation.objects.values_list("pk", flat=True)[:1]),
        # Someone the walk does not act as (removing them changes nothing walked).
        "username": lambda: ["dave"],
        # A token of someone the walk does not act as (revoking it changes nothing walked).
        "token_id": lambda: [
            ApiToken.objects.filter(user__username="dave").values_list("pk", flat=True).first()
        ],
    }
    assert name in known, f"{pattern.pattern} has a parameter the walk cannot fill: {name}"
    real = known[name]()
    if name == "object_id" and "content_type_id" in str(pattern.pattern):
        real = [fixture.conversation]  # admin/r/<content type>/<object>/: "view on site"
    return [*real, NONSENSE]


def every_path(fixture: Fixture) -> list[str]:
    """Each URL pattern's paths, its parameters filled with every value of theirs."""
    paths = set()
    for route, pattern in _patterns(get_resolver().url_patterns):
        route = route.replace("^", "").replace("$", "")
        slots = re.findall(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)", route)
        filled = [route]
        for route_name, regex_name in slots:
            name = route_name or regex_name
            slot = re.compile(rf"<(?:\w+:)?{name}>|\(\?P<{name}>[^)]*\)")
            filled = [
                slot.sub(value, path, count=1)
                for path in filled
                for value in _values(name, pattern, fixture)
            ]
        paths.update(f"/{path}" for path in filled)
    return sorted(paths | {"/mcp", "/mcp/", *UNKNOWN_HTTP_PATHS, *ODD_HTTP_PATHS})


async def _identities(server) -> list[Identity]:
    """Someone signed out (with the CSRF cookie a page gives), a member and an admin, each
    signed in through a login form as a browser is."""
    anonymous = server.async_client()
    await anonymous.get("/login/")
    member = await asyncio.to_thread(log_in, server, "bob")
    admin = await asyncio.to_thread(log_in, server, "root", "/admin/login/")
    signed_in = [server.async_client(cookies=client.cookies) for client in (member, admin)]
    member.close()
    admin.close()
    return [
        Identity("signed out", anonymous),
        Identity("member", signed_in[0]),
        Identity("admin", signed_in[1]),
    ]


async def _ask(identity: Identity, method: str, path: str, token: bool, origin: str) -> int:
    """One request, as a browser or a script would send it: a form (or JSON to the API and
    MCP), with the CSRF token in the form, a header and a same-origin Origin, or with none."""
    headers, data, content = {}, None, None
    if method not in SAFE:
        if path.startswith(("/api/", "/mcp")):
            headers["Content-Type"] = "application/json"
            content = b"{}"
        else:
            data = {}
        if token:
            headers.update({"X-CSRFToken": identity.csrf_token, "Origin": origin})
            headers["Referer"] = f"{origin}{path}"
            if data is not None:
                data["csrfmiddlewaretoken"] = identity.csrf_token
    request = identity.client.build_request(
        method, path, headers=headers, data=data, content=content
    )
    # Streamed: a tail answers at once and then stays open until its turn ends; the status is
    # what counts (and the body of anything else is read, so that it is all sent).
    response = await identity.client.send(request, stream=True)
    try:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
    finally:
        await response.aclose()
    return response.status_code


async def _walk(server, identities, requests) -> list[tuple]:
    """Send every (identity, method, path, token) request, a few at a time; the 5xx answers."""
    gate = asyncio.Semaphore(CONCURRENCY)
    failures = []

    async def one(identity, method, path, token):
        async with gate:
            status = await _ask(identity, method, path, token, server.url)
        if status >= 500:
            failures.append((identity.name, method, path, "token" if token else "no token", status))

    await asyncio.gather(*(one(*request) for request in requests))
    return failures


def _requests(identities, paths, methods) -> list[tuple]:
    """Each request of the walk: with the token, and, for POST, without it too (the CSRF
    check refuses the other methods alike, before any view)."""
    return [
        (identity, method, path, token)
        for identity in identities
        for path in paths
        for method in methods
        for token in ((True, False) if method == "POST" else (True,))
    ]


def _ends_a_session(path: str) -> bool:
    return path.rstrip("/").endswith("logout")


# Every URL, method and person: a few thousand requests, minutes on a loaded machine.
@pytest.mark.timeout(480)
async def test_every_url_answers_every_method_and_person_without_a_server_error(server, fixture):
    paths = fixture.paths
    # Every pattern is there, the admin's and the API's included.
    assert {"/", "/admin/", "/api/workspaces/", f"/api/selections/{fixture.selection}/"} <= set(
        paths
    )
    assert any(
        f"/admin/conversations/conversation/{cid}/change/" in paths
        for cid in (fixture.conversation, fixture.others)
    )
    identities = await _identities(server)
    keeping = [path for path in paths if not _ends_a_session(path)]
    ending = [path for path in paths if _ends_a_session(path)]
    try:
        # What deletes comes after what reads, and logging out last of all.
        failures = await _walk(server, identities, _requests(identities, keeping, SAFE))
        failures += await _walk(
            server, identities, _requests(identities, keeping, ("POST", "PUT", "PATCH"))
        )
        failures += await _walk(server, identities, _requests(identities, keeping, ("DELETE",)))
        failures += await _walk(server, identities, _requests(identities, ending, SAFE + UNSAFE))
    finally:
        for identity in identities:
            await identity.client.aclose()
    assert not failures, "\n".join(map(str, sorted(failures)))
    _assert_no_error_logged(server)


def _assert_no_error_logged(server) -> None:
    log = server.log_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert not errors, "\n".join(errors[:20])
    assert "Exception inside application" not in log


# Sockets -------------------------------------------------------------------------------------


async def _socket(server, path: str, headers: dict) -> str:
    """Open a socket as someone would, read its first frame and close it (reading on until the
    server's close): what happened, in a word."""
    url = f"ws://127.0.0.1:{server.port}{path}"
    try:
        async with websockets.connect(url, additional_headers=headers, open_timeout=30) as ws:
            try:
                async with asyncio.timeout(30):
                    await ws.recv()
            except websockets.ConnectionClosed:
                return f"closed {ws.close_code}"
            return f"open, then closed {await close_reading_on(ws)}"
    except websockets.InvalidStatus as refused:
        return f"refused {refused.response.status_code}"


async def test_every_socket_route_and_unknown_path_answers_everyone_without_a_server_error(
    server, fixture
):
    member = await asyncio.to_thread(log_in, server, "bob")
    admin = await asyncio.to_thread(log_in, server, "root", "/admin/login/")
    origin = server.url
    people = {
        "signed out": {},
        "member": {"Cookie": f"sessionid={member.cookies['sessionid']}", "Origin": origin},
        "admin": {"Cookie": f"sessionid={admin.cookies['sessionid']}", "Origin": origin},
        "member's token": {"Authorization": f"Token {fixture.member_token}"},
    }
    member.close()
    admin.close()
    conversations = [
        f"/ws/conversations/{cid}/{query}"
        for cid in (fixture.conversation, fixture.others, NONSENSE, "x" * 70)
        for query in ("", "?from_seq=0", "?from_seq=oops", "?from_seq=999999&presence=1")
    ]
    paths = [*conversations, "/ws/me/", *UNKNOWN_SOCKET_PATHS]
    outcomes = dict(
        zip(
            [(name, path) for name in people for path in paths],
            await asyncio.gather(
                *(_socket(server, path, headers) for headers in people.values() for path in paths)
            ),
            strict=True,
        )
    )
    for name in people:
        # What no route serves is refused at the handshake, whoever asks.
        for path in UNKNOWN_SOCKET_PATHS:
            assert outcomes[name, path] == "refused 403", (name, path)
        # The rest open, and each ends with a close code of Parley's (or a clean close).
        for path in (*conversations, "/ws/me/"):
            outcome = outcomes[name, path]
            code = int(outcome.rsplit(" ", 1)[1])
            assert code in (1000, 4400, 4401, 4403), (name, path, outcome)
    assert outcomes["member", f"/ws/conversations/{fixture.conversation}/"] == (
        "open, then closed 1000"
    )
    assert outcomes["member's token", "/ws/me/"] == "open, then closed 1000"
    assert outcomes["signed out", "/ws/me/"] == "closed 4401"
    assert outcomes["member", f"/ws/conversations/{fixture.others}/"] == "closed 4403"
    _assert_no_error_logged(server)


# The three server errors the walk was written for, each on its own ---------------------------


def test_a_form_left_open_across_a_new_login_is_refused_with_parleys_page(server, people):
    """Log in, open the home page (its form carries the token of the moment), log in again in
    another tab (a new session, a new token), then send the first tab's form."""
    browser = log_in(server, "bob")
    try:
        home = browser.get("/")
        stale = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', home.text).group(1)
        page = browser.get("/login/")
        fresh = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        again = browser.post(
            "/login/", data={"username": "bob", "password": "bob-pw", "csrfmiddlewaretoken": fresh}
        )
        assert again.status_code == 302
        refused = browser.post(
            "/conversations/new/",
            data={"csrfmiddlewaretoken": stale, "workspace": "team", "title": "Plans"},
            headers={"Origin": server.url, "Referer": f"{server.url}/"},
        )
        assert refused.status_code == 403
        assert "That form had expired" in refused.text
        # The page knows who is signed in (read from the database, off the event loop).
        assert "Back to your workspaces" in refused.text
        assert "Bob" in refused.text
        assert not Conversation.objects.filter(title="Plans").exists()
    finally:
        browser.close()


def test_logging_out_without_the_forms_token_is_refused_and_keeps_the_session(server, people):
    browser = log_in(server, "bob")
    try:
        refused = browser.post("/logout/")
        assert refused.status_code == 403
        assert "That form had expired" in refused.text
        assert browser.get("/").status_code == 200  # still signed in
        logged_out = browser.post(
            "/logout/", data={"csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        )
        assert logged_out.status_code == 302
        assert browser.get("/").status_code == 302  # to the login page
    finally:
        browser.close()


async def test_the_first_requests_for_the_schema_and_mcp_come_at_once_and_are_served(server):
    """The first requests after a start find the schema's generator and the MCP endpoint not
    yet loaded: several at once wait for the one loading rather than failing."""
    async with server.async_client() as client:
        answers = await asyncio.gather(
            *(client.get("/api/schema/") for _ in range(6)),
            *(client.post("/mcp/", json={}) for _ in range(6)),
        )
    assert [answer.status_code for answer in answers] == [200] * 6 + [401] * 6
    _assert_no_error_logged(server)

"""Who may see and do what, over REST and the socket, through a real Daphne."""

import json
import re

import httpx
import pytest
import websockets
from django.core.management import call_command

from tests.conftest import log_in, receive_json, wait_for_turn_end

READS = ["", "in-flight/", "events/", "tail/"]


@pytest.mark.parametrize(
    "who, status", [("alice", 200), ("bob", 200), ("carol", 200), ("dave", 404)]
)
def test_reading_a_conversation_needs_membership(server, people, conversation, who, status):
    with server.client(getattr(people, who)) as client:
        for suffix in READS:
            response = client.get(f"/api/conversations/{conversation.pk}/{suffix}")
            assert response.status_code == status, (suffix, response.text)
            if status == 404:
                assert response.json() == {
                    "error": {"code": "not_found", "message": "Conversation was not found."}
                }
                assert conversation.title not in response.text


@pytest.mark.parametrize(
    "who, status, code",
    [
        ("alice", 202, None),
        ("bob", 202, None),
        ("carol", 403, "forbidden"),
        ("dave", 404, "not_found"),
    ],
)
def test_starting_a_turn_needs_owner_or_member(server, people, conversation, who, status, code):
    with server.client(getattr(people, who)) as client:
        response = client.post(
            f"/api/conversations/{conversation.pk}/turns/", json={"input": "help"}
        )
        assert response.status_code == status, response.text
        if code:
            assert response.json()["error"]["code"] == code
    with server.client(people.alice) as alice:
        events = alice.get(f"/api/conversations/{conversation.pk}/events/").json()["events"]
        if status == 202:
            wait_for_turn_end(alice, conversation.pk)
        assert (len(events) > 0) == (status == 202)


def test_anonymous_requests_are_401_with_the_token_challenge(server, conversation):
    with server.client() as client:
        for path in ["/api/workspaces/", "/api/conversations/", "/api/in-flight/"] + [
            f"/api/conversations/{conversation.pk}/{suffix}" for suffix in READS
        ]:
            response = client.get(path)
            assert response.status_code == 401, path
            assert response.headers["WWW-Authenticate"] == "Token"
            assert response.json()["error"]["code"] == "not_authenticated"
        bad = client.get("/api/workspaces/", headers={"Authorization": "Token nope"})
        assert bad.status_code == 401
        assert bad.json()["error"]["code"] == "authentication_failed"


def test_lists_show_only_the_callers_workspaces(server, people, conversation):
    with server.client(people.carol) as carol, server.client(people.dave) as dave:
        assert carol.get("/api/workspaces/").json() == [
            {"slug": "team", "name": "The Team", "role": "viewer"}
        ]
        assert dave.get("/api/workspaces/").json() == [
            {"slug": "other", "name": "Other Team", "role": "owner"}
        ]
        listed = carol.get("/api/conversations/").json()
        assert [c["id"] for c in listed["results"]] == [conversation.pk]
        assert dave.get("/api/conversations/").json()["results"] == []
        assert dave.get("/api/conversations/?workspace=team").json()["results"] == []


@pytest.mark.parametrize(
    "who, status", [("alice", 201), ("bob", 201), ("carol", 403), ("dave", 404)]
)
def test_creating_a_conversation_needs_owner_or_member(server, people, who, status):
    with server.client(getattr(people, who)) as client:
        response = client.post("/api/conversations/", json={"workspace": "team", "title": "New"})
    assert response.status_code == status, response.text
    if status == 201:
        body = response.json()
        assert body["workspace"] == "team" and body["agent"] == "builtin"
        assert body["latest_seq"] == 0 and body["active_turn"] is None
        assert body["created_by"]["username"] == who


async def test_socket_roles_viewer_watches_but_cannot_act(server, people, conversation):
    async with server.connect(conversation.pk, people.carol) as ws:
        ready = await receive_json(ws)
        assert ready["type"] == "ws.ready" and ready["role"] == "viewer"
        await ws.send(json.dumps({"type": "turn.start", "ref": "c", "input": "help"}))
        error = await receive_json(ws)
        assert error == {
            "type": "ws.error",
            "ref": "c",
            "code": "forbidden",
            "message": "Viewers may watch but not start turns.",
        }


@pytest.mark.parametrize("who, code", [("dave", 4403), (None, 4401), ("bad-token", 4401)])
async def test_sockets_of_strangers_and_anonymous_clients_are_closed(
    server, people, conversation, who, code
):
    person = getattr(people, who) if who in ("dave",) else None
    headers = {"Authorization": "Token wrong"} if who == "bad-token" else None
    connect = (
        websockets.connect(server.ws_url(conversation.pk), additional_headers=headers)
        if headers
        else server.connect(conversation.pk, person)
    )
    async with connect as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await receive_json(ws)
    assert closed.value.rcvd.code == code


async def test_a_socket_to_an_unknown_conversation_is_closed_4403(server, people):
    async with server.connect("c_doesnotexist0000", people.alice) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await receive_json(ws)
    assert closed.value.rcvd.code == 4403


def test_browser_session_works_and_unsafe_requests_need_csrf(server, people, conversation):
    client = log_in(server, "bob")
    try:
        assert client.get("/").status_code == 200
        assert client.get("/api/workspaces/").json()[0]["role"] == "member"
        path = f"/api/conversations/{conversation.pk}/turns/"
        refused = client.post(path, json={"input": "help"})
        assert refused.status_code == 403
        assert "CSRF" in refused.json()["error"]["message"]
        accepted = client.post(
            path, json={"input": "help"}, headers={"X-CSRFToken": client.cookies["csrftoken"]}
        )
        assert accepted.status_code == 202
    finally:
        client.close()


async def test_browser_socket_uses_the_session_and_checks_the_origin(server, people, conversation):
    client = log_in(server, "bob")
    cookie = f"sessionid={client.cookies['sessionid']}"
    client.close()
    url = server.ws_url(conversation.pk)
    origin = f"http://127.0.0.1:{server.port}"
    async with websockets.connect(url, origin=origin, additional_headers={"Cookie": cookie}) as ws:
        ready = await receive_json(ws)
        assert ready["type"] == "ws.ready" and ready["role"] == "member"
    with pytest.raises(websockets.InvalidStatus) as rejected:
        async with websockets.connect(
            url, origin="http://evil.example", additional_headers={"Cookie": cookie}
        ):
            pass
    assert rejected.value.response.status_code == 403


def test_create_token_gives_a_working_rest_token(server, people, capsys):
    call_command("create_token", "bob", name="script")
    key = re.search(r"(prl_[\w-]+)", capsys.readouterr().out).group(1)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Token {key}"}) as client:
        assert client.get("/api/workspaces/").json()[0]["slug"] == "team"

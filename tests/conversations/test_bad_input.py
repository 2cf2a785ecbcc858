"""Bad input gets a clear error and changes nothing stored, over REST and the socket."""

import json

import pytest
import websockets

from tests.conftest import receive_json, wait_for_turn_end


@pytest.fixture
def finished(server, people, conversation):
    """A conversation with one finished turn, and a snapshot of its stored events."""
    with server.client(people.alice) as client:
        client.post(f"/api/conversations/{conversation.pk}/turns/", json={"input": "help"})
        wait_for_turn_end(client, conversation.pk)
        snapshot = client.get(f"/api/conversations/{conversation.pk}/events/").json()
    return conversation.pk, snapshot


def assert_unchanged(server, people, cid, snapshot):
    with server.client(people.alice) as client:
        assert client.get(f"/api/conversations/{cid}/events/").json() == snapshot
        assert client.get(f"/api/conversations/{cid}/in-flight/").json()["in_flight"] is False


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize(
    "body, content_type, code, says",
    [
        (
            "{not json",
            "application/json",
            "invalid_json",
            "The body is not valid JSON: Expecting property name",
        ),
        ("[]", "application/json", "invalid", "Expected a dictionary"),
        ("{}", "application/json", "invalid", "input: This field is required."),
        ('{"input": "   "}', "application/json", "invalid", "input: This field may not be blank."),
        ('{"input": 7, "interactive": "maybe"}', "application/json", "invalid", "interactive"),
        ('{"input": "' + "x" * 20_001 + '"}', "application/json", "invalid", "20000"),
        ("input=help", "text/plain", "unsupported_media_type", "text/plain"),
    ],
)
def test_a_bad_turn_start_is_400_and_stores_nothing(
    server, people, finished, body, content_type, code, says
):
    cid, snapshot = finished
    with server.client(people.bob) as client:
        response = client.post(
            f"/api/conversations/{cid}/turns/", content=body, headers={"Content-Type": content_type}
        )
    error = error_of(response, 415 if code == "unsupported_media_type" else 400)
    assert error["code"] == code and says in error["message"]
    assert_unchanged(server, people, cid, snapshot)


@pytest.mark.parametrize(
    "params, code",
    [
        ({"from_seq": "-1"}, "invalid_from_seq"),
        ({"from_seq": "abc"}, "invalid_from_seq"),
        ({"from_seq": "1.5"}, "invalid_from_seq"),
        ({"from_seq": "99999"}, "invalid_from_seq"),
    ],
)
def test_a_bad_tail_from_seq_is_400(server, people, finished, params, code):
    cid, snapshot = finished
    with server.client(people.bob) as client:
        response = client.get(f"/api/conversations/{cid}/tail/", params=params)
        assert error_of(response, 400)["code"] == code
        bad_header = client.get(f"/api/conversations/{cid}/tail/", headers={"Last-Event-ID": "x"})
        assert error_of(bad_header, 400)["code"] == "invalid_last_event_id"
    assert_unchanged(server, people, cid, snapshot)


@pytest.mark.parametrize(
    "params, code",
    [
        ({"after_seq": "-3"}, "invalid_after_seq"),
        ({"after_seq": "many"}, "invalid_after_seq"),
        ({"after_seq": "1000"}, "invalid_after_seq"),
        ({"limit": "0"}, "invalid_limit"),
        ({"limit": "5000"}, "invalid_limit"),
        ({"limit": "ten"}, "invalid_limit"),
    ],
)
def test_a_bad_events_page_request_is_400(server, people, finished, params, code):
    cid, _ = finished
    with server.client(people.bob) as client:
        response = client.get(f"/api/conversations/{cid}/events/", params=params)
    assert error_of(response, 400)["code"] == code


def test_events_pages_walk_the_log_in_order(server, people, finished):
    cid, snapshot = finished
    with server.client(people.carol) as client:
        page = client.get(f"/api/conversations/{cid}/events/", params={"limit": 2}).json()
        assert [e["seq"] for e in page["events"]] == [1, 2]
        assert page["has_more"] is True and page["next_after_seq"] == 2
        rest = client.get(
            f"/api/conversations/{cid}/events/", params={"after_seq": 2, "limit": 1000}
        ).json()
    assert page["events"] + rest["events"] == snapshot["events"]
    assert rest["has_more"] is False and rest["latest_seq"] == snapshot["latest_seq"]


def test_unknown_ids_and_paths_are_404_json(server, people):
    with server.client(people.alice) as client:
        for path in [
            "/api/conversations/c_0000000000000000/",
            "/api/conversations/c_0000000000000000/events/",
            "/api/conversations/c_0000000000000000/tail/",
            "/api/conversations/c_0000000000000000/in-flight/",
            "/api/no-such-thing/",
        ]:
            assert error_of(client.get(path), 404)["code"] == "not_found", path
        missing = client.post("/api/conversations/c_0000000000000000/turns/", json={"input": "x"})
        assert error_of(missing, 404)["code"] == "not_found"


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"workspace": "team", "title": "x", "agent": "skynet"}, 400, "unknown_agent"),
        ({"workspace": "team"}, 400, "invalid"),
        ({"workspace": "team", "title": "   "}, 400, "invalid"),
        ({"workspace": "nope", "title": "x"}, 404, "not_found"),
        ({"workspace": "bad slug!", "title": "x"}, 400, "invalid"),
    ],
)
def test_a_bad_conversation_create_is_refused(server, people, body, status, code):
    with server.client(people.alice) as client:
        response = client.post("/api/conversations/", json=body)
        assert error_of(response, status)["code"] == code
        assert client.get("/api/conversations/").json()["count"] == 0


@pytest.mark.parametrize("query", ["from_seq=-1", "from_seq=abc", "from_seq=999", "from_seq="])
async def test_a_socket_with_a_bad_from_seq_gets_ws_error_and_4400(server, people, finished, query):
    cid, _ = finished
    url = server.ws_url(cid) + "?" + query
    async with websockets.connect(url, additional_headers=people.bob.headers) as ws:
        error = await receive_json(ws)
        assert error["type"] == "ws.error" and error["code"] == "invalid_from_seq"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await receive_json(ws)
    assert closed.value.rcvd.code == 4400


async def test_bad_frames_get_ws_error_and_the_socket_keeps_working(server, people, finished):
    cid, snapshot = finished
    bad_frames = [
        ("not json", None, "invalid_json"),
        ("[1, 2]", None, "invalid_frame"),
        ('{"ref": "a"}', None, "invalid_frame"),
        ('{"type": 5}', None, "invalid_frame"),
        ('{"type": "turn.start", "ref": {"x": 1}}', None, "invalid_frame"),
        ('{"type": "explode", "ref": "b"}', "b", "unknown_type"),
        ('{"type": "resume", "ref": "c", "from_seq": -2}', "c", "invalid_from_seq"),
        ('{"type": "resume", "ref": "d", "from_seq": 10000}', "d", "invalid_from_seq"),
        ('{"type": "turn.start", "ref": "e"}', "e", "invalid"),
        ('{"type": "turn.start", "ref": "f", "input": "hi", "interactive": 1}', "f", "invalid"),
        (
            json.dumps({"type": "turn.start", "ref": "g", "input": "x" * 70_000}),
            None,
            "frame_too_large",
        ),
        (b"\x00\x01binary", None, "invalid_frame"),
    ]
    async with server.connect(cid, people.bob, from_seq=snapshot["latest_seq"]) as ws:
        assert (await receive_json(ws))["type"] == "ws.ready"
        for frame, ref, code in bad_frames:
            await ws.send(frame)
            error = await receive_json(ws)
            assert error["type"] == "ws.error" and error["code"] == code, (frame[:40], error)
            assert error["ref"] == ref and error["message"]
        await ws.send('{"type": "resume", "ref": "ok", "from_seq": 0}')
        assert (await receive_json(ws))["type"] == "ws.ack"
        assert (await receive_json(ws))["seq"] == 1
    assert_unchanged(server, people, cid, snapshot)

"""Bad input gets a clear error and changes nothing stored, over REST and the socket."""

import json
from dataclasses import dataclass

import pytest
import websockets

from tests.conftest import all_events, log_in, receive_json, wait_for_turn_end
from tests.helpers import ask, create_conversation, start, wait_pending


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


# Whatever a REST client sends: every body through the gate, every type strict, every query
# parameter and id parsed strictly. Each refusal is a 4xx in the error shape, and changes nothing.

BIG = "9" * 5000


@dataclass
class Scene:
    """A finished conversation (`cid`), and one whose turn waits on a text question (`qcid`,
    its turn `tid`, the question `sid`)."""

    cid: str
    qcid: str
    tid: str
    sid: str

    def stored(self, client) -> dict:
        """Everything a refused request must leave as it was."""
        listed = client.get("/api/conversations/", params={"archived": "all", "limit": 1000})
        return {
            "conversations": listed.json(),
            "events": {cid: all_events(client, cid) for cid in (self.cid, self.qcid)},
            "question": client.get(f"/api/selections/{self.sid}/").json(),
        }


@pytest.fixture
def scene(server, people, finished):
    cid, _ = finished
    with server.client(people.alice) as client:
        qcid = create_conversation(client)
        tid = start(client, qcid, [ask(kind="text"), {"say": "done"}])
        sid = wait_pending(client, qcid)["id"]
    return Scene(cid=cid, qcid=qcid, tid=tid, sid=sid)


def _bodies(scene: Scene) -> list[tuple[str, str, str, bytes]]:
    """Each request with a body: (method, path, a field it reads as text, the rest of a body
    it would take)."""
    return [
        ("POST", "/api/conversations/", "title", b'"workspace": "team"'),
        ("PATCH", f"/api/conversations/{scene.cid}/", "title", b""),
        ("POST", f"/api/conversations/{scene.cid}/turns/", "input", b""),
        (
            "POST",
            f"/api/conversations/{scene.qcid}/steer/",
            "input",
            b'"expected_turn_id": "' + scene.tid.encode() + b'"',
        ),
        ("POST", f"/api/conversations/{scene.qcid}/cancel/", "turn_id", b""),
        ("POST", f"/api/selections/{scene.sid}/reply/", "answer", b""),
    ]


DEEP = b"[" * 100_000 + b"]" * 100_000

GATED_VALUES = [
    # (the raw JSON of a value, the code, what the message says)
    (b'"\\ud800"', "invalid_text", "lone surrogate"),
    (b'"tail \\udfff"', "invalid_text", "lone surrogate"),
    (b'"\\udc00\\ud800"', "invalid_text", "lone surrogate"),
    (b'{"\\ud83d": "a key"}', "invalid_text", "lone surrogate"),
    (b'"a\\u0000b"', "invalid_text", "NUL"),
    (b'{"a\\u0000": 1}', "invalid_text", "NUL"),
    (b'"\xed\xa0\x80"', "invalid_encoding", "UTF-8"),
    (DEEP, "too_deep", "32 levels"),
    (b'{"a": ' * 40 + b"1" + b"}" * 40, "too_deep", "32 levels"),
    (b"NaN", "invalid_number", "NaN"),
    (b"Infinity", "invalid_number", "Infinity"),
    (b"-Infinity", "invalid_number", "Infinity"),
    (b"1e999", "invalid_number", "too large"),
    (BIG.encode(), "invalid_number", "40 characters"),
    (b"-" + BIG.encode(), "invalid_number", "40 characters"),
    (b"0." + BIG.encode(), "invalid_number", "40 characters"),
]


def test_every_body_the_gate_refuses_is_400_and_changes_nothing(server, people, scene):
    with server.client(people.alice) as client:
        before = scene.stored(client)
        for method, path, field, rest in _bodies(scene):
            for value, code, says in GATED_VALUES:
                body = b"{" + (rest + b", " if rest else b"") + f'"{field}": '.encode() + value
                response = client.request(
                    method, path, content=body + b"}", headers={"Content-Type": "application/json"}
                )
                error = error_of(response, 400)
                assert error["code"] == code and says in error["message"], (path, value[:20])
            too_large = client.request(
                method,
                path,
                content=b'{"' + field.encode() + b'": "' + b"x" * 3_000_000 + b'"}',
                headers={"Content-Type": "application/json"},
            )
            assert error_of(too_large, 413)["code"] == "too_large"
        assert scene.stored(client) == before


WRONG_TYPES = [
    # Each would be taken if coerced: a turn started with "123", a title "5", ...
    ("turns", {"input": 123}, "input: must be a string."),
    ("turns", {"input": 12.5}, "input: must be a string."),
    ("turns", {"input": ["help"]}, "input: must be a string."),
    ("turns", {"input": "help", "interactive": "true"}, "interactive: Must be a valid"),
    ("turns", {"input": "help", "interactive": 1}, "interactive: Must be a valid"),
    ("turns", {"input": "help", "interactive": "no"}, "interactive: Must be a valid"),
    ("turns", {"input": "help", "confirm_writes": "false"}, "confirm_writes: Must be"),
    ("turns", {"input": "help", "confirm_writes": 0}, "confirm_writes: Must be"),
    ("create", {"workspace": "team", "title": 5}, "title: must be a string."),
    ("create", {"workspace": "team", "title": True}, "title: must be a string."),
    ("create", {"workspace": 7, "title": "x"}, "workspace: must be a string."),
    ("create", {"workspace": "team", "title": "x", "model": 4}, "model: must be a string."),
    ("create", {"workspace": "team", "title": "x", "agent": 1}, "agent: must be a string."),
    ("change", {"archived": "true"}, "archived: Must be a valid boolean."),
    ("change", {"archived": 1}, "archived: Must be a valid boolean."),
    ("change", {"title": 5}, "title: must be a string."),
    ("steer", {"input": 42}, "input: must be a string."),
    ("steer", {"input": "go", "expected_turn_id": 7}, "expected_turn_id: must be a string."),
    ("cancel", {"turn_id": 7}, "turn_id: must be a string."),
    ("reply", {"action": 1}, "action:"),
]


def test_a_value_of_the_wrong_json_type_is_400_and_changes_nothing(server, people, scene):
    where = {
        "turns": ("POST", f"/api/conversations/{scene.cid}/turns/"),
        "create": ("POST", "/api/conversations/"),
        "change": ("PATCH", f"/api/conversations/{scene.cid}/"),
        "steer": ("POST", f"/api/conversations/{scene.qcid}/steer/"),
        "cancel": ("POST", f"/api/conversations/{scene.qcid}/cancel/"),
        "reply": ("POST", f"/api/selections/{scene.sid}/reply/"),
    }
    with server.client(people.alice) as client:
        before = scene.stored(client)
        for endpoint, body, says in WRONG_TYPES:
            if endpoint == "steer":
                body = {"expected_turn_id": scene.tid, **body}
            method, path = where[endpoint]
            error = error_of(client.request(method, path, json=body), 400)
            assert error["code"] == "invalid" and says in error["message"], (body, error)
        assert scene.stored(client) == before


def test_a_text_answer_of_the_wrong_type_or_with_nul_is_refused(server, people, scene):
    with server.client(people.alice) as client:
        before = scene.stored(client)
        for answer in (123, True, ["x"], {"text": "x"}):
            response = client.post(f"/api/selections/{scene.sid}/reply/", json={"answer": answer})
            assert error_of(response, 400)["code"] == "invalid_answer"
        response = client.post(f"/api/selections/{scene.sid}/reply/", json={"answer": "a\x00b"})
        assert error_of(response, 400)["code"] == "invalid_text"
        assert scene.stored(client) == before
        # And the question still takes a good answer.
        good = client.post(f"/api/selections/{scene.sid}/reply/", json={"answer": "fine"})
        assert good.status_code == 200 and good.json()["answer"] == "fine"


def _numeric_params(scene: Scene) -> list[tuple[str, str]]:
    cid = scene.cid
    return [
        (f"/api/conversations/{cid}/events/", "after_seq"),
        (f"/api/conversations/{cid}/events/", "limit"),
        (f"/api/conversations/{cid}/history/", "turns"),
        (f"/api/conversations/{cid}/history/", "events"),
        ("/api/conversations/", "limit"),
        ("/api/conversations/", "offset"),
        (f"/api/conversations/{cid}/tail/", "from_seq"),
    ]


BAD_NUMBERS = [BIG, "-" + BIG, "-1", "9223372036854775808", "1e3", "0x10", "١٢", "", "1 2"]


def test_a_bad_number_in_any_numeric_query_parameter_is_400(server, people, scene):
    tail = f"/api/conversations/{scene.cid}/tail/"
    with server.client(people.alice) as client:
        before = scene.stored(client)
        for value in BAD_NUMBERS:
            for path, name in _numeric_params(scene):
                error = error_of(client.get(path, params={name: value}), 400)
                assert error["code"] == f"invalid_{name}", (path, name, value[:20], error)
                assert name in error["message"]
            response = client.get(tail, headers={"Last-Event-ID": value.encode()})
            assert error_of(response, 400)["code"] == "invalid_last_event_id", value[:20]
        assert scene.stored(client) == before


def test_numbers_at_the_edges_of_their_range(server, people, scene):
    with server.client(people.alice) as client:
        far = client.get("/api/conversations/", params={"offset": str(2**63 - 1), "limit": 1000})
        assert far.status_code == 200 and far.json()["results"] == []
        for path, name, low, high in [
            (f"/api/conversations/{scene.cid}/events/", "limit", 1, 1000),
            (f"/api/conversations/{scene.cid}/history/", "turns", 1, 100),
            (f"/api/conversations/{scene.cid}/history/", "events", 1, 10_000),
            ("/api/conversations/", "limit", 1, 1000),
        ]:
            assert client.get(path, params={name: low}).status_code == 200
            assert client.get(path, params={name: high}).status_code == 200
            for outside in (low - 1, high + 1):
                error = error_of(client.get(path, params={name: outside}), 400)
                assert (
                    error["code"] == f"invalid_{name}"
                    and f"from {low} to {high}" in error["message"]
                )


def test_nul_anywhere_in_an_api_url_is_400_invalid_text(server, people, scene):
    cid, sid = scene.cid, scene.sid
    with server.client(people.alice) as client:
        before = scene.stored(client)
        requests = [
            ("GET", "/api/conversations/", {"q": "pla\x00ns"}),
            ("GET", "/api/conversations/", {"workspace": "team\x00"}),
            ("GET", "/api/conversations/", {"archived": "\x00"}),
            ("GET", "/api/conversations/", {"unknown\x00": "1"}),
            ("GET", f"/api/conversations/{cid}/history/", {"before_turn": "t_\x00"}),
            ("GET", f"/api/conversations/{cid}/events/", {"limit": "1\x00"}),
            ("GET", "/api/selections/", {"conversation": "c_\x00"}),
            ("GET", "/api/selections/", {"status": "pending\x00"}),
            ("GET", "/api/selections/", {"addressee": "me\x00"}),
            ("GET", f"/api/selections/{sid}/browse/", {"path": "notes\x00"}),
            ("GET", "/api/conversations/c_%00/", {}),
            ("GET", "/api/conversations/c_%00/events/", {}),
            ("GET", "/api/conversations/c_%00/tail/", {}),
            ("DELETE", "/api/conversations/c_%00/", {}),
            ("GET", "/api/selections/s_%00/", {}),
        ]
        for method, path, params in requests:
            response = client.request(method, path, params=params)
            error = error_of(response, 400)
            assert error["code"] == "invalid_text" and "NUL" in error["message"], (path, params)
        for path, body in [
            (f"/api/conversations/{cid}%00/turns/", {"input": "help"}),
            (f"/api/selections/{sid}%00/reply/", {"answer": "x"}),
        ]:
            assert error_of(client.post(path, json=body), 400)["code"] == "invalid_text"
        crowded = client.get("/api/conversations/?" + "a=1&" * 1001)
        assert error_of(crowded, 400)["code"] == "too_many_parameters"
        assert scene.stored(client) == before


def test_nul_in_a_page_url_is_the_400_page(server, people, scene):
    client = log_in(server, "alice")
    try:
        for path, params in [
            ("/", {"q": "pla\x00ns"}),
            (f"/conversations/{scene.cid}%00/", {}),
            ("/waiting/", {"x": "\x00"}),
        ]:
            response = client.get(path, params=params)
            assert response.status_code == 400, (path, response.text[:200])
            assert "text/html" in response.headers["content-type"]
            assert "Parley could not understand that request" in response.text
        assert client.get("/", params={"q": "plans"}).status_code == 200
    finally:
        client.close()


def test_nul_in_the_new_conversation_form_is_refused_on_the_page(server, people):
    client = log_in(server, "alice")
    try:
        home = client.get("/")
        token = client.cookies["csrftoken"]
        for form in (
            {"workspace": "team", "title": "Pla\x00ns"},
            {"workspace": "te\x00am", "title": "Plans"},
            {"workspace": "team", "title": "Plans", "agent": "builtin\x00"},
        ):
            response = client.post(
                "/conversations/new/",
                data={**form, "csrfmiddlewaretoken": token},
                headers={"Referer": f"{server.url}/"},
            )
            assert response.status_code == 302 and response.headers["location"] == "/"
            page = client.get("/")
            assert "NUL character" in page.text, form
        assert home.status_code == 200
    finally:
        client.close()
    with server.client(people.alice) as api:
        assert api.get("/api/conversations/").json()["count"] == 0

"""Nothing a client sends over a socket can hurt Parley: each bad frame gets a ws.error with its
code and the socket stays open, nothing stored changes, no consumer crashes, no watcher is left
behind; a frame over Daphne's limit closes the socket with 1009, a client that vanishes
mid-handshake leaves nothing, and the Origin check is Django's CSRF rule. All through a real
Daphne."""

import asyncio
import json
import struct
import subprocess
from dataclasses import dataclass

import pytest
import websockets

from conversations.models import Watcher
from tests.conftest import all_events, receive_json
from tests.helpers import ask, client_frame, create_conversation, handshake, start, wait_pending

FORM = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "count": {"type": "number"}},
    "required": ["title"],
}


@dataclass
class Scene:
    """A conversation whose turn waits on a text question, and one whose turn waits on a form."""

    text_cid: str
    text_tid: str
    text_sid: str
    form_cid: str
    form_sid: str

    def stored(self, client) -> dict:
        """Everything a refused frame must leave as it was."""
        return {
            cid: {
                "events": all_events(client, cid),
                "in_flight": client.get(f"/api/conversations/{cid}/in-flight/").json(),
            }
            for cid in (self.text_cid, self.form_cid)
        }


@pytest.fixture
def scene(server, people) -> Scene:
    with server.client(people.alice) as client:
        text_cid = create_conversation(client, title="Text")
        text_tid = start(client, text_cid, [ask(kind="text"), {"say": "done"}])
        text_sid = wait_pending(client, text_cid)["id"]
        form_cid = create_conversation(client, title="Form")
        start(client, form_cid, [ask(kind="form", schema=FORM), {"say": "done"}])
        form_sid = wait_pending(client, form_cid)["id"]
    return Scene(text_cid, text_tid, text_sid, form_cid, form_sid)


async def eventually(condition, what: str, timeout: float = 30) -> None:
    """Poll an async ``condition`` until it holds, for up to ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def watchers_gone() -> None:
    """Every socket's watcher row is removed once it has closed."""

    async def none_left():
        return await Watcher.objects.acount() == 0

    await eventually(none_left, "every watcher row to be removed")


def assert_no_crash(server) -> None:
    log = server.log_text()
    assert "Exception inside application" not in log, log
    assert " ERROR " not in log, log


def bad_frames(s: Scene) -> list[tuple[str, str | bytes, str, str | None]]:
    """(the conversation, the frame, the ws.error code, the ref it carries back)."""
    deep_array = '{"type": "resume", "ref": "a", "x": ' + "[" * 2000 + "]" * 2000 + "}"
    deep_object = '{"x": ' * 2000 + "1" + "}" * 2000
    just_too_deep = '{"type": "resume", "x": ' + "[" * 32 + "]" * 32 + "}"
    digits = "9" * 5000
    text, form = s.text_cid, s.form_cid

    def frame(**fields) -> str:
        return json.dumps(fields)

    def reply(sid: str, answer: str) -> str:
        return (
            '{"type": "selection.reply", "ref": "r", "selection_id": "'
            + sid
            + '", "answer": '
            + answer
            + "}"
        )

    return [
        # Nested past any depth Python's decoder survives, and just past the gate's limit.
        (text, deep_array, "too_deep", None),
        (text, deep_object, "too_deep", None),
        (text, just_too_deep, "too_deep", None),
        # Numbers: 5,000 digits as a string and as a number; not JSON numbers at all.
        (
            text,
            '{"type": "resume", "ref": "n1", "from_seq": "' + digits + '"}',
            "invalid_from_seq",
            "n1",
        ),
        (
            text,
            '{"type": "resume", "ref": "n2", "from_seq": ' + digits + "}",
            "invalid_number",
            None,
        ),
        (form, reply(s.form_sid, '{"title": "x", "count": NaN}'), "invalid_number", None),
        (form, reply(s.form_sid, '{"title": "x", "count": Infinity}'), "invalid_number", None),
        (form, reply(s.form_sid, '{"title": "x", "count": -Infinity}'), "invalid_number", None),
        (form, reply(s.form_sid, '{"title": "x", "count": 1e999}'), "invalid_number", None),
        # Text no database stores: lone surrogates and NUL, in values and in keys.
        (text, '{"type": "turn.start", "ref": "u1", "input": "\\ud800"}', "invalid_text", None),
        (text, reply("\\ud800", '"fine"'), "invalid_text", None),
        (text, reply(s.text_sid, '"\\udfff and more"'), "invalid_text", None),
        (form, reply(s.form_sid, '{"title": "\\ud83d"}'), "invalid_text", None),
        (text, '{"type": "turn.start", "input": "a\\u0000b"}', "invalid_text", None),
        (text, reply(s.text_sid, '"nul \\u0000 here"'), "invalid_text", None),
        (text, '{"type": "resume", "\\udc00": 1}', "invalid_text", None),
        # Loose types: each field is the JSON type it is documented as, or refused.
        (text, frame(type="turn.start", ref="t1", input="hi", interactive="true"), "invalid", "t1"),
        (text, frame(type="turn.start", ref="t2", input="hi", confirm_writes=1), "invalid", "t2"),
        (text, frame(type="turn.start", ref="t3", input="hi", interactive=None), "invalid", "t3"),
        (text, frame(type="turn.start", ref="t4", input=5), "invalid", "t4"),
        (text, frame(type="turn.start", ref="t5", input=["help"]), "invalid", "t5"),
        (text, frame(type="turn.start", ref="t6"), "invalid", "t6"),
        (text, frame(type="turn.steer", ref="s1", expected_turn_id=5, input="x"), "invalid", "s1"),
        (
            text,
            frame(type="turn.steer", ref="s2", expected_turn_id="t" * 65, input="x"),
            "invalid",
            "s2",
        ),
        (
            text,
            frame(type="turn.steer", ref="s3", expected_turn_id=s.text_tid, input={}),
            "invalid",
            "s3",
        ),
        (text, frame(type="turn.cancel", ref="c1", turn_id=None), "invalid", "c1"),
        (text, frame(type="turn.cancel", ref="c2", turn_id=[s.text_tid]), "invalid", "c2"),
        (text, frame(type="turn.cancel", ref="c3", turn_id=""), "invalid", "c3"),
        (
            text,
            frame(type="selection.reply", ref="q1", selection_id=7, answer="x"),
            "invalid",
            "q1",
        ),
        (
            text,
            frame(type="selection.reply", ref="q2", selection_id=s.text_sid, action=[1]),
            "invalid",
            "q2",
        ),
        (
            text,
            frame(type="selection.reply", ref="q3", selection_id=s.text_sid, action={"a": 1}),
            "invalid",
            "q3",
        ),
        (
            text,
            frame(type="selection.reply", ref="q4", selection_id=s.text_sid, action="explode"),
            "invalid",
            "q4",
        ),
        (
            text,
            frame(
                type="selection.reply",
                ref="q5",
                selection_id=s.text_sid,
                answer="x",
                action="dismiss",
            ),
            "invalid",
            "q5",
        ),
        (text, frame(type="selection.reply", ref="q6", selection_id=s.text_sid), "invalid", "q6"),
        (text, frame(type="resume", ref="r1", from_seq="1"), "invalid_from_seq", "r1"),
        (text, frame(type="resume", ref="r2", from_seq=True), "invalid_from_seq", "r2"),
        (text, frame(type="resume", ref="r3", from_seq=1.5), "invalid_from_seq", "r3"),
        (text, frame(type="resume", ref="r4", from_seq=2**63), "invalid_from_seq", "r4"),
        (text, frame(type="resume", ref="r5"), "invalid_from_seq", "r5"),
        # The frame itself.
        (text, frame(type="resume", ref=True, from_seq=0), "invalid_frame", None),
        (text, frame(type="resume", ref=1.5, from_seq=0), "invalid_frame", None),
        (text, frame(type="resume", ref="x" * 101, from_seq=0), "invalid_frame", None),
        (text, frame(type="x" * 10_000, ref="k"), "unknown_type", "k"),
        (text, "", "invalid_json", None),
        (text, '{"type": "resume", "from_seq": 0', "invalid_json", None),
        (text, b"\xff\xfe not even UTF-8", "invalid_frame", None),
        (text, frame(type="turn.start", ref="big", input="x" * 70_000), "frame_too_large", None),
    ]


async def test_every_bad_frame_is_answered_and_the_socket_stays_open(server, people, scene):
    with server.client(people.alice) as client:
        before = scene.stored(client)
    # Each socket starts at the end: nothing is replayed, and the turns wait on their questions.
    latest = {cid: stored["events"][-1]["seq"] for cid, stored in before.items()}
    for cid, frame, code, ref in bad_frames(scene):
        async with server.connect(cid, people.bob, from_seq=latest[cid]) as ws:
            ready = await receive_json(ws)
            assert ready["type"] == "ws.ready"
            await ws.send(frame)
            error = await receive_json(ws, timeout=30)
            assert error["type"] == "ws.error", (frame[:60], error)
            assert (error["code"], error["ref"]) == (code, ref), (frame[:60], error)
            assert error["message"] and len(error["message"]) < 300
            # Still open, and still working: a good frame is acked.
            await ws.send(
                json.dumps({"type": "resume", "ref": "ok", "from_seq": ready["latest_seq"]})
            )
            ack = await receive_json(ws, timeout=30)
            assert (ack["type"], ack["ref"]) == ("ws.ack", "ok"), (frame[:60], ack)
    with server.client(people.alice) as client:
        assert scene.stored(client) == before
        assert client.get(f"/api/selections/{scene.text_sid}/").json()["status"] == "pending"
    await watchers_gone()
    # And what was refused is accepted once it is right.
    async with server.connect(scene.text_cid, people.bob) as ws:
        await receive_json(ws)
        await ws.send(
            json.dumps(
                {
                    "type": "selection.reply",
                    "ref": "yes",
                    "selection_id": scene.text_sid,
                    "answer": "Fine",
                }
            )
        )
        while (ack := await receive_json(ws, timeout=30))["type"] != "ws.ack":
            assert ack["type"] != "ws.error", ack
        assert ack["ref"] == "yes" and ack["status"] == "answered"
    await watchers_gone()
    assert_no_crash(server)


async def test_the_person_socket_answers_anything_with_read_only(server, people):
    url = f"ws://127.0.0.1:{server.port}/ws/me/"
    frames = ["", "[" * 3000, b"\x00\xff", '"\\ud800"', '{"type": 1e999}', "x" * 70_000, "{}"]
    async with websockets.connect(url, additional_headers=people.bob.headers, max_size=2**24) as ws:
        assert (await receive_json(ws))["type"] == "waiting"
        for frame in frames:
            await ws.send(frame)
            error = await receive_json(ws, timeout=30)
            assert (error["type"], error["code"]) == ("ws.error", "read_only"), (frame[:20], error)
    assert_no_crash(server)


async def closing(ws) -> websockets.ConnectionClosed:
    """How the server closes the socket (the frames before are skipped)."""
    try:
        while True:
            await receive_json(ws, timeout=30)
    except websockets.ConnectionClosed as closed:
        return closed


async def test_a_frame_over_daphnes_limit_closes_the_socket_with_1009(server, people, conversation):
    async with server.connect(conversation.pk, people.bob) as ws:
        await receive_json(ws)
        await ws.send(json.dumps({"type": "turn.start", "input": "x" * (1024 * 1024)}))
        closed = await closing(ws)
    assert closed.rcvd is not None, "the connection was dropped without a close frame"
    assert closed.rcvd.code == 1009
    url = f"ws://127.0.0.1:{server.port}/ws/me/"
    async with websockets.connect(url, additional_headers=people.bob.headers) as ws:
        await receive_json(ws)
        await ws.send("[" * (1024 * 1024 + 1))
        closed = await closing(ws)
    assert closed.rcvd is not None and closed.rcvd.code == 1009
    await watchers_gone()
    # The server goes on as before.
    async with server.connect(conversation.pk, people.bob) as ws:
        assert (await receive_json(ws))["type"] == "ws.ready"
    await watchers_gone()
    assert_no_crash(server)


async def _vanish(port: int, path: str, token: str, how: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(handshake(path, token))
    if how == 1:  # a frame, then a close frame, in the same breath as the handshake
        writer.write(client_frame(0x1, b'{"type": "resume", "from_seq": 0}'))
        writer.write(client_frame(0x8, struct.pack("!H", 1000)))
    await writer.drain()
    if how == 2:  # once the server has accepted
        await reader.readuntil(b"\r\n\r\n")
    if how == 3:  # a close frame once accepted, then gone at once
        await reader.readuntil(b"\r\n\r\n")
        writer.write(client_frame(0x8, struct.pack("!H", 1001)))
    if how % 2:
        writer.transport.abort()  # a reset, not a goodbye
    else:
        writer.close()


async def test_clients_that_vanish_mid_handshake_leave_nothing(server, people, conversation):
    paths = [f"/ws/conversations/{conversation.pk}/", "/ws/me/"]
    for _ in range(3):
        await asyncio.gather(
            *(
                _vanish(server.port, path, people.bob.token, how)
                for path in paths
                for how in range(4)
                for _ in range(4)
            )
        )
    # A socket whose client closes right after the handshake, before reading anything.
    for _ in range(10):
        ws = await server.connect(conversation.pk, people.bob)
        await ws.close()
    await watchers_gone()
    # And the live metric agrees: no conversation socket is counted as open.
    async with server.async_client() as client:

        async def none_counted():
            return "parley_sockets_open 0.0" in (await client.get("/metrics")).text

        await eventually(none_counted, "parley_sockets_open to be 0")
    assert_no_crash(server)


# The Origin check: scheme, host and port of an allowed origin, exactly.


async def _origin_outcome(url: str, headers: dict, origin: str | None) -> str:
    try:
        async with websockets.connect(
            url, origin=origin, additional_headers=headers, open_timeout=20
        ) as ws:
            return (await receive_json(ws))["type"]
    except websockets.InvalidStatus as refused:
        return str(refused.response.status_code)


# (an Origin, what the handshake gets: the socket's first frame, or the refusal's status)
ORIGINS = [
    (None, "ready"),  # not a browser: a token alone, as before
    ("http://127.0.0.1:{port}", "ready"),
    ("http://127.0.0.1:9999", "403"),
    ("https://127.0.0.1:{port}", "403"),
    ("ws://127.0.0.1:{port}", "403"),
    ("http://127.0.0.1", "403"),
    ("http://localhost:{port}", "403"),
    ("https://localhost", "403"),
    ("http://evil.example", "403"),
    ("null", "403"),
    # Not an origin at all: Daphne's WebSocket library refuses it before Parley sees it.
    ("http://127.0.0.1:{port}.evil.example", "400"),
]


async def test_the_socket_origin_must_match_exactly(server, people, conversation):
    sockets = {
        "ws.ready": server.ws_url(conversation.pk),
        "waiting": f"ws://127.0.0.1:{server.port}/ws/me/",
    }
    for origin, outcome in ORIGINS:
        origin = origin and origin.format(port=server.port)
        for first_frame, url in sockets.items():
            expected = first_frame if outcome == "ready" else outcome
            assert await _origin_outcome(url, people.bob.headers, origin) == expected, origin


async def test_a_forwarded_scheme_counts_only_behind_daphnes_proxy_headers(
    make_server, server, people, conversation, monkeypatch
):
    # As a proxy that ends TLS sends them (Daphne reads the scheme only along with the address).
    forwarded = {
        **people.bob.headers,
        "X-Forwarded-For": "203.0.113.9",
        "X-Forwarded-Proto": "https",
    }

    def outcome(live, origin):
        return _origin_outcome(live.ws_url(conversation.pk), forwarded, origin.format(live.port))

    # Daphne started plainly ignores the header, as Django's CSRF check then does.
    assert await outcome(server, "https://127.0.0.1:{}") == "403"
    assert await outcome(server, "http://127.0.0.1:{}") == "ws.ready"
    # Started with --proxy-headers, the socket is https as a request would be.
    popen = subprocess.Popen

    def with_proxy_headers(args, **kwargs):
        return popen([*args[:-1], "--proxy-headers", args[-1]], **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(subprocess, "Popen", with_proxy_headers)
        proxied = make_server()
    assert await outcome(proxied, "https://127.0.0.1:{}") == "ws.ready"
    assert await outcome(proxied, "http://127.0.0.1:{}") == "403"


async def test_trusted_origins_and_allowed_hosts(make_server, people, conversation):
    live = make_server(
        ALLOWED_HOSTS="localhost",
        CSRF_TRUSTED_ORIGINS="https://parley.example,https://*.team.example",
        # Host 127.0.0.1 is refused (the server's readiness probe is one such request).
        allow_errors_from=("django.security.DisallowedHost",),
    )
    path = f"/ws/conversations/{conversation.pk}/"
    by_name = f"ws://localhost:{live.port}{path}"
    by_address = f"ws://127.0.0.1:{live.port}{path}"
    headers = people.bob.headers
    for origin, outcome in [
        ("https://parley.example", "ws.ready"),
        ("https://app.team.example", "ws.ready"),
        (f"http://localhost:{live.port}", "ws.ready"),
        ("http://parley.example", "403"),
        ("https://parley.example:8443", "403"),
        ("http://app.team.example", "403"),
        ("https://team.example.evil", "403"),
    ]:
        assert await _origin_outcome(by_name, headers, origin) == outcome, origin
    # A Host that is not one of ALLOWED_HOSTS: no browser's socket, whatever its Origin.
    assert await _origin_outcome(by_address, headers, "https://parley.example") == "403"
    assert await _origin_outcome(by_address, headers, f"http://127.0.0.1:{live.port}") == "403"
    # A client that is not a browser still connects with its token alone.
    assert await _origin_outcome(by_address, headers, None) == "ws.ready"

"""Plain helpers the test modules share (their fixtures live in the conftest.py files)."""

import asyncio
import contextlib
import ctypes
import html
import json
import os
import re
import socket
import threading
import time
from contextlib import contextmanager
from datetime import timedelta

import httpx
import httpx_sse
import pytest
import websockets
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from conversations import services
from conversations.models import Membership, Turn
from core.people import person
from selection.models import Selection
from tests.conftest import all_events, log_in, receive_json, wait_for_turn_end

# Conversations, turns and questions, over a live server's REST API -------------------------------


def create_conversation(client, agent="scripted", title="Questions") -> str:
    response = client.post(
        "/api/conversations/", json={"workspace": "team", "title": title, "agent": agent}
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def start(client, cid, steps_or_text, interactive=True) -> str:
    text = steps_or_text if isinstance(steps_or_text, str) else json.dumps(steps_or_text)
    response = client.post(
        f"/api/conversations/{cid}/turns/", json={"input": text, "interactive": interactive}
    )
    assert response.status_code == 202, response.text
    return response.json()["turn"]


def wait_pending(client, cid, timeout=15) -> dict:
    """The conversation's pending question, once the turn has asked it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = client.get(f"/api/conversations/{cid}/in-flight/").json()["pending_selections"]
        if pending:
            return pending[0]
        time.sleep(0.02)
    raise AssertionError("no question was asked")


def reply(client, selection_id, **body):
    return client.post(f"/api/selections/{selection_id}/reply/", json=body)


def outcomes(events) -> list[dict]:
    """What the scripted agent said of each question, in order."""
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    return [json.loads(text) for text in said if text.startswith('{"status"')]


def ask(**spec) -> dict:
    return {"ask": {"prompt": "Well?", **spec}}


KINDS = [
    # (question, a refused answer and what the refusal says, a good answer, what the agent gets)
    (
        ask(kind="path", mode="file", root="notes"),
        ("../README.md", "may not contain '..'"),
        "ideas.md",
        "ideas.md",
    ),
    (
        ask(kind="path", mode="folder"),
        ("README.md", "asks for a folder"),
        "reports",
        "reports",
    ),
    (
        ask(kind="choice", options=["red", "green", "blue"]),
        ("purple", "not one of the options"),
        "green",
        "green",
    ),
    (
        ask(kind="choice", options=["a", "b", "c"], multiple=True, max_choices=2),
        (["a", "b", "c"], "choose from 1 to 2"),
        ["c", "a"],
        ["c", "a"],
    ),
    (ask(kind="text"), ("   ", "some text is required"), " Hello there ", "Hello there"),
    (ask(kind="confirm"), ("yes", "true or false"), False, False),
    (
        ask(
            kind="form",
            schema={
                "type": "object",
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "count": {"type": "integer", "minimum": 1},
                },
                "required": ["title"],
            },
        ),
        ({"count": 0}, "'title' is a required property"),
        {"title": "Plan", "count": 3},
        {"title": "Plan", "count": 3},
    ),
]

# One question of each kind: path, choice, text, confirm, form.
ONE_OF_EACH_KIND = [KINDS[i] for i in (0, 2, 4, 5, 6)]


def finished(client, cid, timeout=30) -> list[dict]:
    wait_for_turn_end(client, cid, timeout=timeout)
    return all_events(client, cid)


def of_type(events, kind) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def streamed_text(events: list[dict]) -> str:
    return "".join(e["data"]["text"] for e in events if e["type"] == "message.delta")


# Streams and tails: every event once, in order ---------------------------------------------------


def assert_contiguous(events, first: int, last: int | None = None):
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(first, first + len(seqs))), f"gap or duplicate near {seqs[:5]}"
    if last is not None:
        assert seqs and seqs[-1] == last, (seqs[-1:], last)


async def astart_turn(client, conversation_id, text, **extra):
    response = await client.post(
        f"/api/conversations/{conversation_id}/turns/", json={"input": text, **extra}
    )
    assert response.status_code == 202, response.text
    return response.json()


def read_tail(client, cid, **kwargs):
    """Read a whole tail: the events and the final done event."""
    events, done = [], None
    with httpx_sse.connect_sse(client, "GET", f"/api/conversations/{cid}/tail/", **kwargs) as sse:
        assert sse.response.status_code == 200
        assert sse.response.headers["content-type"].startswith("text/event-stream")
        for message in sse.iter_sse():
            if message.event == "done":
                done = json.loads(message.data)
                break
            event = json.loads(message.data)
            assert message.id == str(event["seq"])
            events.append(event)
    return events, done


TERMINAL = ("turn.completed", "turn.failed", "turn.cancelled")


def assert_one_terminal_last(events):
    types = [e["type"] for e in events if e["turn"] == events[-1]["turn"]]
    assert sum(t in TERMINAL for t in types) == 1 and types[-1] in TERMINAL, types


def assert_whole(events) -> None:
    """Numbered with no gap, one terminal event, last, and no tool call reported twice."""
    assert_contiguous(events, events[0]["seq"], events[-1]["seq"])
    assert_one_terminal_last(events)
    for kind in ("tool.started", "tool.completed"):
        ids = [e["data"]["id"] for e in events if e["type"] == kind]
        assert len(ids) == len(set(ids)), kind


# The socket through Channels' communicator (the ASGI app in this process) ------------------------


def communicator(conversation_id, person=None, query="", headers=None, app=None):
    if app is None:
        # Imported when first used: loading the ASGI app (and Daphne's set-up with it) is not
        # every module's business.
        from config.asgi import application as app
    headers = list(headers or [])
    if person is not None:
        headers.append((b"authorization", f"Token {person.token}".encode()))
    path = f"/ws/conversations/{conversation_id}/" + (f"?{query}" if query else "")
    return WebsocketCommunicator(app, path, headers=headers)


async def communicator_events_until_terminal(comm, timeout=30):
    events = []
    while True:
        frame = await comm.receive_json_from(timeout=timeout)
        if "seq" in frame:
            events.append(frame)
            if frame["type"] in ("turn.completed", "turn.failed", "turn.cancelled"):
                return events


# The admin, as an admin's browser drives it ------------------------------------------------------


def admin_of(server, people) -> httpx.Client:
    """Alice, made a superuser, logged in to the admin of the live server."""
    people.alice.user.is_staff = people.alice.user.is_superuser = True
    people.alice.user.save()
    return log_in(server, "alice", "/admin/login/")


def post_form(client, path, data):
    page = client.get(path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return client.post(
        path,
        data={**data, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{client.base_url}{path}"},
    )


def answer_in_admin(admin, sid, action="answer", **fields):
    """Send the admin's answer form: ``fields`` by name (``path="notes/ideas.md"``)."""
    data = {f"answer-{name}": value for name, value in fields.items()}
    return post_form(admin, f"/admin/selection/selection/{sid}/answer/", {"action": action, **data})


def run_admin_action(admin, model_path, action, ids):
    return post_form(admin, model_path, {"action": action, "_selected_action": ids, "index": "0"})


def shown(page) -> str:
    """A page's text as a person reads it (entities decoded)."""
    return html.unescape(page.text)


def message_after(admin, response) -> str:
    """The admin's message on the page a POST redirected to."""
    assert response.status_code == 302, response.text
    page = shown(admin.get(response.headers["Location"]))
    return re.search(r'<ul class="messagelist">\s*<li class="\w+">([^<]*)</li>', page).group(1)


# Access followed live: memberships changed in the admin, sockets and tails closed ----------------

MEMBERSHIPS = "/admin/conversations/membership/"
# Generous: a change made outside the server is seen at its next upkeep (a few seconds).
CEILING = 60


# The test's own database work, from its async tests: in a thread, whose connection is closed
# after (the test database cannot be dropped while one is open).


@sync_to_async
def deactivate(person) -> int:
    # An update: no model signal, so only the server's upkeep can notice.
    try:
        return get_user_model().objects.filter(pk=person.user.pk).update(is_active=False)
    finally:
        connection.close()


@sync_to_async
def membership_of(person, workspace) -> int:
    try:
        return Membership.objects.get(user=person.user, workspace=workspace).pk
    finally:
        connection.close()


@sync_to_async
def admin_client(server, people):
    try:
        return admin_of(server, people)
    finally:
        connection.close()


def parked_conversation(server, people) -> tuple[str, dict]:
    """A conversation of bob's whose turn waits on a question (so a tail follows it)."""
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [{"say": "Before. "}, ask(kind="text"), {"say": "After."}])
        return cid, wait_pending(client, cid)


async def ready(ws) -> dict:
    frame = await receive_json(ws, timeout=CEILING)
    while frame["type"] != "ws.ready":
        frame = await receive_json(ws, timeout=CEILING)
    return frame


async def closed_with(ws) -> int:
    """Read the socket until the server closes it; its close code."""
    with pytest.raises(websockets.ConnectionClosed) as closed:
        async with asyncio.timeout(CEILING):
            while True:
                await ws.recv()
    return closed.value.rcvd.code


async def close_reading_on(ws, code: int = 1000) -> int:
    """Close a socket as RFC 6455 asks of the side that closes first: send the close, then read
    on, dropping what still comes, until the server's close arrives; the code it answered with.

    websockets' own ``close()`` does not read on: once ``max_queue`` frames (16) wait unread it
    stops reading from the network, so it never sees the server's close frame behind them, and
    after ``close_timeout`` (10 s) it drops the connection and reports 1006 (the socket fuzzer
    saw this with a replay still coming when it closed)."""

    async def drop_the_rest():
        try:
            async for _ in ws:
                pass
        except websockets.ConnectionClosed:
            pass

    reading = asyncio.ensure_future(drop_the_rest())
    try:
        async with asyncio.timeout(CEILING):
            await ws.close(code)
            await reading
    finally:
        reading.cancel()
    return ws.close_code


# A socket spoken to byte by byte, as no library would (nothing read until the test reads it)


def handshake(path: str, token: str) -> bytes:
    """A socket's opening handshake, with a token."""
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Token {token}\r\n\r\n"
    ).encode()


def client_frame(opcode: int, payload: bytes) -> bytes:
    """A masked frame, as a client sends it (payloads under 126 bytes)."""
    mask = os.urandom(4)
    body = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + body


def server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """The (opcode, payload) of each whole frame a server sent (unmasked, unfragmented)."""
    frames, at = [], 0
    while at + 2 <= len(data):
        opcode, size, start = data[at] & 0x0F, data[at + 1] & 0x7F, at + 2
        if size == 126:
            size, start = int.from_bytes(data[start : start + 2], "big"), start + 2
        elif size == 127:
            size, start = int.from_bytes(data[start : start + 8], "big"), start + 8
        if start + size > len(data):
            break
        frames.append((opcode, data[start : start + size]))
        at = start + size
    return frames


async def tail_lines(server, person, cid, into: list[str]) -> None:
    """Read a tail until it ends, keeping its lines."""
    async with server.async_client(person) as client:
        path = f"/api/conversations/{cid}/tail/"
        async with client.stream("GET", path, timeout=CEILING) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                into.append(line)


def sse_events(lines: list[str]) -> list[tuple[str, dict]]:
    """The (event, data) of each SSE event read ("message" when unnamed)."""
    events, name = [], "message"
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, json.loads(line.removeprefix("data: "))))
            name = "message"
    return events


def stalled_tail(server, person, cid, from_seq: int, receive_buffer: int = 16 * 1024):
    """A tail opened over raw TCP whose client reads nothing (its kernel buffer takes
    ``receive_buffer``), asking the server to close the connection when the response ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(
        (
            f"GET /api/conversations/{cid}/tail/?from_seq={from_seq} HTTP/1.1\r\n"
            f"Host: 127.0.0.1\r\nAuthorization: Token {person.token}\r\n"
            "Accept: text/event-stream\r\nConnection: close\r\n\r\n"
        ).encode()
    )
    return sock


def read_to_end(sock, timeout: float = CEILING) -> bytes:
    """Everything the server sends on ``sock`` until it closes the connection."""
    sock.settimeout(timeout)
    received = bytearray()
    with sock:
        while chunk := sock.recv(1 << 20):
            received += chunk
    return bytes(received)


def raw_sse(raw: bytes) -> tuple[int, list[dict]]:
    """The status of a raw HTTP/1.1 response and its SSE events (``id``, ``event``, ``data``),
    its chunked body decoded; an event cut short by the end of the stream is left out, as SSE
    clients do."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    data = bytearray()
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        data += body[:size]
        body = body[size + 2 :]
    events = []
    for block in data.decode().split("\n\n")[:-1]:
        event = {"event": "message"}
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            if name in ("id", "event", "data"):
                event[name] = value
        if "data" in event:
            events.append({**event, "data": json.loads(event["data"])})
    return status, events


# The agent backed by a model (tests/llm_server.py speaking the OpenAI protocol) ------------------


def create_model_conversation(client, **extra) -> str:
    response = client.post(
        "/api/conversations/",
        json={"workspace": "team", "title": "With a model", "agent": "openai", **extra},
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def start_model_turn(client, cid, text="Hello", **options) -> str:
    response = client.post(f"/api/conversations/{cid}/turns/", json={"input": text, **options})
    assert response.status_code == 202, response.text
    return response.json()["turn"]


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def last_tool_result(request: dict):
    return json.loads(tool_messages(request)[-1]["content"])


# Outside agents over MCP: the team answering over REST (async) -----------------------------------

CHOICE = {
    "kind": "choice",
    "prompt": "Which database?",
    "options": [
        {"label": "SQLite", "value": "sqlite"},
        {"label": "PostgreSQL", "value": "pg", "description": "The `postgres` one"},
    ],
}


async def pending_question(rest: httpx.AsyncClient, timeout: float = 30) -> dict:
    """The oldest question the REST client may answer, once there is one."""
    async with asyncio.timeout(timeout):
        while True:
            found = (await rest.get("/api/selections/", params={"status": "pending"})).json()
            if found:
                return found[0]
            await asyncio.sleep(0.05)


async def reply_to(rest: httpx.AsyncClient, question: dict, **body) -> None:
    response = await rest.post(f"/api/selections/{question['id']}/reply/", json=body)
    assert response.status_code == 200, response.text


async def turn_events(rest: httpx.AsyncClient, cid: str, *, until_end=True, timeout=30) -> list:
    """The conversation's stored events; with ``until_end``, once its last turn has ended."""
    async with asyncio.timeout(timeout):
        while True:
            events = (await rest.get(f"/api/conversations/{cid}/events/?limit=1000")).json()
            events = events["events"]
            ended = events and events[-1]["type"] in (
                "turn.completed",
                "turn.failed",
                "turn.cancelled",
            )
            if ended or not until_end:
                return events
            await asyncio.sleep(0.05)


class ClientProgram:
    """A client program Parley did not write, run as a subprocess against a live server (Node, or
    Python in another virtualenv): what it prints, a line at a time, each wait bounded; where it
    waits for the test (to answer a question first), a line written to its stdin."""

    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self.said: list[str] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def run(cls, *command: str, env: dict, timeout: float = 120):
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=settings.BASE_DIR,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(timeout):
                yield cls(process)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

    async def line(self, timeout: float = 60) -> str:
        raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not raw:
            stderr = (await self.process.stderr.read()).decode()
            raise AssertionError(f"it ended, having said {self.said}; stderr: {stderr}")
        self.said.append(raw.decode().rstrip("\n"))
        return self.said[-1]

    async def event(self, name: str, timeout: float = 60) -> dict:
        """The next JSON line ``{"event": name, ...}`` it prints (a failure, if it says so)."""
        while True:
            said = json.loads(await self.line(timeout))
            assert said["event"] != "failed", said["error"]
            if said["event"] == name:
                return said

    async def tell(self, line: str) -> None:
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def finish(self, timeout: float = 60) -> tuple[list[str], str]:
        """What it prints until it exits (successfully), and its stderr."""
        out, err = await asyncio.wait_for(self.process.communicate(), timeout)
        rest = out.decode().splitlines()
        self.said += rest
        assert self.process.returncode == 0, (self.said, err.decode())
        return rest, err.decode()


# Metrics -----------------------------------------------------------------------------------------


def samples(text: str) -> dict[tuple, float]:
    """Every sample of a Prometheus text page, by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


# Reading files as their permissions say, even as root --------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
# Linux's capabilities that let root read what its permissions forbid.
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2
_PR_CAPBSET_DROP = 24
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


@contextmanager
def permissions_hold():
    """While inside, this thread reads files as their permissions say, even as root: a
    thread's capabilities are its own, and the two that pass over permissions leave its
    effective set (and come back after). Nothing to do for anyone else."""
    if os.geteuid() != 0:
        yield
        return
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    saved = data[0].effective
    data[0].effective &= ~((1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_DAC_READ_SEARCH))
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    try:
        yield
    finally:
        data[0].effective = saved
        _check(_libc.capset(ctypes.byref(header), data), "capset")


def in_thread(fn, timeout: float = 30):
    """``fn()`` in a thread of its own, where permissions hold; it must end within
    ``timeout`` seconds (a pipe opened for reading would wait for a writer forever)."""
    outcome = {}

    def run():
        try:
            with permissions_hold():
                outcome["value"] = fn()
        except BaseException as exc:  # handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{fn} did not end in {timeout} s (it waited on a pipe?)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def start_honoring_permissions(make_server, **env):
    """A real Daphne that reads files as their permissions say even when the tests run as
    root: started from a thread whose capability bounding set (a per-thread set, inherited by
    the process it starts and all it runs) has lost the two that pass over permissions."""
    if os.geteuid() != 0:
        return make_server(**env)

    def start():
        for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
            _check(_libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0), "prctl")
        return make_server(**env)

    outcome = {}

    def run():
        try:
            outcome["server"] = start()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["server"]


def server_paths() -> list[str]:
    """The server's own paths, which no answer, event or message may show."""
    scratch = os.environ["PARLEY_TEST_DIR"]
    return sorted({scratch, os.path.realpath(scratch), str(settings.BASE_DIR)})


# Turns stored as they ended, for the pages to show (browser) -------------------------------------


def stored_turn(conversation, user, input: str) -> Turn:
    """A turn that already ended: only its stored events tell its story (nothing runs it)."""
    return Turn.objects.create(
        conversation=conversation,
        input=input,
        started_by=user,
        status=Turn.Status.COMPLETED,
        ended_at=timezone.now(),
    )


def store(turn: Turn, events: list[tuple[str, dict]]) -> None:
    with transaction.atomic():
        services.append_events(conversation_id=turn.conversation_id, turn_id=turn.pk, events=events)


def started(turn: Turn) -> tuple[str, dict]:
    data = {"input": turn.input, "started_by": person(turn.started_by), "interactive": True}
    return ("turn.started", data)


def message_events(text: str) -> list[tuple[str, dict]]:
    return [("message.delta", {"text": text}), ("message.completed", {"text": text})]


def waiting_question(turn: Turn, ordinal: int, prompt: str) -> Selection:
    """A text question left pending in a stored turn (for "Waiting for you"), due in an hour,
    with its selection.requested event (as selection_request stores it)."""
    selection = Selection.objects.create(
        conversation_id=turn.conversation_id,
        turn=turn,
        ordinal=ordinal,
        kind=Selection.Kind.TEXT,
        prompt=prompt,
        expires_at=timezone.now() + timedelta(hours=1),
    )
    store(turn, [("selection.requested", selection.to_payload())])
    return selection


# The conversation page (browser) -----------------------------------------------------------------


def send(page, text: str) -> None:
    box = page.get_by_role("textbox", name=re.compile("Message the agent|Steer the running turn"))
    box.fill(text)
    box.press("Enter")


# Signed links -----------------------------------------------------------------------------------


def signed_in_the_past(obj, *, salt: str, hours: float) -> str:
    """What ``django.core.signing.dumps(obj, salt=salt)`` made ``hours`` ago (a link past its
    time, made as the server makes them)."""
    from django.core import signing

    class Then(signing.TimestampSigner):
        def timestamp(self):
            return signing.b62_encode(int(time.time() - hours * 3600))

    return Then(salt=salt).sign_object(obj)


def compiled_selects(monkeypatch) -> list:
    """The models of the SELECTs the ORM compiles from now on (not the writes' own compilers):
    a lookup compiled once (core.prepared) adds nothing once it has run in this thread."""
    from django.db.models.sql.compiler import SQLCompiler

    compiled = []
    as_sql = SQLCompiler.as_sql

    def counting(self, *args, **kwargs):
        if type(self) is SQLCompiler:
            compiled.append(self.query.model)
        return as_sql(self, *args, **kwargs)

    monkeypatch.setattr(SQLCompiler, "as_sql", counting)
    return compiled

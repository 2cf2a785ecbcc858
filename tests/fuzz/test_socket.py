"""A socket fuzzer: random and mutated frames of every type, over real sockets, to one live
Daphne. Every frame must be answered (a ws.ack, or a ws.error with a code, never ``internal``)
with the socket left open, except a frame over Daphne's 1 MiB limit, which closes it with 1009;
no consumer may crash (no close 1011, nothing at ERROR in the server's log); and once every
socket has closed, no watcher row is left and the server's memory is back near where it was."""

import asyncio
import json
from collections import Counter

import psutil
import pytest
import websockets
from hypothesis import given
from hypothesis import strategies as st

from conversations.models import Watcher
from tests.conftest import wait_for_turn_end, wait_until
from tests.fuzz.conftest import SCALE, budget
from tests.helpers import ask, close_reading_on, create_conversation, start, wait_pending

DAPHNE_LIMIT = 1024 * 1024
# Memory the server may keep after the fuzz beyond what it held once warmed up: its caches and
# allocator settle, a turn the fuzz started may still be parked. A leak per socket (the 100 KB
# each crashed consumer used to keep) over this many sockets would be well above it.
MEMORY_SLACK = 16 * 1024 * 1024
SOCKETS = 400

# Text, odd text included: lone surrogates (sent as JSON escapes, "\ud800", in a text frame),
# NUL and other controls, invisible and right-to-left marks, combining marks, emoji.
ODD = st.sampled_from(
    [
        *("\ud800", "\udfff", "a\udc00b", "\x00", "nul\x00", "\x1b[2J", "\u2028", "\ufeff"),
        *("\u202e", "e\u0301", "\U0001f600", "\uffff", "\U0010ffff", " ", "", "t_", "s_"),
    ]
)
PLAIN = st.text(max_size=12)
TEXT = st.one_of(
    PLAIN,
    PLAIN,
    PLAIN,
    ODD,
    st.text(st.characters(exclude_categories=()), max_size=6),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())),
)
NUMBER = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBER | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(PLAIN | TEXT, inner, max_size=3),
    max_leaves=8,
)
TYPES = ["turn.start", "turn.steer", "turn.cancel", "selection.reply", "resume"]
# Tokens spliced into a frame's text: what JSON does not allow, or Parley refuses.
TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e999",
    "9" * 41,
    "9" * 5000,
    "0." + "1" * 5000,
    '"\\ud800"',
    '"\\udfff"',
    '"\\u0000"',
    '"\\',
    "[" * 40,
    "{" * 40,
    "]",
    "}",
    ",",
    ":",
    "true",
    "null",
    '"type"',
    "\x00",
]
# Where a socket goes: the conversation sockets most often, a person's own socket too.
PLACES = ("conversation", "conversation", "waiting", "waiting", "me")


def _encode(value) -> str:
    """JSON text: as UTF-8 when it can be, else with escapes (a lone surrogate)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


# How often each sort of frame comes.
SORTS = (
    ["structured"] * 12
    + ["mutated"] * 6
    + ["deep", "deep", "number", "binary", "binary", "oversized", "over Daphne's limit"]
)


@st.composite
def frames(draw, ids: dict) -> str | bytes:
    """A frame: structured (every type, fields right or wrong), mutated, or one of the
    extremes (deep, huge numbers, binary, oversized)."""
    sort = draw(st.sampled_from(SORTS))
    if sort == "structured":
        return draw(structured(ids))
    if sort == "mutated":
        return draw(mutated(draw(structured(ids))))
    if sort == "deep":
        depth = draw(st.sampled_from([31, 32, 33, 200, 999, 1000, 1001, 5000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        inner = opener * depth + ("1" if opener != "[" else "") + closer * depth
        return '{"type": "resume", "from_seq": 0, "x": ' + inner + "}"
    if sort == "number":
        digits = draw(st.sampled_from([19, 20, 40, 41, 400, 4300, 4301, 5000]))
        number = draw(st.sampled_from(["9" * digits, "-" + "9" * digits, '"' + "9" * digits + '"']))
        return '{"type": "resume", "ref": "n", "from_seq": ' + number + "}"
    if sort == "binary":
        return draw(st.binary(max_size=64))
    if sort == "oversized":
        size = draw(st.sampled_from([64 * 1024 + 1, 100_000, 500_000]))
        return json.dumps({"type": "turn.start", "ref": "big", "input": "x" * size})
    # Over Daphne's limit: the socket is closed with 1009.
    return json.dumps({"type": "turn.start", "input": "x" * DAPHNE_LIMIT})


@st.composite
def structured(draw, ids: dict) -> str:
    kind = draw(st.sampled_from([*TYPES, "unknown"]))
    frame = {"type": draw(TEXT) if kind == "unknown" else kind}
    if draw(st.booleans()):
        frame["ref"] = draw(st.one_of(st.text(max_size=8), st.integers(), JSON))
    good = {
        "input": st.sampled_from(["help", "list", "tidy", "what?", "  "]),
        "interactive": st.booleans(),
        "confirm_writes": st.booleans(),
        "expected_turn_id": st.sampled_from(ids["turns"]),
        "turn_id": st.sampled_from(ids["turns"]),
        "selection_id": st.sampled_from(ids["selections"]),
        "answer": st.sampled_from(["Fine", "", ["a"], {"title": "x"}, True]),
        "action": st.sampled_from(["dismiss", "decline", "explode"]),
        "from_seq": st.integers(min_value=-2, max_value=40),
    }
    for name, right in good.items():
        if draw(st.integers(0, 3)) == 0:
            continue  # left out
        frame[name] = draw(right if draw(st.integers(0, 2)) else JSON)
    if draw(st.integers(0, 9)) == 0:
        frame[draw(TEXT)] = draw(JSON)  # a field nobody reads
    return _encode(frame)


@st.composite
def mutated(draw, text: str) -> str:
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        how = draw(st.integers(0, 3))
        if how == 0:
            text = text[:at]  # cut short
        elif how == 1:
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif how == 2:
            end = draw(st.integers(at, len(text)))
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[end:]
        else:
            text = text[:at] + text[at:] * 2  # repeated
    return text


class Fuzz:
    """The sockets' side: what each frame got, and every close the server sent."""

    def __init__(self, server, people, places: dict):
        self.server = server
        self.people = people
        self.places = places
        self.codes = Counter()
        self.closes = Counter()

    def url(self, place: str) -> str:
        if place == "me":
            return f"ws://127.0.0.1:{self.server.port}/ws/me/"
        return self.server.ws_url(self.places[place])

    async def exchange(self, place: str, person, sent: list) -> None:
        """Open a socket, send each frame and read its answer, close."""
        async with websockets.connect(
            self.url(place), additional_headers=person.headers, open_timeout=30, max_size=2**24
        ) as ws:
            for frame in sent:
                too_big = len(frame) > DAPHNE_LIMIT
                await ws.send(frame)
                try:
                    answer = await self.answer(ws)
                except websockets.ConnectionClosed as closed:
                    code = closed.rcvd.code if closed.rcvd else None
                    self.closes[code] += 1
                    assert too_big and code == 1009, (frame[:80], code)
                    return
                assert not too_big, "a frame over 1 MiB was read"
                if answer["type"] == "ws.error":
                    self.codes[answer["code"]] += 1
                    assert answer["code"] != "internal", (frame[:80], answer)
                    assert answer["code"] and answer["message"], answer
                else:
                    self.codes["ack"] += 1
                    assert answer["type"] == "ws.ack", (frame[:80], answer)
            # Events a resume replays may still be coming: read on until the server's close.
            code = await close_reading_on(ws)
        self.closes[code] += 1
        assert code == 1000, code

    async def answer(self, ws) -> dict:
        """The next ws.ack or ws.error (events, presence and counts on the way are skipped)."""
        async with asyncio.timeout(30):
            while True:
                frame = json.loads(await ws.recv())
                if frame["type"] in ("ws.ack", "ws.error"):
                    return frame


def _set_up(server, people) -> tuple[dict, dict]:
    """A conversation with a finished turn (the builtin agent), and one whose turn waits on a
    text question; ids to aim at (real ones and made-up ones)."""
    with server.client(people.alice) as client:
        done = create_conversation(client, agent="builtin", title="Done")
        start(client, done, "help")
        wait_for_turn_end(client, done)
        waiting = create_conversation(client, title="Waiting")
        turn = start(client, waiting, [ask(kind="text"), {"say": "thanks"}])
        selection = wait_pending(client, waiting)["id"]
    places = {"conversation": done, "waiting": waiting}
    ids = {"turns": [turn, "t_nope", "x" * 64], "selections": [selection, "s_nope", "x" * 65]}
    return places, ids


def _rss(server) -> int:
    return psutil.Process(server.process.pid).memory_info().rss


def _settled(server) -> None:
    """Every socket closed and forgotten: no watcher row, none counted as open."""
    wait_until(lambda: Watcher.objects.count() == 0, what="every watcher row to go")
    with server.client() as client:
        wait_until(
            lambda: "parley_sockets_open 0.0" in client.get("/metrics").text,
            what="parley_sockets_open to be 0",
        )


# The suite's ceiling for a test (pyproject.toml's 120 s), times the scale: `make fuzz` runs
# twenty times the sockets.
@pytest.mark.timeout(120 * SCALE)
def test_no_frame_crashes_a_socket_or_leaves_anything_behind(server, people):
    places, ids = _set_up(server, people)
    fuzz = Fuzz(server, people, places)
    person = st.sampled_from([people.bob, people.bob, people.carol])
    exchanges = st.tuples(
        st.sampled_from(PLACES), person, st.lists(frames(ids), min_size=1, max_size=6)
    )

    # Warm up: every kind of frame once on every socket, before memory is measured.
    warm_up = [
        "{}",
        "[" * 3000,
        b"\x00",
        '{"type": "resume", "ref": 1, "from_seq": 0}',
        '{"type": "turn.start", "input": "\\ud800"}',
        json.dumps({"type": "turn.start", "input": "x" * 70_000}),
    ]
    for _ in range(5):
        for place in set(PLACES):
            asyncio.run(fuzz.exchange(place, people.bob, warm_up))
    _settled(server)
    baseline = _rss(server)

    @budget(SOCKETS)
    @given(exchange=exchanges)
    def exercise(exchange):
        asyncio.run(fuzz.exchange(*exchange))

    exercise()
    _settled(server)
    grown = _rss(server) - baseline
    print(f"codes {dict(fuzz.codes)}; closes {dict(fuzz.closes)}; memory grew {grown >> 10} KiB")
    assert fuzz.closes[1011] == 0
    assert grown < MEMORY_SLACK, f"the server kept {grown >> 20} MiB more after the fuzz"
    log = server.log_text()
    assert "Exception inside application" not in log
    assert " ERROR " not in log

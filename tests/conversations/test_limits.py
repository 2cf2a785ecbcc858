"""What one person may hold open and how often they may act, through a real Daphne: past a
limit a socket is closed with 4429, a tail and a REST request are answered 429 with
Retry-After, and nothing is written; another person is not held back; a place given back (a
socket closed, a tail ended) is free again."""

import asyncio
import contextlib
import json
import socket

import pytest
import websockets
from django.test import override_settings

from conversations.models import Conversation, Turn, TurnEvent, Watcher
from core import slots
from core.throttles import rate_check
from selection.models import Selection
from tests.conftest import all_events, log_in, receive_json, wait_for_turn_end, wait_until
from tests.helpers import (
    ask,
    closed_with,
    create_conversation,
    finished,
    outcomes,
    ready,
    reply,
    samples,
    start,
    wait_pending,
)


def person_socket(server, person):
    return websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/me/", additional_headers=person.headers, open_timeout=10
    )


async def refused_socket(ws) -> dict:
    """The ws.error a socket refused for its person's limit gets, once its close is 4429."""
    error = await receive_json(ws)
    assert await closed_with(ws) == 4429
    return error


async def test_a_person_past_their_sockets_is_closed_with_4429(make_server, people, conversation):
    server = make_server(PARLEY_MAX_SOCKETS_PER_PERSON="3")
    cid = conversation.pk
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(server.connect(cid, people.alice))
        await ready(first)
        second = await stack.enter_async_context(server.connect(cid, people.alice))
        await ready(second)
        own = await stack.enter_async_context(person_socket(server, people.alice))
        assert (await receive_json(own))["type"] == "waiting"
        # A fourth, to a conversation or her own: refused, saying why.
        async with server.connect(cid, people.alice) as fourth:
            error = await refused_socket(fourth)
        assert error == {
            "type": "ws.error",
            "ref": None,
            "code": "too_many_sockets",
            "message": "You have 3 sockets open, as many as you may; close one first.",
            "retry_after": 5,
        }
        async with person_socket(server, people.alice) as fourth:
            assert (await refused_socket(fourth))["code"] == "too_many_sockets"
        # The refused conversation socket left no watcher row behind (its row is written in
        # the handshake's one trip, before its place is counted): the two open ones are all.
        for _ in range(600):
            if await Watcher.objects.filter(conversation_id=cid).acount() == 2:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the refused socket's watcher row stayed")
        # Someone else is not held back.
        async with server.connect(cid, people.bob) as bobs:
            await ready(bobs)
        # The ones she has still work.
        await first.send(json.dumps({"type": "resume", "ref": "r", "from_seq": 0}))
        assert (await receive_json(first))["type"] == "ws.ack"
        # One closed, its place is free again.
        await second.close()
        async with asyncio.timeout(30):
            while True:
                async with server.connect(cid, people.alice) as again:
                    frame = await receive_json(again)
                    if frame["type"] == "ws.ready":
                        break
                await asyncio.sleep(0.05)
    with server.client() as client:
        page = samples(client.get("/metrics").text)
    assert page[("parley_limit_refusals_total", (("limit", "sockets"),))] >= 2


async def test_a_person_past_their_tails_gets_429_and_an_ended_tail_frees_its_place(
    make_server, people
):
    server = make_server(PARLEY_MAX_TAILS_PER_PERSON="2")
    with server.client(people.alice) as alice:
        cid = create_conversation(alice)
        # A turn that waits for an answer: its tails stay open until it ends.
        start(alice, cid, [ask(kind="text"), {"say": "Done."}])
        question = wait_pending(alice, cid)
    path = f"/api/conversations/{cid}/tail/"
    async with contextlib.AsyncExitStack() as stack:
        bob = await stack.enter_async_context(server.async_client(people.bob))
        tails = []
        for _ in range(2):
            tail = await stack.enter_async_context(bob.stream("GET", path))
            assert tail.status_code == 200
            lines = tail.aiter_lines()
            assert await anext(lines) == ": connected"
            tails.append((tail, lines))
        refused = await bob.get(path)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "5"
        assert refused.json() == {
            "error": {
                "code": "too_many_tails",
                "message": "You have 2 tails open, as many as you may; close one first.",
                "retry_after": 5,
            }
        }
        # Another person tails as before.
        async with server.async_client(people.carol) as carol, carol.stream("GET", path) as hers:
            assert hers.status_code == 200
        # Bob drops one of his: its place is free again.
        await tails[0][0].aclose()
        async with asyncio.timeout(30):
            while True:
                async with bob.stream("GET", path) as again:
                    if again.status_code == 200:
                        break
                    assert again.status_code == 429
                await asyncio.sleep(0.05)
        # The turn ends: so does his other tail, which gives its place back too.
        with server.client(people.alice) as alice:
            assert reply(alice, question["id"], answer="yes").status_code == 200
        rest = [line async for line in tails[1][1]]
        assert "event: done" in rest
    # Every place is free once every tail has ended: two at once again, on a new turn.
    with server.client(people.alice) as alice:
        wait_until(lambda: samples(alice.get("/metrics").text)[("parley_tails_open", ())] == 0)
        start(alice, cid, [ask(kind="text")])
        wait_pending(alice, cid)
    async with (
        server.async_client(people.bob) as bob,
        bob.stream("GET", path) as one,
        bob.stream("GET", path) as two,
    ):
        assert one.status_code == two.status_code == 200


def _counts() -> tuple[int, int, int]:
    return Turn.objects.count(), TurnEvent.objects.count(), Conversation.objects.count()


async def _start_over_the_socket(server, person, cid: str) -> dict:
    """Send turn.start on a socket: its ws.ack or ws.error."""
    async with server.connect(cid, person) as ws:
        await ready(ws)
        frame = {"type": "turn.start", "ref": "go", "input": '[{"say": "Hi."}]'}
        await ws.send(json.dumps(frame))
        while (answer := await receive_json(ws)).get("ref") != "go":
            pass
        return answer


def test_starting_turns_past_the_rate_is_429_over_rest_and_the_socket_and_writes_nothing(
    make_server, people
):
    server = make_server(PARLEY_TURN_RATE="3/min")
    with server.client(people.alice) as alice:
        cid = create_conversation(alice)
        for _ in range(2):
            start(alice, cid, [{"say": "Hi."}])
            wait_for_turn_end(alice, cid)
        third = asyncio.run(_start_over_the_socket(server, people.alice, cid))
        assert third["type"] == "ws.ack"
        wait_for_turn_end(alice, cid)
        before = _counts()
        # The socket shares REST's count: the fourth is refused, and nothing is written.
        fourth = asyncio.run(_start_over_the_socket(server, people.alice, cid))
        assert fourth["type"] == "ws.error" and fourth["code"] == "throttled", fourth
        assert 1 <= fourth["retry_after"] <= 60
        assert "You have started too many turns; try again in" in fourth["message"]
        refused = alice.post(f"/api/conversations/{cid}/turns/", json={"input": "[]"})
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert refused.json()["error"]["code"] == "throttled"
        assert refused.json()["error"]["retry_after"] == int(refused.headers["retry-after"])
        assert _counts() == before
    # The rate is each person's own.
    with server.client(people.bob) as bob:
        start(bob, cid, [{"say": "Mine."}])
        wait_for_turn_end(bob, cid)


def test_creating_conversations_past_the_rate_is_429_and_creates_nothing(make_server, people):
    server = make_server(PARLEY_CONVERSATION_RATE="2/hour")
    with server.client(people.alice) as alice:
        create_conversation(alice)
        create_conversation(alice)
        before = _counts()
        refused = alice.post(
            "/api/conversations/", json={"workspace": "team", "title": "Third", "agent": "builtin"}
        )
        assert refused.status_code == 429
        assert 3000 < int(refused.headers["retry-after"]) <= 3600
        assert refused.json()["error"]["code"] == "throttled"
        assert "You have created too many conversations" in refused.json()["error"]["message"]
        # Listing is not limited.
        assert alice.get("/api/conversations/").status_code == 200
    # The home page's form obeys the same rate, and says so.
    browser = log_in(server, "alice")
    page = browser.get("/")
    token = browser.cookies["csrftoken"]
    created = browser.post(
        "/conversations/new/",
        data={"workspace": "team", "title": "By form", "csrfmiddlewaretoken": token},
        headers={"Referer": f"{server.url}/"},
    )
    assert created.status_code == 302 and page.status_code == 200
    assert "You have created too many conversations" in browser.get("/").text
    assert _counts() == before


@pytest.mark.timeout(180)
def test_questions_past_the_rate_are_not_asked_and_the_agent_is_told(make_server, people):
    server = make_server(PARLEY_QUESTION_RATE="2/hour")
    with server.client(people.alice) as alice:
        cid = create_conversation(alice)
        start(alice, cid, [ask(kind="text"), ask(kind="text"), ask(kind="text")])
        for answer in ("one", "two"):
            question = wait_pending(alice, cid)
            assert reply(alice, question["id"], answer=answer).status_code == 200
            wait_pending_gone(alice, question["id"])
        events = finished(alice, cid)
    said = outcomes(events)
    assert [o["status"] for o in said] == ["answered", "answered", "rate_limited"]
    # The third was never stored, announced or shown.
    assert Selection.objects.filter(conversation_id=cid).count() == 2
    assert sum(e["type"] == "selection.requested" for e in events) == 2


def wait_pending_gone(client, selection_id: str) -> None:
    """Wait until the question is settled (the next one may then be asked)."""
    wait_until(
        lambda: client.get(f"/api/selections/{selection_id}/").json()["status"] != "pending",
        what="the question to be settled",
    )


@pytest.mark.timeout(180)
def test_a_question_refused_for_the_rate_is_refused_again_when_its_turn_is_resumed(
    make_server, people
):
    # A process with a fresh count would ask it: the refusal is in the turn's journal.
    first = make_server(PARLEY_QUESTION_RATE="1/hour")
    with first.client(people.alice) as alice:
        cid = create_conversation(alice)
        start(alice, cid, [ask(kind="text"), ask(kind="text"), {"sleep": 8}, {"say": "End."}])
        question = wait_pending(alice, cid)
        assert reply(alice, question["id"], answer="one").status_code == 200
        wait_until(
            lambda: "rate_limited" in json.dumps(all_events(alice, cid)),
            what="the second question to be refused",
        )
    first.stop()  # mid-sleep: the turn is handed back, and resumed by the next process
    second = make_server(PARLEY_QUESTION_RATE="1/hour")
    with second.client(people.alice) as alice:
        events = finished(alice, cid, timeout=120)
    assert [o["status"] for o in outcomes(events)] == ["answered", "rate_limited"]
    assert [e["type"] for e in events].count("turn.resumed") == 1
    assert Selection.objects.filter(conversation_id=cid).count() == 1
    assert events[-1]["type"] == "turn.completed"


def _closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_with_redis_away_people_are_let_through_uncounted(caplog):
    away = f"redis://127.0.0.1:{_closed_port()}/0"
    cache = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": away,
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
    with override_settings(
        PARLEY_REDIS_URL=away,
        CACHES=cache,
        PARLEY_TURN_RATE="1/hour",
        PARLEY_MAX_SOCKETS_PER_PERSON=1,
    ):
        for _ in range(3):  # past the rate: not counted, not refused
            await asyncio.to_thread(rate_check, "turns", 424242)
        held = [await slots.acquire(slots.SOCKETS, 424242) for _ in range(3)]
        assert all(slot is not None for slot in held)
        for slot in held:
            await slot.release()
    assert "people's rates are not counted" in caplog.text
    assert "people's open connections are not counted" in caplog.text

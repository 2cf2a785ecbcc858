"""Streaming, replay and tailing through a real Daphne on loopback."""

import asyncio
import json
import random
import struct

from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.db import connection, transaction
from django.utils import timezone

from conversations import services
from conversations.models import Turn
from core.people import person
from tests.conftest import all_events, events_until_terminal, receive_json, wait_for_turn_end
from tests.helpers import (
    assert_contiguous,
    astart_turn,
    client_frame,
    handshake,
    read_tail,
    server_frames,
)

INTERNAL = "Something went wrong inside Parley; an admin can see the details."

TERMINAL = ("turn.completed", "turn.failed", "turn.cancelled")


def start_turn(client, conversation_id, text, **extra):
    response = client.post(
        f"/api/conversations/{conversation_id}/turns/", json={"input": text, **extra}
    )
    assert response.status_code == 202, response.text
    return response.json()


async def test_rest_start_streams_live_to_a_watching_socket(server, people, conversation):
    async with server.connect(conversation.pk, people.bob) as ws:
        ready = await receive_json(ws)
        assert ready["type"] == "ws.ready"
        assert ready["latest_seq"] == 0 and ready["in_flight"] is False
        assert ready["role"] == "member"
        async with server.async_client(people.alice) as client:
            started = await astart_turn(client, conversation.pk, "summarize README.md")
        assert started["conversation"] == conversation.pk and started["seq"] == 1
        events = await events_until_terminal(ws, started["turn"])
    assert_contiguous(events, 1)
    types = [e["type"] for e in events]
    assert types[0] == "turn.started" and types[-1] == "turn.completed"
    assert sum(t in TERMINAL for t in types) == 1
    assert events[0]["data"]["started_by"]["username"] == "alice"
    assert events[0]["data"]["interactive"] is True
    assert all(
        e["turn"] == started["turn"] and e["conversation"] == conversation.pk for e in events
    )
    tool = next(e for e in events if e["type"] == "tool.completed")
    assert tool["data"]["name"] == "summarize" and tool["data"]["result"]["lines"] == 11
    text = "".join(e["data"]["text"] for e in events if e["type"] == "message.delta")
    completed = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert completed == [text]
    assert "**README.md**: 11 lines" in text


async def test_sockets_joining_at_random_points_of_a_fast_stream_miss_nothing(
    server, people, flood_conversation
):
    """Twelve sockets join a 4,000-event stream at random moments, each from a random seq."""
    rng = random.Random(20261122)
    cid = flood_conversation.pk

    async def join_and_watch(delay: float, client):
        await asyncio.sleep(delay)
        latest = (await client.get(f"/api/conversations/{cid}/in-flight/")).json()["latest_seq"]
        from_seq = rng.randint(0, latest)
        async with server.connect(cid, people.bob, from_seq=from_seq) as ws:
            ready = await receive_json(ws)
            assert ready["type"] == "ws.ready" and ready["latest_seq"] >= from_seq
            return from_seq, await events_until_terminal(ws, timeout=60)

    async with server.async_client(people.alice) as client:
        started = await astart_turn(client, cid, "4000 events")
        watchers = [join_and_watch(rng.uniform(0, 0.6), client) for _ in range(12)]
        results = await asyncio.gather(*watchers)
        final = (await client.get(f"/api/conversations/{cid}/in-flight/")).json()["latest_seq"]
    assert final == 4002  # turn.started, 4,000 tool events, turn.completed
    joined_mid_stream = 0
    for from_seq, events in results:
        assert_contiguous(events, from_seq + 1, final)
        assert events[-1]["type"] == "turn.completed" and events[-1]["turn"] == started["turn"]
        joined_mid_stream += 0 < from_seq < final - 1
    assert joined_mid_stream >= 6


async def test_twenty_viewers_of_one_conversation_see_the_same_stream(
    server, people, flood_conversation
):
    cid = flood_conversation.pk
    sockets = [server.connect(cid, people.bob) for _ in range(20)]
    opened = [await s.__aenter__() for s in sockets]
    try:
        for ws in opened:
            assert (await receive_json(ws))["type"] == "ws.ready"
        async with server.async_client(people.alice) as client:
            await astart_turn(client, cid, "1000 events")
        streams = await asyncio.gather(*(events_until_terminal(ws) for ws in opened))
    finally:
        for s in sockets:
            await s.__aexit__(None, None, None)
    first = [(e["seq"], e["type"]) for e in streams[0]]
    assert len(first) == 1002
    assert all([(e["seq"], e["type"]) for e in stream] == first for stream in streams)


def test_tail_right_after_a_rest_start_sees_the_whole_turn(server, people, flood_conversation):
    cid = flood_conversation.pk
    with server.client(people.alice) as client:
        started = start_turn(client, cid, "3000 text")
        events, done = read_tail(client, cid, params={"from_seq": 0})
    assert_contiguous(events, 1)
    assert events[0]["type"] == "turn.started" and events[0]["turn"] == started["turn"]
    assert events[-1]["type"] == "turn.completed"
    assert done == {"latest_seq": events[-1]["seq"]}
    text = "".join(e["data"]["text"] for e in events if e["type"] == "message.delta")
    assert text == "".join(f"w{n} " for n in range(1, 3001))
    # Coalescing: far fewer delta events than the 3,000 chunks the agent said.
    assert sum(e["type"] == "message.delta" for e in events) < 1000


def test_tail_from_the_middle_of_a_running_turn_replays_then_follows(
    server, people, flood_conversation
):
    cid = flood_conversation.pk
    with server.client(people.alice) as client:
        start_turn(client, cid, "6000 events")
        while (latest := client.get(f"/api/conversations/{cid}/in-flight/").json())[
            "latest_seq"
        ] < 50:
            pass
        assert latest["in_flight"] is True
        events, done = read_tail(client, cid, params={"from_seq": 40})
        stored = all_events(client, cid)
    assert_contiguous(events, 41, 6002)
    assert events == stored[40:]
    assert done["latest_seq"] == 6002


def test_tail_honours_last_event_id_and_ends_when_nothing_is_running(server, people, conversation):
    with server.client(people.alice) as client:
        start_turn(client, conversation.pk, "list")
        wait_for_turn_end(client, conversation.pk)
        stored = all_events(client, conversation.pk)
        events, done = read_tail(
            client, conversation.pk, params={"from_seq": 0}, headers={"Last-Event-ID": "3"}
        )
        assert events == stored[3:]
        assert done == {"latest_seq": stored[-1]["seq"]}
        events, done = read_tail(client, conversation.pk, params={"from_seq": len(stored)})
        assert events == [] and done == {"latest_seq": len(stored)}


def test_tail_sends_keep_alive_comments_while_waiting(make_server, people, conversation):
    server = make_server(PARLEY_SSE_KEEPALIVE_SECONDS="0.1", PARLEY_BUILTIN_PACE_MS="400")
    with server.client(people.alice) as client:
        start_turn(client, conversation.pk, "list data")
        with client.stream("GET", f"/api/conversations/{conversation.pk}/tail/") as response:
            body = "".join(response.iter_text())
    assert ": keep-alive" in body
    assert body.rstrip().endswith("}") and "event: done" in body


def test_a_turn_finishes_with_no_client_attached(server, people, conversation):
    with server.client(people.bob) as client:
        started = start_turn(client, conversation.pk, "find budget")
        state = wait_for_turn_end(client, conversation.pk)
        assert state["turn"] is None and state["has_buffer"] is True
        events = all_events(client, conversation.pk)
    assert_contiguous(events, 1, state["latest_seq"])
    assert events[0]["turn"] == started["turn"] and events[-1]["type"] == "turn.completed"
    found = next(e for e in events if e["type"] == "tool.completed")["data"]["result"]
    assert "data/budget.csv" in found["files"] and "reports/q4-plan.md" in found["files"]


async def test_a_socket_joining_after_the_turn_ended_replays_it_all(server, people, conversation):
    async with server.async_client(people.alice) as client:
        await astart_turn(client, conversation.pk, "list notes")
        for _ in range(600):
            state = (await client.get(f"/api/conversations/{conversation.pk}/in-flight/")).json()
            if not state["in_flight"]:
                break
            await asyncio.sleep(0.05)
    async with server.connect(conversation.pk, people.carol) as ws:
        ready = await receive_json(ws)
        assert ready["in_flight"] is False and ready["latest_seq"] == state["latest_seq"]
        events = await events_until_terminal(ws)
    assert_contiguous(events, 1, state["latest_seq"])
    assert "notes/ideas.md" in json.dumps(events)


def test_concurrent_turns_in_different_conversations_keep_each_seq_contiguous(server, people):
    with server.client(people.alice) as client:
        cids = [
            client.post(
                "/api/conversations/",
                json={"workspace": "team", "title": f"Load {n}", "agent": "flood"},
            ).json()["id"]
            for n in range(4)
        ]
        for cid in cids:
            start_turn(client, cid, "2000 events")
        for cid in cids:
            state = wait_for_turn_end(client, cid, timeout=60)
            events = all_events(client, cid)
            assert_contiguous(events, 1, state["latest_seq"])
            assert len(events) == 2002 and events[-1]["type"] == "turn.completed"
        # A second turn in each continues the numbering where the first left off.
        start_turn(client, cids[0], "10 events")
        wait_for_turn_end(client, cids[0])
        assert_contiguous(all_events(client, cids[0]), 1, 2002 + 12)


async def test_a_second_start_while_a_turn_is_active_is_409(make_server, people, conversation):
    server = make_server(PARLEY_BUILTIN_PACE_MS="200")
    async with server.async_client(people.alice) as client:
        first = await astart_turn(client, conversation.pk, "summarize docs/architecture.md")
        second = await client.post(
            f"/api/conversations/{conversation.pk}/turns/", json={"input": "help"}
        )
        assert second.status_code == 409
        assert second.json()["error"]["code"] == "turn_in_progress"
        assert second.json()["error"]["turn"] == first["turn"]
        async with server.connect(conversation.pk, people.bob) as ws:
            await receive_json(ws)
            await ws.send(json.dumps({"type": "turn.start", "ref": "again", "input": "help"}))
            while (frame := await receive_json(ws))["type"] != "ws.error":
                assert frame["type"] != "ws.ack"
            assert frame["ref"] == "again" and frame["code"] == "turn_in_progress"
            events = await events_until_terminal(ws, first["turn"])
        assert all(e["turn"] == first["turn"] for e in events)


async def test_a_turn_started_on_the_socket_is_acked_with_its_id(server, people, conversation):
    async with server.connect(conversation.pk, people.bob) as ws:
        await receive_json(ws)
        await ws.send(json.dumps({"type": "turn.start", "ref": 1, "input": "help"}))
        frames = []
        while True:
            frame = await receive_json(ws)
            frames.append(frame)
            if frame.get("type") == "turn.completed":
                break
    ack = next(f for f in frames if f["type"] == "ws.ack")
    assert ack["ref"] == 1 and ack["seq"] == 1
    assert all(f["turn"] == ack["turn"] for f in frames if "seq" in f and f["type"] != "ws.ack")


async def test_resume_frame_replays_from_the_requested_seq(server, people, conversation):
    async with server.async_client(people.alice) as client:
        await astart_turn(client, conversation.pk, "help")
    async with server.connect(conversation.pk, people.bob) as ws:
        await receive_json(ws)
        everything = await events_until_terminal(ws)
        await ws.send(json.dumps({"type": "resume", "ref": "r", "from_seq": 3}))
        ack = await receive_json(ws)
        assert ack == {"type": "ws.ack", "ref": "r", "from_seq": 3, "latest_seq": len(everything)}
        again = await events_until_terminal(ws)
    assert again == everything[3:]


async def test_an_agent_that_raises_ends_the_turn_failed_with_a_short_reason(server, people):
    """Watchers read a reason a person can act on; the exception itself is for admins only."""
    async with server.async_client(people.alice) as client:
        created = await client.post(
            "/api/conversations/", json={"workspace": "team", "title": "Oops", "agent": "broken"}
        )
        cid = created.json()["id"]
        async with server.connect(cid, people.alice) as ws:
            await receive_json(ws)
            started = await astart_turn(client, cid, "go")
            events = await events_until_terminal(ws, started["turn"])
        state = (await client.get(f"/api/conversations/{cid}/in-flight/")).json()
    types = [e["type"] for e in events]
    assert types == [
        "turn.started",
        "message.delta",
        "message.completed",
        "tool.started",
        "tool.completed",
        "turn.failed",
    ]
    assert events[4]["data"]["error"] == INTERNAL
    assert events[-1]["data"]["error"] == INTERNAL
    assert state["in_flight"] is False
    turn = await Turn.objects.aget(pk=started["turn"])
    assert turn.error == INTERNAL
    assert "RuntimeError: the agent broke on purpose" in turn.failure_detail
    assert "Traceback" in turn.failure_detail and "tests/agents.py" in turn.failure_detail
    assert "the agent broke on purpose" in server.log_text()


def test_a_turn_failing_on_the_database_tells_its_watchers_no_sql(server, people, admin_client):
    with server.client(people.alice) as client:
        created = client.post(
            "/api/conversations/", json={"workspace": "team", "title": "DB", "agent": "broken-db"}
        )
        cid = created.json()["id"]
        client.post(f"/api/conversations/{cid}/turns/", json={"input": "go"})
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    failed = events[-1]
    assert failed["type"] == "turn.failed"
    assert failed["data"]["error"] == (
        "The database failed while this ran; an admin can see the details."
    )
    everything = json.dumps(events)
    assert "parley_no_such_table" not in everything and "secret_column" not in everything
    turn = Turn.objects.get(pk=failed["turn"])
    assert "parley_no_such_table" in turn.failure_detail
    # Admins read the whole story on the turn's page.
    # Quoted as the admin quotes ids: "t_3a…" would otherwise read as "t:…".
    page = admin_client.get(f"/admin/conversations/turn/{quote(turn.pk)}/change/")
    page = page.content.decode()
    assert "Failure detail" in page and "parley_no_such_table" in page


async def test_in_flight_reports_a_running_turn_to_those_who_can_see_it(
    make_server, people, conversation
):
    server = make_server(PARLEY_BUILTIN_PACE_MS="100")
    async with server.async_client(people.bob) as bob, server.async_client(people.dave) as dave:
        started = await astart_turn(bob, conversation.pk, "summarize docs/onboarding.md")
        one = (await bob.get(f"/api/conversations/{conversation.pk}/in-flight/")).json()
        assert one["in_flight"] is True and one["turn"] == started["turn"]
        assert one["status"] in ("queued", "running") and one["has_buffer"] is True
        assert one["latest_seq"] >= 1 and one["pending_selections"] == []
        listed = (await bob.get("/api/in-flight/")).json()
        assert [c["conversation"] for c in listed] == [conversation.pk]
        assert (await dave.get("/api/in-flight/")).json() == []


async def test_sockets_that_go_away_mid_stream_end_quietly_and_the_turn_goes_on(
    server, people, flood_conversation
):
    """Browsers that reload (a close handshake) or lose the network (none) mid-stream, while
    the server is still sending to them: it lets them go without an error (the fixture reads
    its log)."""
    cid = flood_conversation.pk
    async with server.async_client(people.alice) as client:
        await astart_turn(client, cid, "6000 events")
        for attempt in range(6):
            async with server.connect(cid, people.bob, from_seq=0, close_timeout=2) as ws:
                await receive_json(ws)  # ws.ready
                for _ in range(50):
                    await receive_json(ws)
                if attempt % 2:
                    ws.transport.abort()
                else:
                    await ws.close()
        state = await asyncio.to_thread(wait_for_turn_end, server.client(people.alice), cid, 60)
    assert state["latest_seq"] == 6002
    events = await asyncio.to_thread(all_events, server.client(people.alice), cid)
    assert events[-1]["type"] == "turn.completed"


@sync_to_async
def stored_without_a_wake_up(conversation, user) -> Turn:
    """A turn's events committed by someone whose wake-up never reaches the server (this test
    process, as another process whose message the layer lost would)."""
    try:
        turn = Turn.objects.create(
            conversation=conversation,
            input="elsewhere",
            started_by=user,
            status=Turn.Status.COMPLETED,
            ended_at=timezone.now(),
        )
        started = {"input": "elsewhere", "started_by": person(user), "interactive": True}
        with transaction.atomic():
            services.append_events(
                conversation_id=conversation.pk,
                turn_id=turn.pk,
                events=[("turn.started", started), ("turn.completed", {})],
            )
        return turn
    finally:
        connection.close()


async def test_events_whose_wake_up_was_lost_reach_every_watcher_at_the_next_poll(
    make_server, people, conversation
):
    """One query per poll for the whole process finds them, however many sockets watch."""
    server = make_server(PARLEY_FEED_POLL_SECONDS="0.5")
    async with (
        server.connect(conversation.pk, people.bob) as first,
        server.connect(conversation.pk, people.alice) as second,
    ):
        for ws in (first, second):
            assert (await receive_json(ws))["type"] == "ws.ready"
        turn = await stored_without_a_wake_up(conversation, people.alice.user)
        for ws in (first, second):
            events = await events_until_terminal(ws, turn.pk, timeout=20)
            assert [e["type"] for e in events] == ["turn.started", "turn.completed"]
            assert_contiguous(events, 1, 2)


async def test_a_client_that_closes_while_its_replay_streams_gets_the_close_last(
    server, people, flood_conversation
):
    """The socket fuzzer's 1006: its client closed while a replay it had asked for was still
    coming, unread. The server answers a close whatever the client has read: the events it
    wrote before, then the close (1000), then the end of the connection. (websockets' own
    close() stops reading once 16 frames wait unread and so never sees that close: the tests
    read on, see tests.helpers.close_reading_on.)"""
    cid = flood_conversation.pk
    with server.client(people.alice) as client:
        start_turn(client, cid, "600 events")
        latest = wait_for_turn_end(client, cid)["latest_seq"]
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(handshake(f"/ws/conversations/{cid}/?from_seq={latest}", people.bob.token))
        assert b" 101 " in await reader.readuntil(b"\r\n\r\n")
        writer.write(client_frame(0x1, b'{"type": "resume", "ref": "r", "from_seq": 0}'))
        received = b""
        async with asyncio.timeout(30):
            while b'"type":"ws.ack"' not in received:
                received += await reader.read(65536)
            # The ack came first; the replay follows, and the client closes without reading it.
            writer.write(client_frame(0x8, struct.pack("!H", 1000)))
            received += await reader.read()  # to the end of the connection
    finally:
        writer.close()
    frames = server_frames(received)
    assert frames[-1] == (0x8, struct.pack("!H", 1000))
    texts = [json.loads(payload) for opcode, payload in frames[:-1]]
    assert [opcode for opcode, _ in frames[:-1]] == [0x1] * len(texts)
    assert texts[0]["type"] == "ws.ready"
    assert [frame["ref"] for frame in texts if frame["type"] == "ws.ack"] == ["r"]
    # What of the replay went out before the close, in order and whole.
    replayed = [frame for frame in texts if "seq" in frame]
    assert_contiguous(replayed, 1)
    assert len(replayed) <= latest

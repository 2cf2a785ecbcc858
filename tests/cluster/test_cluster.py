"""Two Daphne processes, A and B, on one PostgreSQL and one Redis: a turn runs on B (where it was
started) while people watch it, answer it, steer it and stop it through A."""

import asyncio
import json
import random
import re
import signal
import time

import pytest
from django.db import connection

from conversations.models import Turn
from tests.cluster.conftest import LEASE_SECONDS
from tests.conftest import (
    all_events,
    events_until_terminal,
    kill,
    receive_json,
    wait_for_turn_end,
    wait_until,
)
from tests.helpers import (
    ask,
    assert_contiguous,
    assert_one_terminal_last,
    assert_whole,
    astart_turn,
    create_conversation,
    outcomes,
    read_tail,
    reply,
    start,
    wait_pending,
)

pytestmark = pytest.mark.cluster


def metric(server, name: str, **labels) -> float:
    """One sample of a process's Prometheus metrics."""
    text = server.client().get("/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = rf"^{re.escape(name)}{re.escape('{' + wanted + '}') if labels else ''} (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_a_turn_on_b_is_watched_live_on_a_with_no_gap_and_no_duplicate(
    make_node, people, flood_conversation
):
    """Sockets on A from the start and joining at random points, and a tail on A. The feeds'
    own database poll is an hour, so only the channel layer can bring B's events to A live."""
    a = make_node(PARLEY_FEED_POLL_SECONDS="3600")
    b = make_node(PARLEY_FEED_POLL_SECONDS="3600")
    rng = random.Random(20261123)
    cid = flood_conversation.pk

    async def join_and_watch(delay: float, client):
        await asyncio.sleep(delay)
        from_seq = rng.randint(
            0, (await client.get(f"/api/conversations/{cid}/in-flight/")).json()["latest_seq"]
        )
        async with a.connect(cid, people.bob, from_seq=from_seq) as ws:
            assert (await receive_json(ws))["type"] == "ws.ready"
            return from_seq, await events_until_terminal(ws, timeout=90)

    async with a.connect(cid, people.bob) as first, a.async_client(people.bob) as client_a:
        assert (await receive_json(first))["type"] == "ws.ready"
        async with b.async_client(people.alice) as client_b:
            started = await astart_turn(client_b, cid, "3000 events every 1")
        tail = asyncio.to_thread(read_tail, a.client(people.bob), cid, params={"from_seq": 0})
        joiners = [join_and_watch(rng.uniform(0, 1.5), client_a) for _ in range(8)]
        watched, (tailed, _), *joined = await asyncio.gather(
            events_until_terminal(first, timeout=90), tail, *joiners
        )
    stored = all_events(b.client(people.alice), cid)
    final = stored[-1]["seq"]
    assert final == 3002 and stored[-1]["type"] == "turn.completed"
    assert stored[-1]["turn"] == started["turn"]
    by_seq = {e["seq"]: (e["type"], e["data"]) for e in stored}
    for from_seq, events in [(0, watched), (0, tailed), *joined]:
        assert_contiguous(events, from_seq + 1, final)
        assert all(by_seq[e["seq"]] == (e["type"], e["data"]) for e in events)
    assert sum(0 < from_seq < final - 1 for from_seq, _ in joined) >= 4


def steer_on_a_then_wait_for_the_question(client_a, client_b) -> tuple[str, str, dict]:
    """A turn on B that waits for steering, then asks; the steering is sent to A."""
    cid = create_conversation(client_b)
    turn = start(client_b, cid, [{"await_steering": 60}, ask(kind="text"), {"say": "done"}])
    steered = client_a.post(
        f"/api/conversations/{cid}/steer/", json={"expected_turn_id": turn, "input": "hurry"}
    )
    assert steered.status_code == 202, steered.text
    pending = wait_pending(client_a, cid, timeout=60)
    return cid, turn, pending


def test_answer_steer_and_stop_sent_to_a_reach_the_turn_on_b(make_node, people):
    """The parked turn's and the runner's database polls are an hour: only the wake-ups, over
    the channel layer, can bring the answer, the steering and the Stop from A to B."""
    slow_polls = {"PARLEY_SELECTION_POLL_SECONDS": "3600"}
    a, b = make_node(**slow_polls), make_node(**slow_polls)
    client_a, client_b = a.client(people.bob), b.client(people.alice)
    cid, turn, pending = steer_on_a_then_wait_for_the_question(client_a, client_b)

    async def answer_twenty():
        async with a.async_client(people.bob) as on_a, b.async_client(people.alice) as on_b:
            return await asyncio.gather(
                *(
                    (on_a if n % 2 else on_b).post(
                        f"/api/selections/{pending['id']}/reply/", json={"answer": f"#{n}"}
                    )
                    for n in range(20)
                )
            )

    responses = asyncio.run(answer_twenty())
    assert sorted(r.status_code for r in responses) == [200] + [409] * 19
    winner = next(r.json() for r in responses if r.status_code == 200)
    wait_for_turn_end(client_a, cid, timeout=60)
    events = all_events(client_a, cid)
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert json.loads(said[0]) == {"steering": ["hurry"]}
    assert outcomes(events)[0]["value"] == winner["answer"]
    assert events[-1]["type"] == "turn.completed" and events[-1]["turn"] == turn

    stopped = start(client_b, cid, [ask(kind="text"), {"say": "never"}])
    wait_pending(client_a, cid, timeout=60)
    stop = client_a.post(f"/api/conversations/{cid}/cancel/", json={"turn_id": stopped})
    assert stop.status_code == 202, stop.text
    wait_for_turn_end(client_a, cid, timeout=60)
    events = all_events(client_a, cid)
    assert [e["type"] for e in events[-2:]] == ["selection.resolved", "turn.cancelled"]
    assert events[-1]["data"]["by"]["username"] == "bob"
    client_a.close()
    client_b.close()


def test_wake_ups_the_layer_loses_delay_the_turn_but_never_strand_it(make_node, people, own_redis):
    """A and B on two different Redis servers: every wake-up A sends to B's turn is lost. The
    steering, the answer and the Stop still reach it, from the database, seconds later."""
    a = make_node(redis=own_redis.url)
    b = make_node()
    client_a, client_b = a.client(people.bob), b.client(people.alice)
    cid, turn, pending = steer_on_a_then_wait_for_the_question(client_a, client_b)
    assert reply(client_a, pending["id"], answer="lost, then found").status_code == 200
    wait_for_turn_end(client_a, cid, timeout=60)
    events = all_events(client_a, cid)
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert json.loads(said[0]) == {"steering": ["hurry"]}
    assert outcomes(events)[0]["value"] == "lost, then found"
    assert events[-1]["type"] == "turn.completed" and events[-1]["turn"] == turn

    stopped = start(client_b, cid, [{"sleep": 60}, {"say": "never"}])
    # Stopped once it runs on B: a Stop stored before the turn begins is read as it begins, not
    # made good by the poll this test is about (answers are fast enough now to get there first).
    wait_until(
        lambda: client_a.get(f"/api/conversations/{cid}/in-flight/").json()["status"] == "running",
        what="the turn running on B",
    )
    stop = client_a.post(f"/api/conversations/{cid}/cancel/", json={"turn_id": stopped})
    assert stop.status_code == 202, stop.text
    wait_for_turn_end(client_a, cid, timeout=60)
    events = all_events(client_a, cid)
    assert events[-1]["type"] == "turn.cancelled" and events[-1]["turn"] == stopped
    for kind in ("steer", "answer", "stop"):
        assert metric(b, "parley_lost_wakeups_recovered_total", kind=kind) >= 1, kind
    client_a.close()
    client_b.close()


async def test_redis_restarted_mid_turn(make_node, people, flood_conversation, own_redis):
    """Every watcher on A ends with the whole log, contiguous, and the turn finishes."""
    complaining = ("channels_redis.pubsub",)  # its receiver logs each failed read while away
    a = make_node(redis=own_redis.url, allow_errors_from=complaining)
    b = make_node(redis=own_redis.url, allow_errors_from=complaining)
    cid = flood_conversation.pk
    async with a.connect(cid, people.bob) as ws, a.async_client(people.bob) as client_a:
        assert (await receive_json(ws))["type"] == "ws.ready"
        async with b.async_client(people.alice) as client_b:
            started = await astart_turn(client_b, cid, "2000 events every 4")
        tail = asyncio.create_task(
            asyncio.to_thread(read_tail, a.client(people.bob), cid, params={"from_seq": 0})
        )
        watching = asyncio.create_task(events_until_terminal(ws, timeout=120))
        while True:
            state = (await client_a.get(f"/api/conversations/{cid}/in-flight/")).json()
            if state["latest_seq"] >= 300:
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(own_redis.restart)
        watched = await watching
        tailed, _ = await tail
    stored = all_events(a.client(people.bob), cid)
    assert stored[-1]["seq"] == 2002 and stored[-1]["type"] == "turn.completed"
    assert stored[-1]["turn"] == started["turn"]
    for events in (watched, tailed):
        assert_contiguous(events, 1, 2002)
        assert [e["type"] for e in events] == [e["type"] for e in stored]


async def events_until(ws, stop) -> list[dict]:
    """The events a socket receives, up to the first for which ``stop`` is true."""
    seen = []
    while not seen or not stop(seen[-1]):
        frame = await receive_json(ws, timeout=30)
        if "seq" in frame:
            seen.append(frame)
    return seen


@pytest.mark.parametrize("when", ["mid-stream", "while parked"])
async def test_b_killed_its_turn_goes_on_on_a(make_node, people, when):
    """A takes B's turn over once B's lease runs out and resumes it from its journal: A's
    watchers see turn.resumed then the rest, nothing repeated; a parked turn waits for its
    answer, which resumes it."""
    a, b = make_node(), make_node()
    client_b = b.client(people.alice)
    if when == "mid-stream":
        cid = create_conversation(client_b, agent="flood")
        script = "1600 events every 5"
    else:
        cid = create_conversation(client_b)
        script = json.dumps([{"say": "Let me ask. "}, ask(kind="text"), {"say": "Thanks."}])
    client_a = a.client(people.bob)
    async with a.connect(cid, people.bob) as ws:
        assert (await receive_json(ws))["type"] == "ws.ready"
        turn = start(client_b, cid, script)
        seen = await events_until(ws, lambda e: e["seq"] > 50 or e["type"] == "selection.requested")
        killed_at = time.monotonic()
        kill(b)
        if when == "while parked":
            pending = await asyncio.to_thread(wait_pending, client_a, cid)
            # Nobody holds it once B's lease has run out; the answer then resumes it on A.
            await asyncio.to_thread(
                wait_until, lambda: _runner(turn) == "", LEASE_SECONDS * 5, "B's lease to lapse"
            )
            assert reply(client_a, pending["id"], answer="here").status_code == 200
        else:
            seen += await events_until(ws, lambda e: e["type"] == "turn.resumed")
            # Within a lease and one upkeep interval of the kill (with room for a loaded machine).
            assert time.monotonic() - killed_at < LEASE_SECONDS * 3
        seen += await events_until_terminal(ws, turn, timeout=LEASE_SECONDS * 20)
    assert seen[-1]["type"] == "turn.completed" and seen[-1]["turn"] == turn
    stored = all_events(client_a, cid)
    by_seq = {e["seq"]: e for e in stored}
    assert all(by_seq[e["seq"]] == e for e in seen)
    assert_whole(stored)
    (resumed,) = [e for e in stored if e["type"] == "turn.resumed"]
    assert resumed["data"]["process"].split(":")[1] == str(a.process.pid)
    if when == "mid-stream":
        assert resumed["data"]["reason"] == "process_stopped"
        assert resumed["data"]["previous"].split(":")[1] == str(b.process.pid)
        assert sum(e["type"] == "tool.completed" and "result" in e["data"] for e in stored) == 800
    else:
        # Let go once B's lease lapsed; resumed by the answer.
        assert resumed["data"] == {**resumed["data"], "reason": "question_settled", "previous": ""}
        assert outcomes(stored)[0]["value"] == "here"


def _runner(turn_id) -> str:
    try:
        return Turn.objects.get(pk=turn_id).runner
    finally:
        connection.close()


async def test_postgresql_restarted_mid_turn(make_node, people, flood_conversation, postgres):
    """B's writes wait for the database and carry on: the log is whole, with no duplicate."""
    a, b = make_node(), make_node()
    cid = flood_conversation.pk
    async with a.connect(cid, people.bob) as ws:
        assert (await receive_json(ws))["type"] == "ws.ready"
        async with b.async_client(people.alice) as client_b:
            started = await astart_turn(client_b, cid, "2000 events every 4")
        watching = asyncio.create_task(events_until_terminal(ws, timeout=120))
        while True:
            if await asyncio.to_thread(_stored_count, cid) >= 300:
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(postgres.restart)
        watched = await watching
    stored = all_events(a.client(people.bob), cid)
    assert [e["seq"] for e in stored] == list(range(1, 2003))
    assert stored[-1]["type"] == "turn.completed" and stored[-1]["turn"] == started["turn"]
    assert_contiguous(watched, 1, 2002)
    assert [e["type"] for e in watched] == [e["type"] for e in stored]


def test_postgresql_away_longer_than_the_lease(make_node, people, postgres):
    """Every lease runs out while the database is away. When it is back, each process renews
    its own turns before anyone reaps: parked turns on A and on B (which only upkeep keeps
    alive) both survive, and go on once answered."""
    nodes = make_node(), make_node()
    clients = [node.client(people.alice) for node in nodes]
    asked = []
    for client in clients:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="text"), {"say": "still here"}])
        asked.append((cid, wait_pending(client, cid, timeout=60)))
    postgres.stop()
    # The outage is the test's subject: it lasts past every lease, by design.
    time.sleep(LEASE_SECONDS + 3)
    postgres.start()
    for client, (_, pending) in zip(clients, asked, strict=True):
        answered = reply(client, pending["id"], answer="back")
        assert answered.status_code == 200, answered.text
    for client, (cid, _) in zip(clients, asked, strict=True):
        wait_for_turn_end(client, cid, timeout=60)
        events = all_events(client, cid)
        assert events[-1]["type"] == "turn.completed", events[-2:]
        client.close()


def _stored_count(cid) -> int:
    from conversations.models import TurnEvent

    try:
        return TurnEvent.objects.filter(conversation_id=cid).count()
    finally:
        connection.close()


async def test_a_stalled_process_loses_its_turn_to_the_one_that_took_it_over(
    make_node, people, flood_conversation
):
    """B stalls (SIGSTOP) past its lease, A takes its turn over and finishes it; B, going on,
    learns at its next write or renewal that the turn is no longer its own, and writes nothing
    more: the log stays whole, with one terminal event."""
    a, b = make_node(), make_node()
    cid = flood_conversation.pk
    async with a.connect(cid, people.bob) as ws:
        assert (await receive_json(ws))["type"] == "ws.ready"
        async with b.async_client(people.alice) as client_b:
            started = await astart_turn(client_b, cid, "1200 events every 5")
        seen = await events_until(ws, lambda e: e["seq"] >= 50)
        b.process.send_signal(signal.SIGSTOP)
        try:
            seen += await events_until(ws, lambda e: e["type"] == "turn.resumed")
        finally:
            b.process.send_signal(signal.SIGCONT)
        seen += await events_until_terminal(ws, started["turn"], timeout=LEASE_SECONDS * 20)
    assert seen[-1]["type"] == "turn.completed"
    await asyncio.to_thread(
        wait_until,
        lambda: "no longer run here" in b.log_text(),
        60,
        "B to notice it lost the turn",
    )
    stored = all_events(a.client(people.bob), cid)
    assert stored[-1] == seen[-1]
    assert_whole(stored)
    turn = await asyncio.to_thread(_turn_status, started["turn"])
    assert turn == Turn.Status.COMPLETED


def _turn_status(turn_id) -> str:
    try:
        return Turn.objects.get(pk=turn_id).status
    finally:
        connection.close()


async def test_answers_steering_stops_and_turn_ends_interleaved_never_deadlock(make_node, people):
    """Many rounds of an answer, a steer and a Stop sent at once, to both processes, while the
    answer also ends the turn: every request gets a clear answer and no lock waits in a circle
    (a deadlock would be a 500, logged as an error)."""
    a, b = make_node(), make_node()
    cid = create_conversation(b.client(people.alice))
    rounds = 25
    seen_codes = set()
    async with a.async_client(people.bob) as on_a, b.async_client(people.alice) as on_b:
        for n in range(rounds):
            turn = await asyncio.to_thread(
                start, b.client(people.alice), cid, [ask(kind="text"), {"say": "after"}]
            )
            pending = await asyncio.to_thread(wait_pending, a.client(people.bob), cid, 60)
            first, second = (on_a, on_b) if n % 2 else (on_b, on_a)
            requests = [
                first.post(f"/api/selections/{pending['id']}/reply/", json={"answer": f"{n}"}),
                second.post(
                    f"/api/conversations/{cid}/steer/",
                    json={"expected_turn_id": turn, "input": f"steer {n}"},
                ),
                second.post(f"/api/conversations/{cid}/cancel/", json={"turn_id": turn}),
                first.post(
                    f"/api/conversations/{cid}/steer/",
                    json={"expected_turn_id": turn, "input": f"again {n}"},
                ),
            ]
            if n % 3 == 0:
                requests.reverse()
            responses = await asyncio.gather(*requests)
            for response in responses:
                assert response.status_code in (200, 202, 409, 410), response.text
                seen_codes.add(response.status_code)
            await asyncio.to_thread(wait_for_turn_end, a.client(people.bob), cid, 60)
    events = all_events(a.client(people.bob), cid)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    by_turn = {}
    for event in events:
        by_turn.setdefault(event["turn"], []).append(event)
    assert len(by_turn) == rounds
    for turn_events in by_turn.values():
        assert_one_terminal_last(turn_events)
    assert {200, 202} <= seen_codes

"""Turns that outlive their process, across two Daphnes on PostgreSQL and Redis: a question
pending when its process stops is answered through the other, and a rolling restart of both
(SIGTERM, one after the other) during streams and parked questions loses nothing."""

import asyncio

import pytest
import websockets

from conversations.models import Turn
from tests.cluster.conftest import LEASE_SECONDS
from tests.conftest import all_events, receive_json, wait_for_turn_end, wait_until
from tests.helpers import (
    ONE_OF_EACH_KIND,
    ask,
    assert_whole,
    create_conversation,
    outcomes,
    reply,
    start,
    streamed_text,
    wait_pending,
)

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize(
    "question, refused, answer, value", ONE_OF_EACH_KIND, ids=lambda k: str(k)[:24]
)
def test_a_question_pending_when_its_process_stops_is_answered_on_the_other(
    make_node, people, question, refused, answer, value
):
    a, b = make_node(), make_node()
    with a.client(people.bob) as client_a:
        cid = create_conversation(client_a)
        turn = start(client_a, cid, [{"say": "Before. "}, question, {"say": "After."}])
        pending = wait_pending(client_a, cid)
    a.stop()  # SIGTERM: A hands its turns back at once
    with b.client(people.alice) as client_b:
        assert reply(client_b, pending["id"], answer=refused[0]).status_code == 400
        answered = reply(client_b, pending["id"], answer=answer)
        assert answered.status_code == 200, answered.text
        wait_for_turn_end(client_b, cid, timeout=60)
        events = all_events(client_b, cid)
    assert_whole(events)
    assert events[-1]["type"] == "turn.completed" and events[-1]["turn"] == turn
    assert [(o["status"], o["value"]) for o in outcomes(events)] == [("answered", value)]
    assert streamed_text(events).count("Before. ") == 1
    (resumed,) = [e for e in events if e["type"] == "turn.resumed"]
    assert resumed["data"]["reason"] == "question_settled"
    assert resumed["data"]["previous"] == ""  # handed back: nobody held it
    assert resumed["data"]["process"].split(":")[1] == str(b.process.pid)


async def watch(live: list, cid: str, person, log: list) -> None:
    """Follow a conversation's turn to its end, as the browser does: on a close (1012 when a
    process stops), reconnect at once to a live process, from the last event seen."""
    attempt = 0
    while True:
        node = live[attempt % len(live)]
        attempt += 1
        after = log[-1]["seq"] if log else 0
        try:
            async with node.connect(cid, person, from_seq=after) as ws:
                ready = await receive_json(ws)
                if ready.get("type") != "ws.ready":
                    continue
                while True:
                    frame = await receive_json(ws, timeout=120)
                    if "seq" not in frame:
                        continue
                    log.append(frame)
                    if frame["type"] in ("turn.completed", "turn.failed", "turn.cancelled"):
                        return
        except (websockets.WebSocketException, OSError):
            await asyncio.sleep(0.1 * min(attempt, 10))  # the next process may be starting


async def test_a_rolling_restart_during_streams_and_questions_loses_nothing(make_node, people):
    a, b = make_node(), make_node()
    live = [a, b]
    streams, parked = [], []
    for n, node in enumerate([a, b, a, b]):
        with node.client(people.alice) as client:
            cid = create_conversation(client, agent="flood", title=f"Stream {n}")
            streams.append((cid, start(client, cid, "2400 text every 4")))
    for n, node in enumerate([a, b, a]):
        with node.client(people.bob) as client:
            cid = create_conversation(client, title=f"Question {n}")
            start(client, cid, [{"say": f"Asking {n}. "}, ask(kind="text"), {"say": "Thanks."}])
            parked.append((cid, wait_pending(client, cid)))
    logs = {cid: [] for cid, _ in streams + parked}
    people_by_turn = [people.bob, people.carol]
    watchers = [
        asyncio.create_task(watch(live, cid, people_by_turn[n % 2], logs[cid]))
        for n, cid in enumerate(logs)
    ]
    # Both processes restart, one after the other, while the streams run.
    await asyncio.to_thread(
        wait_until, lambda: all(len(logs[cid]) > 5 for cid, _ in streams), 60, "the streams"
    )
    for old in (a, b):
        await asyncio.to_thread(old.stop)
        live.remove(old)
        live.append(await asyncio.to_thread(make_node))
    with live[0].client(people.bob) as client:
        for n, (_, pending) in enumerate(parked):
            assert reply(client, pending["id"], answer=f"answer {n}").status_code == 200
    async with asyncio.timeout(LEASE_SECONDS * 30):
        await asyncio.gather(*watchers)
    client = live[0].client(people.alice)
    words = " ".join(f"w{n}" for n in range(1, 2401)) + " "
    for cid, log in logs.items():
        stored = all_events(client, cid)
        assert log == stored, cid  # every watcher's log is complete, contiguous, as stored
        assert_whole(stored)
        assert stored[-1]["type"] == "turn.completed"
        if cid in dict(streams):
            assert streamed_text(stored) == words
        else:
            assert [o["status"] for o in outcomes(stored)] == ["answered"]
    handed_back = [
        e["data"]["reason"] for cid, _ in streams for e in logs[cid] if e["type"] == "turn.resumed"
    ]
    assert handed_back and set(handed_back) == {"handed_back"}
    assert await asyncio.to_thread(_all_completed, [t for _, t in streams])


def _all_completed(turn_ids) -> bool:
    from django.db import connection

    try:
        return set(Turn.objects.filter(pk__in=turn_ids).values_list("status", flat=True)) == {
            Turn.Status.COMPLETED
        }
    finally:
        connection.close()

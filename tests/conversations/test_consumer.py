"""The conversation socket through Channels' communicator (the ASGI app in this process)."""

import asyncio
import json
import random

import pytest
from channels.testing import WebsocketCommunicator

from config.asgi import application


def communicator(conversation_id, person=None, query="", headers=None):
    headers = list(headers or [])
    if person is not None:
        headers.append((b"authorization", f"Token {person.token}".encode()))
    path = f"/ws/conversations/{conversation_id}/" + (f"?{query}" if query else "")
    return WebsocketCommunicator(application, path, headers=headers)


async def events_until_terminal(comm, timeout=30):
    events = []
    while True:
        frame = await comm.receive_json_from(timeout=timeout)
        if "seq" in frame:
            events.append(frame)
            if frame["type"] in ("turn.completed", "turn.failed", "turn.cancelled"):
                return events


@pytest.mark.django_db(transaction=True)
async def test_ready_then_replay_then_live_for_joins_at_random_points(people, flood_conversation):
    rng = random.Random(7)
    cid = flood_conversation.pk
    starter = communicator(cid, people.alice)
    assert (await starter.connect(timeout=30))[0]
    assert (await starter.receive_json_from(timeout=30))["type"] == "ws.ready"
    await starter.send_json_to({"type": "turn.start", "ref": "go", "input": "3000 events"})

    async def join(delay):
        await asyncio.sleep(delay)
        comm = communicator(cid, people.bob)
        await comm.connect(timeout=30)
        ready = await comm.receive_json_from(timeout=30)
        from_seq = rng.randint(0, ready["latest_seq"])
        await comm.disconnect(timeout=30)
        comm = communicator(cid, people.bob, query=f"from_seq={from_seq}")
        await comm.connect(timeout=30)
        assert (await comm.receive_json_from(timeout=30))["type"] == "ws.ready"
        events = await events_until_terminal(comm)
        await comm.disconnect(timeout=30)
        return from_seq, events

    results = await asyncio.gather(*(join(rng.uniform(0, 0.5)) for _ in range(10)))
    starter_events = await events_until_terminal(starter)
    await starter.disconnect(timeout=30)
    end = starter_events[-1]["seq"]
    assert end == 3002
    for from_seq, events in results:
        assert [e["seq"] for e in events] == list(range(from_seq + 1, end + 1))


@pytest.mark.django_db(transaction=True)
async def test_anonymous_and_stranger_sockets_are_closed(people, conversation):
    anonymous = communicator(conversation.pk)
    connected, _ = await anonymous.connect(timeout=30)
    assert connected
    assert (await anonymous.receive_output(timeout=30))["code"] == 4401
    stranger = communicator(conversation.pk, people.dave)
    await stranger.connect(timeout=30)
    assert (await stranger.receive_output(timeout=30))["code"] == 4403


@pytest.mark.django_db(transaction=True)
async def test_acks_and_errors_carry_the_ref(people, conversation):
    comm = communicator(conversation.pk, people.bob)
    await comm.connect(timeout=30)
    assert (await comm.receive_json_from(timeout=30))["type"] == "ws.ready"
    await comm.send_to(text_data=json.dumps({"type": "turn.start", "ref": "x1", "input": "help"}))
    frames = []
    while not any(f.get("type") == "turn.completed" for f in frames):
        frames.append(await comm.receive_json_from(timeout=10))
    ack = next(f for f in frames if f["type"] == "ws.ack")
    assert ack["ref"] == "x1" and ack["turn"].startswith("t_") and ack["seq"] == 1
    await comm.send_to(text_data='{"type": "turn.steer!", "ref": "x2"}')
    error = await comm.receive_json_from(timeout=30)
    assert error["type"] == "ws.error" and error["ref"] == "x2" and error["code"] == "unknown_type"
    await comm.disconnect(timeout=30)

"""The conversation socket through Channels' communicator (the ASGI app in this process)."""

import asyncio
import json
import logging
import random

import pytest
from channels.routing import URLRouter
from django.urls import path as route
from prometheus_client import REGISTRY

from conversations.broadcast import hub
from conversations.consumers import ConversationConsumer, _open_sockets
from conversations.models import Watcher
from core.auth import WebSocketAuthMiddleware
from tests.helpers import communicator, communicator_events_until_terminal


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
        events = await communicator_events_until_terminal(comm)
        await comm.disconnect(timeout=30)
        return from_seq, events

    results = await asyncio.gather(*(join(rng.uniform(0, 0.5)) for _ in range(10)))
    starter_events = await communicator_events_until_terminal(starter)
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


async def watcher_rows(count: int) -> None:
    for _ in range(600):
        if await Watcher.objects.acount() == count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {count} watcher rows")


def sockets_open() -> float:
    return REGISTRY.get_sample_value("parley_sockets_open")


def assert_nothing_left(conversation_id, opened: float) -> None:
    assert conversation_id not in hub._subscriptions
    assert not list(_open_sockets)
    assert sockets_open() == opened


@pytest.mark.django_db(transaction=True)
async def test_a_cancelled_socket_leaves_nothing_behind(people, conversation):
    """Daphne cancels a consumer that outlives its client by too long, and at shutdown: the
    socket's watcher row, subscription and count go all the same, wherever it was."""
    opened = sockets_open()
    # Each moment a few times: where exactly a cancel lands varies.
    for stage in ("accepted",) * 4 + ("ready",) * 6 + ("watching",):
        comm = communicator(conversation.pk, people.bob)
        await comm.send_input({"type": "websocket.connect"})
        assert (await comm.receive_output(timeout=30))["type"] == "websocket.accept"
        if stage != "accepted":
            ready = json.loads((await comm.receive_output(timeout=30))["text"])
            assert ready["type"] == "ws.ready"
        if stage == "watching":
            await watcher_rows(1)
        # Cancelled mid-connect (accepted), as its watcher row is written (ready), or once open.
        comm.future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await comm.future
        assert await Watcher.objects.acount() == 0, stage
        assert_nothing_left(conversation.pk, opened)


class BuggyConversationConsumer(ConversationConsumer):
    """The conversation socket with one frame type more, whose handler has a bug, and a
    connect that fails once the socket is set up: the test's own additions, to see what
    Parley's guard does with a bug (Parley's own handlers are left as they are)."""

    async def connect(self):
        await super().connect()
        if "fail_connect" in self.scope["query_string"].decode():
            raise RuntimeError("a bug in connect")

    async def frame_explode(self, frame: dict) -> dict:
        return {"result": 1 / 0}

    frame_handlers = {**ConversationConsumer.frame_handlers, "explode": frame_explode}


buggy_application = WebSocketAuthMiddleware(
    URLRouter(
        [route("ws/conversations/<str:conversation_id>/", BuggyConversationConsumer.as_asgi())]
    )
)


@pytest.mark.django_db(transaction=True)
async def test_a_bug_in_a_frame_handler_is_an_internal_error_and_the_socket_stays_open(
    people, conversation, caplog
):
    opened = sockets_open()
    comm = communicator(conversation.pk, people.bob, app=buggy_application)
    assert (await comm.connect(timeout=30))[0]
    assert (await comm.receive_json_from(timeout=30))["type"] == "ws.ready"
    with caplog.at_level(logging.ERROR, logger="core.sockets"):
        await comm.send_json_to({"type": "explode", "ref": "b1"})
        error = await comm.receive_json_from(timeout=30)
    assert (error["type"], error["ref"], error["code"]) == ("ws.error", "b1", "internal")
    # The bug is in the log, with its traceback; the client is told no more than that.
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.exc_info[0] is ZeroDivisionError
    assert "division" not in error["message"]
    await comm.send_json_to({"type": "resume", "ref": "after", "from_seq": 0})
    assert (await comm.receive_json_from(timeout=30)) == {
        "type": "ws.ack",
        "ref": "after",
        "from_seq": 0,
        "latest_seq": 0,
    }
    await watcher_rows(1)
    await comm.disconnect(timeout=30)
    await watcher_rows(0)
    assert_nothing_left(conversation.pk, opened)


@pytest.mark.django_db(transaction=True)
async def test_a_bug_in_connect_closes_with_1011_and_leaves_nothing(people, conversation, caplog):
    opened = sockets_open()
    comm = communicator(conversation.pk, people.bob, "fail_connect=1", app=buggy_application)
    with caplog.at_level(logging.ERROR, logger="core.sockets"):
        assert (await comm.connect(timeout=30))[0]
        assert (await comm.receive_json_from(timeout=30))["type"] == "ws.ready"
        assert await comm.receive_output(timeout=30) == {"type": "websocket.close", "code": 1011}
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.exc_info[0] is RuntimeError
    await comm.send_input({"type": "websocket.disconnect", "code": 1011})
    await comm.wait(timeout=30)
    await watcher_rows(0)
    assert_nothing_left(conversation.pk, opened)

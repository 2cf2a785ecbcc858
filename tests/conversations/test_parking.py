"""Parked turns in this process: Stop ends the task for real, and a parked turn holds no thread."""

import asyncio
import json
import threading

import pytest

from conversations.runtime.parking import parking
from conversations.runtime.runner import turn_runner
from selection.models import Selection
from tests.helpers import communicator, communicator_events_until_terminal

pytestmark = pytest.mark.django_db(transaction=True)


async def until(comm, kind):
    while (frame := await comm.receive_json_from(timeout=10)).get("type") != kind:
        pass
    return frame


async def test_stop_while_parked_ends_the_task_and_frees_the_parking(people, conversation):
    scripted = conversation
    scripted.agent = "scripted"
    await scripted.asave()
    comm = communicator(scripted.pk, people.bob)
    await comm.connect()
    await comm.receive_json_from()
    script = [{"ask": {"kind": "text", "prompt": "?"}}, {"say": "never"}]
    await comm.send_json_to({"type": "turn.start", "ref": "go", "input": json.dumps(script)})
    requested = await until(comm, "selection.requested")
    turn_id = requested["turn"]
    threads_while_parked = threading.active_count()
    assert turn_runner.is_running(turn_id) and len(parking) == 1
    task = turn_runner._running[turn_id].agent_task
    await comm.send_json_to({"type": "turn.cancel", "ref": "stop", "turn_id": turn_id})
    events = await communicator_events_until_terminal(comm)
    await comm.disconnect()
    assert [e["type"] for e in events][-2:] == ["selection.resolved", "turn.cancelled"]
    assert task.cancelled()
    await asyncio.sleep(0.05)
    assert not turn_runner.is_running(turn_id) and len(parking) == 0
    selection = await Selection.objects.aget(pk=requested["data"]["id"])
    assert selection.status == Selection.Status.CANCELLED
    assert threads_while_parked <= threading.active_count() + 1  # parking took no thread

"""A person's limits hold over every process on Redis: sockets and tails open on A and B count
together, so do the turns started through either, and the places a process held are free again
once it dies (its leases lapse)."""

import asyncio
import contextlib
import uuid

from tests.conftest import kill, receive_json
from tests.helpers import closed_with, create_conversation, parked_conversation, ready, start

LIMITS = {
    "PARLEY_MAX_SOCKETS_PER_PERSON": "2",
    "PARLEY_MAX_TAILS_PER_PERSON": "2",
    "PARLEY_TURN_RATE": "2/hour",
}


async def _socket_refused(server, cid, person) -> bool:
    """Open a socket: True if it was refused for its person's limit (4429), False if opened."""
    async with server.connect(cid, person) as ws:
        frame = await receive_json(ws)
        if frame["type"] == "ws.ready":
            return False
        assert frame["code"] == "too_many_sockets", frame
        assert await closed_with(ws) == 4429
        return True


async def _tail_status(server, cid, person) -> int:
    async with server.async_client(person) as client:
        async with client.stream("GET", f"/api/conversations/{cid}/tail/") as tail:
            return tail.status_code


async def test_a_persons_places_and_rates_are_counted_over_both_processes(make_node, people):
    # Keys of this test's own on the run's Redis.
    limits = {**LIMITS, "PARLEY_REDIS_PREFIX": f"test-{uuid.uuid4().hex[:8]}"}
    a, b = make_node(**limits), make_node(**limits)
    cid, _ = await asyncio.to_thread(parked_conversation, a, people)
    async with contextlib.AsyncExitStack() as stack:
        # One socket on each process: a third, on either, is one too many.
        for server in (a, b):
            await ready(await stack.enter_async_context(server.connect(cid, people.alice)))
        assert await _socket_refused(a, cid, people.alice)
        assert await _socket_refused(b, cid, people.alice)
        # The same for tails.
        for server in (a, b):
            client = await stack.enter_async_context(server.async_client(people.bob))
            tail = await stack.enter_async_context(
                client.stream("GET", f"/api/conversations/{cid}/tail/")
            )
            assert tail.status_code == 200
        assert await _tail_status(a, cid, people.bob) == 429
        assert await _tail_status(b, cid, people.bob) == 429

        # B dies holding one socket and one tail: once its leases lapse, they are free again
        # on A (no process gives them back).
        kill(b)
        await _eventually(lambda: _socket_refused(a, cid, people.alice), False)
        await _eventually(lambda: _tail_status(a, cid, people.bob), 200)
        # While A's own are still counted: one more of each, and then no more.
        await ready(await stack.enter_async_context(a.connect(cid, people.alice)))
        assert await _socket_refused(a, cid, people.alice)
        client = await stack.enter_async_context(a.async_client(people.bob))
        tail = await stack.enter_async_context(
            client.stream("GET", f"/api/conversations/{cid}/tail/")
        )
        assert tail.status_code == 200
        assert await _tail_status(a, cid, people.bob) == 429


async def _eventually(check, expected, timeout: float = 60) -> None:
    """Wait until ``await check()`` gives ``expected``."""
    async with asyncio.timeout(timeout):
        while True:
            if await check() == expected:
                return
            await asyncio.sleep(0.2)


def test_turns_started_through_either_process_share_one_rate(make_node, people):
    limits = {**LIMITS, "PARLEY_REDIS_PREFIX": f"test-{uuid.uuid4().hex[:8]}"}
    a, b = make_node(**limits), make_node(**limits)
    with a.client(people.alice) as on_a, b.client(people.alice) as on_b:
        first, second = create_conversation(on_a), create_conversation(on_b)
        start(on_a, first, [{"say": "Hi."}])
        start(on_b, second, [{"say": "Hi."}])
        for client, cid in ((on_a, second), (on_b, first)):
            refused = client.post(f"/api/conversations/{cid}/turns/", json={"input": "[]"})
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "throttled"
            assert 3000 < int(refused.headers["retry-after"]) <= 3600

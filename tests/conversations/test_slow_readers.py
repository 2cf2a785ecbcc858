"""A client that stops reading its socket or its tail costs the server a bounded buffer, not the
stream: its socket is closed with 4408, its tail ended with fell_behind, once it has read nothing
for a while, and it resumes from its seq."""

import asyncio
import json
import socket
import time

import psutil
import pytest
from websockets.exceptions import ConnectionClosed

from conversations.sse import SLICE_BYTES
from tests.conftest import events_until_terminal, receive_json, wait_for_turn_end
from tests.helpers import (
    TERMINAL,
    assert_contiguous,
    astart_turn,
    raw_sse,
    read_tail,
    read_to_end,
    samples,
    stalled_tail,
)

# About the server's buffers and Daphne's flow control, not the database: run once (in the
# PostgreSQL cluster pass, see tests/passes.py).
pytestmark = pytest.mark.once

FLOOD = 150_000  # events, about 190 bytes each: 27 MiB for every socket that watches it all


def reading_little(server):
    """A socket whose kernel buffer takes 16 KiB: a client that stops reading (websockets stops
    reading from the network once ``max_queue`` frames wait unread) is soon behind."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", server.port))
    return sock


async def closed_behind(client, count: int, timeout: float = 120) -> None:
    """Wait until the server has closed at least ``count`` sockets for falling behind (its
    metric says so)."""
    async with asyncio.timeout(timeout):
        while True:
            page = samples((await client.get("/metrics")).text)
            if page.get(("parley_sockets_behind_total", ()), 0) >= count:
                return
            await asyncio.sleep(0.05)


async def keep_up(
    server, cid: str, person, turn_id: str, after: int, timeout: float
) -> tuple[list, int]:
    """Every event after seq ``after`` up to the turn's end, read by a client that reads all it
    gets, and how many times it was closed for falling behind. On a machine so busy that even
    this client is left unscheduled past the stall time, the server closes it with 4408 too: it
    resumes from its last seq, as the page does, so what it has in the end is still the whole
    stream."""
    events = []
    behind = 0
    async with asyncio.timeout(timeout):
        while True:
            since = events[-1]["seq"] if events else after
            async with server.connect(cid, person, from_seq=since) as ws:
                try:
                    while True:
                        frame = json.loads(await ws.recv())
                        if "seq" not in frame:
                            continue
                        events.append(frame)
                        if frame["turn"] == turn_id and frame["type"] in TERMINAL:
                            return events, behind
                except ConnectionClosed as closed:
                    if closed.rcvd is None or closed.rcvd.code != 4408:
                        raise
                    behind += 1


async def read_until_closed(slow) -> list[dict]:
    """What reached a socket the server closed for falling behind, then its 4408."""
    received = []
    try:
        while True:
            frame = json.loads(await asyncio.wait_for(slow.recv(), 30))
            if "seq" in frame:
                received.append(frame)
    except ConnectionClosed as closed:
        assert closed.rcvd is not None and closed.rcvd.code == 4408, closed
    return received


SLOW = 4  # sockets that read nothing: what they leave unread dwarfs the process's own noise


async def test_a_client_that_reads_nothing_is_closed_with_4408_and_resumes_with_nothing_lost(
    make_server, people, flood_conversation
):
    server = make_server(PARLEY_SOCKET_BUFFER_BYTES="65536", PARLEY_SOCKET_STALL_SECONDS="2")
    cid = flood_conversation.pk
    process = psutil.Process(server.process.pid)
    async with server.async_client(people.alice) as client:
        # A first flood, watched by someone who keeps up, brings the server's memory to what
        # such a flood takes.
        warm_up = await astart_turn(client, cid, f"{FLOOD} events")
        _, warm_up_behind = await keep_up(
            server, cid, people.alice, warm_up["turn"], after=0, timeout=120
        )
        first = FLOOD + 3  # the second turn's turn.started

        slow = [
            await server.connect(
                cid, people.bob, from_seq=first - 1, sock=reading_little(server), max_queue=4
            )
            for _ in range(SLOW)
        ]
        try:
            for each in slow:
                assert (await receive_json(each))["type"] == "ws.ready"
            before = peak = process.memory_info().rss

            async def sample():
                nonlocal peak
                while True:
                    peak = max(peak, process.memory_info().rss)
                    await asyncio.sleep(0.05)

            # The second flood: the slow clients read nothing of it, until the server has closed
            # their sockets (each read nothing for 2 s); the other watcher keeps up throughout.
            sampling = asyncio.create_task(sample())
            try:
                started = await astart_turn(client, cid, f"{FLOOD} events")
                watching = asyncio.create_task(
                    keep_up(server, cid, people.alice, started["turn"], first - 1, timeout=180)
                )
                await closed_behind(client, SLOW)
                # The slow clients read at last: what reached them, then the close.
                received = [await read_until_closed(each) for each in slow]
                watched, watched_behind = await watching
                # Every close for falling behind is one of the slow clients' or the keeping-up
                # watcher's own, each resumed.
                page = samples((await client.get("/metrics")).text)
                closes = page[("parley_sockets_behind_total", ())]
                assert closes == SLOW + warm_up_behind + watched_behind, closes
            finally:
                sampling.cancel()
            assert_contiguous(watched, first, first + FLOOD + 1)
        finally:
            for each in slow:
                await each.close()

    # The server kept a bounded buffer for each, not the flood: it sent what the buffers between
    # them hold, and its memory did not grow by what the clients left unread.
    for got in received:
        assert len(got) < FLOOD / 2, len(got)
        assert_contiguous(got, first)
    grown = peak - before
    unread = sum(FLOOD - len(got) for got in received) * 190
    assert grown < unread / 4, f"memory grew {grown >> 20} MiB with {unread >> 20} MiB unread"

    # One resumes from the last event it had, and has the whole turn, once.
    last = received[0][-1]["seq"] if received[0] else first - 1
    async with server.connect(cid, people.bob, from_seq=last) as again:
        assert (await receive_json(again))["type"] == "ws.ready"
        rest = await events_until_terminal(again, started["turn"], timeout=60)
    assert_contiguous(received[0] + rest, first, first + FLOOD + 1)


# Tails ------------------------------------------------------------------------------------------

TAIL_FLOOD = 100_000  # events, about 190 bytes each


def _until_behind(server, client, process, count: int) -> tuple[int, int]:
    """Sample the server until ``count`` tails in all have ended for falling behind: the
    highest resident memory and the most bytes held for tails' clients seen meanwhile."""
    peak_rss = peak_unsent = 0
    deadline = time.monotonic() + 120
    while True:
        page = samples(client.get("/metrics").text)
        peak_unsent = max(peak_unsent, page[("parley_tail_unsent_bytes", ())])
        peak_rss = max(peak_rss, process.memory_info().rss)
        if page.get(("parley_tails_behind_total", ())) == count:
            return peak_rss, peak_unsent
        assert time.monotonic() < deadline, f"{count} tails did not fall behind: {page}"
        time.sleep(0.05)


def _fell_behind(raw: bytes, first: int) -> list[dict]:
    """The events a stalled tail was sent, checked: contiguous from ``first``, then the
    fell_behind error naming the last of them."""
    status, events = raw_sse(raw)
    assert status == 200
    *received, error = events
    assert error["event"] == "error", error
    assert error["data"]["error"]["code"] == "fell_behind", error
    received = [event["data"] for event in received]
    assert_contiguous(received, first)
    last = received[-1]["seq"] if received else first - 1
    assert error["data"]["error"]["last_event_id"] == last
    return received


@pytest.mark.timeout(300)
def test_tails_that_read_nothing_cost_a_bounded_buffer_end_and_resume_with_nothing_lost(
    make_server, people, flood_conversation
):
    buffer = 65536
    server = make_server(PARLEY_SOCKET_BUFFER_BYTES=str(buffer), PARLEY_SOCKET_STALL_SECONDS="2")
    bound = buffer + SLICE_BYTES + 4096  # a buffer, a slice written past it, the end
    cid = flood_conversation.pk
    process = psutil.Process(server.process.pid)
    with server.client(people.alice) as client:
        # A first flood, tailed whole by a client that keeps up, brings the server's memory to
        # what such a flood takes.
        warm_up = client.post(f"/api/conversations/{cid}/turns/", json={"input": f"{TAIL_FLOOD}"})
        events, done = read_tail(client, cid, params={"from_seq": warm_up.json()["seq"] - 1})
        assert done == {"latest_seq": events[-1]["seq"]}

        # Four raw-TCP tails of the second flood whose clients read nothing.
        started = client.post(f"/api/conversations/{cid}/turns/", json={"input": f"{TAIL_FLOOD}"})
        first = started.json()["seq"]
        before = process.memory_info().rss
        tails = [stalled_tail(server, people.bob, cid, first - 1) for _ in range(4)]
        peak_rss, peak_unsent = _until_behind(server, client, process, 4)
        # Each holds at most a buffer and a slice, not the stream it left unread.
        assert peak_unsent <= 4 * bound, peak_unsent
        received = [_fell_behind(read_to_end(tail), first) for tail in tails]
        unread = sum(TAIL_FLOOD - len(got) for got in received) * 190
        assert all(len(got) < TAIL_FLOOD / 2 for got in received)
        grown = peak_rss - before
        assert grown < unread / 2, f"memory grew {grown >> 20} MiB, {unread >> 20} MiB unread"

        # A tail resumed from the last event it had gets the rest of the turn, once.
        wait_for_turn_end(client, cid, timeout=120)
        last = received[0][-1]["seq"]
        with server.client(people.bob) as bob:
            rest, done = read_tail(bob, cid, headers={"Last-Event-ID": str(last)})
        assert_contiguous(received[0] + rest, first, first + TAIL_FLOOD + 1)
        assert rest[-1]["type"] == "turn.completed"

        # A viewer replaying the whole finished conversation over ten tails that read nothing:
        # events are read from the database as the clients take them, so the server holds about
        # a page and a buffer for each, however long the conversation.
        latest = rest[-1]["seq"]
        before = process.memory_info().rss
        tails = [stalled_tail(server, people.carol, cid, 0) for _ in range(10)]
        peak_rss, peak_unsent = _until_behind(server, client, process, 14)
        assert peak_unsent <= 10 * bound, peak_unsent
        received = [_fell_behind(read_to_end(tail), 1) for tail in tails]
        unread = sum(latest - len(got) for got in received) * 190
        grown = peak_rss - before
        assert grown < unread / 4, f"memory grew {grown >> 20} MiB, {unread >> 20} MiB unread"
        # Every tail has ended, and given its place back.
        page = samples(client.get("/metrics").text)
        assert page[("parley_tails_open", ())] == 0
        assert page[("parley_tail_unsent_bytes", ())] == 0

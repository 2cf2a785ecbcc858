"""A client that stops reading its socket costs the server a bounded buffer, not the stream: its
socket is closed with 4408 once it has read nothing for a while, and it resumes from its seq."""

import asyncio
import json
import socket

import psutil
from websockets.exceptions import ConnectionClosed

from tests.conftest import events_until_terminal, receive_json
from tests.helpers import assert_contiguous, astart_turn, samples

FLOOD = 150_000  # events, about 190 bytes each: 27 MiB for every socket that watches it all


def reading_little(server):
    """A socket whose kernel buffer takes 16 KiB: a client that stops reading (websockets stops
    reading from the network once ``max_queue`` frames wait unread) is soon behind."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", server.port))
    return sock


async def closed_behind(client, timeout: float = 120) -> None:
    """Wait until the server has closed a socket for falling behind (its metric says so)."""
    async with asyncio.timeout(timeout):
        while True:
            page = samples((await client.get("/metrics")).text)
            if page.get(("parley_sockets_behind_total", ())) == 1.0:
                return
            await asyncio.sleep(0.05)


async def test_a_client_that_reads_nothing_is_closed_with_4408_and_resumes_with_nothing_lost(
    make_server, people, flood_conversation
):
    server = make_server(PARLEY_SOCKET_BUFFER_BYTES="65536", PARLEY_SOCKET_STALL_SECONDS="2")
    cid = flood_conversation.pk
    process = psutil.Process(server.process.pid)
    async with (
        server.connect(cid, people.alice) as watcher,
        server.async_client(people.alice) as client,
    ):
        assert (await receive_json(watcher))["type"] == "ws.ready"
        # A first flood, watched by someone who keeps up, brings the server's memory to what
        # such a flood takes.
        warm_up = await astart_turn(client, cid, f"{FLOOD} events")
        await events_until_terminal(watcher, warm_up["turn"], timeout=120)
        first = FLOOD + 3  # the second turn's turn.started

        slow = await server.connect(
            cid, people.bob, from_seq=first - 1, sock=reading_little(server), max_queue=4
        )
        try:
            assert (await receive_json(slow))["type"] == "ws.ready"
            before = peak = process.memory_info().rss

            async def sample():
                nonlocal peak
                while True:
                    peak = max(peak, process.memory_info().rss)
                    await asyncio.sleep(0.05)

            # The second flood: the slow client reads nothing of it, until the server has closed
            # its socket (it read nothing for 2 s); the other watcher keeps up throughout.
            sampling = asyncio.create_task(sample())
            try:
                started = await astart_turn(client, cid, f"{FLOOD} events")
                watching = asyncio.create_task(
                    events_until_terminal(watcher, started["turn"], timeout=180)
                )
                await closed_behind(client)
                # The slow client reads at last: what reached it, then the close.
                received = []
                try:
                    while True:
                        frame = json.loads(await asyncio.wait_for(slow.recv(), 30))
                        if "seq" in frame:
                            received.append(frame)
                except ConnectionClosed as closed:
                    assert closed.rcvd is not None and closed.rcvd.code == 4408, closed
                watched = await watching
            finally:
                sampling.cancel()
            assert_contiguous(watched, first, first + FLOOD + 1)
        finally:
            await slow.close()

    # The server kept a bounded buffer for it, not the flood: it sent what the buffers between
    # them hold, and its memory did not grow by what the client left unread.
    assert len(received) < FLOOD / 2, len(received)
    assert_contiguous(received, first)
    grown = peak - before
    unread = (FLOOD - len(received)) * 190
    assert grown < unread / 2, f"memory grew {grown >> 20} MiB with {unread >> 20} MiB unread"

    # It resumes from the last event it had, and has the whole turn, once.
    last = received[-1]["seq"] if received else first - 1
    async with server.connect(cid, people.bob, from_seq=last) as again:
        assert (await receive_json(again))["type"] == "ws.ready"
        rest = await events_until_terminal(again, started["turn"], timeout=60)
    assert_contiguous(received + rest, first, first + FLOOD + 1)

"""Replay beside a peer: the same stored events replayed by Parley (to a socket and over
``/tail/``) and by django-eventstream (``bench/peer_app.py``: its database storage, under Daphne),
read by the same client, rounds taking turns.

For each: events per second for the whole replay (from the first event on), the server's CPU
per event (its process's user + system time over the round), and the time to the first event of
a replay from the middle (from opening the connection or sending the request).
"""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent


async def export_events(parley, cid: str) -> list[str]:
    """Every event of a conversation, each a JSON document, through the REST API."""
    after, lines = 0, []
    while True:
        page = (
            await parley.http.get(
                f"/api/conversations/{cid}/events/", params={"after_seq": after, "limit": 1000}
            )
        ).json()
        lines += [json.dumps(event, separators=(",", ":")) for event in page["events"]]
        after = page["next_after_seq"]
        if not page["has_more"]:
            return lines


def prepare_peer(scratch: Path, events: list[str]) -> dict:
    """The peer's database with ``events`` stored; returns the environment that names it."""
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / "events.jsonl"
    path.write_text("".join(f"{line}\n" for line in events))
    env = {"PEER_DB": str(scratch / "peer.sqlite3")}
    subprocess.run(
        [sys.executable, "-m", "bench.peer_app", "load", str(path)],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    return env


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def parley_socket(parley, cid: str, after: int, count: int) -> tuple[float, float]:
    """Seconds to the first event, and to the ``count``-th, of a socket opened at ``after``."""
    started = time.perf_counter()
    async with parley.watch(cid, from_seq=after) as ws:
        await ws.recv()  # ws.ready
        await ws.recv()
        first = time.perf_counter() - started
        for _ in range(count - 1):
            await ws.recv()
    return first, time.perf_counter() - started


async def sse_replay(
    http: httpx.AsyncClient, url: str, headers: dict, count: int
) -> tuple[float, float]:
    """Seconds to the first event, and to the ``count``-th, of an SSE replay."""
    started = time.perf_counter()
    first, seen = None, 0
    async with http.stream("GET", url, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                seen += 1
                if first is None:
                    first = time.perf_counter() - started
                if seen == count:
                    return first, time.perf_counter() - started
    raise AssertionError(f"the stream ended after {seen} of {count} events")


async def run(parley, cid: str, total: int, rounds: int, scratch: Path, Daphne) -> dict:
    """Parley's replay of conversation ``cid`` (``total`` events) against the peer's."""
    events = await export_events(parley, cid)
    assert len(events) == total, (len(events), total)
    env = prepare_peer(scratch, events)
    peer = Daphne(
        [sys.executable, "-m", "daphne", "bench.peer_app:application"], env, scratch / "peer.log"
    )
    middle = total // 2
    whole = total - 1  # every replay starts after the first event: the peer resumes from an id
    names = ("socket", "tail", "peer")
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpu_us: dict[str, list[float]] = {name: [] for name in names}
    firsts: dict[str, list[float]] = {name: [] for name in names}
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{peer.port}", timeout=120
        ) as peer_http:

            def peer_from(after: int):
                headers = {"Last-Event-ID": f"bench:{after}"}
                return sse_replay(peer_http, "/events/bench/", headers, total - after)

            def tail_from(after: int):
                url = f"/api/conversations/{cid}/tail/?from_seq={after}"
                return sse_replay(parley.http, url, {}, total - after)

            def socket_from(after: int):
                return parley_socket(parley, cid, after, total - after)

            replays = {"socket": socket_from, "tail": tail_from, "peer": peer_from}
            pids = {"socket": parley.server.process.pid, "tail": parley.server.process.pid}
            pids["peer"] = peer.process.pid
            for _ in range(rounds):
                for name, replay in replays.items():
                    cpu = cpu_seconds(pids[name])
                    _, took = await replay(1)
                    rates[name].append(whole / took)
                    cpu_us[name].append((cpu_seconds(pids[name]) - cpu) / whole * 1e6)
                    first, _ = await replay(middle)
                    firsts[name].append(first * 1000)
    finally:
        peer.stop()
    median = statistics.median
    return {
        "events": whole,
        "from_middle": middle,
        "events_per_s": {name: median(values) for name, values in rates.items()},
        "server_cpu_us_per_event": {name: median(values) for name, values in cpu_us.items()},
        "first_event_ms": {name: median(values) for name, values in firsts.items()},
        "x_peer": {
            name: median(
                [mine / theirs for mine, theirs in zip(rates[name], rates["peer"], strict=True)]
            )
            for name in ("socket", "tail")
        },
    }


def report(replay: dict) -> list[str]:
    rate, cpu, first, x = (
        replay["events_per_s"],
        replay["server_cpu_us_per_event"],
        replay["first_event_ms"],
        replay["x_peer"],
    )
    lines = [
        f"Replay of {replay['events']:,} stored events beside django-eventstream (same events, "
        "same client, rounds taking turns):",
        f"{'':34}{'events/s':>11}{'server CPU/event':>18}{'x peer':>9}{'aim':>7}"
        f"{'first event*':>14}",
    ]
    rows = (
        ("Parley, socket", "socket", "socket"),
        ("Parley, /tail/ (SSE)", "tail", "tail"),
        ("django-eventstream (SSE)", "peer", None),
    )
    for label, key, ratio in rows:
        lines.append(
            f"{label:34}{rate[key]:>11,.0f}{cpu[key]:>15.1f} µs"
            f"{'' if ratio is None else f'{x[ratio]:.2f}':>9}{'' if ratio is None else '>= 3':>7}"
            f"{first[key]:>11.1f} ms"
        )
    lines.append(
        f"* replay from event {replay['from_middle']:,}: from connecting (socket) or sending the "
        "request (SSE) to the first event; aim: Parley's no later than the peer's"
    )
    return lines

"""A Redis failover under a live stream, across two Parley processes: a stage of `make bench`.

PostgreSQL, and Redis through Sentinel (ops.servers.RedisSentinels: a primary, its replica
and three sentinels from ops/deploy/sentinel.conf, down-after-milliseconds 1000), and two
Parley processes A and B asking the sentinels for the primary. Each run: a flood turn started
on B streams an event every 2 ms to a socket on B (where it runs: no Redis in between) and a
socket on A (over Redis: A's feed poll is an hour, so nothing but the layer brings B's events
to A live); the primary is killed with SIGKILL mid-stream. Measured:

- **time without wake-ups**: from the kill to the first frame A's socket gets again (the
  first live frame over the new primary, which shows A the hole it then reads from the
  database);
- **the sentinels' failover**, its twin: from the kill to the first ``+switch-master`` in
  the sentinels' logs (their clocks are this machine's), and to when every sentinel names a
  promoted primary that answers as one;
- **caught up from the database**: the events A's socket got that B had before A's first
  frame after the kill, that is, that could not come live.

Every run also checks that A's socket got every event once, in order, as stored. A fresh
set of Redis servers and processes per run (the killed primary is not brought back).

Run alone with ``.venv/bin/python -m bench.failover [--runs N]``; bench/run.py runs it as a
stage.
"""

import argparse
import asyncio
import json
import shutil
import sys
import time
from contextlib import ExitStack

from bench.run import Daphne, Parley, median, prepare_parley
from ops.sentinels import RedisSentinels
from ops.servers import Postgres, scratch_folder

DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 10000
PACE_MS = 2
# After A's first frame following the kill, the stream goes on this long before it is stopped.
AFTER_SECONDS = 2.0
# An event B had this long after the kill was published after the primary died.
SETTLE_SECONDS = 0.05


async def _read(ws, arrivals: dict[int, float], arrived: asyncio.Event) -> None:
    """Note when each event arrives (Unix time), until the turn ends."""
    while True:
        frame = json.loads(await ws.recv())
        if "seq" not in frame:
            continue
        arrivals.setdefault(frame["seq"], time.time())
        arrived.set()
        if frame["type"] in ("turn.completed", "turn.failed", "turn.cancelled"):
            return


async def _until(check, arrived: asyncio.Event) -> None:
    """Wait until ``check()`` is true, looking again as each event arrives."""
    while not check():
        arrived.clear()
        await arrived.wait()


async def one_run(scratch, env: dict, token: str, number: int) -> dict:
    python = sys.executable
    with ExitStack() as stack:
        sentinels = RedisSentinels(
            scratch / f"sentinels-{number}",
            down_after_ms=DOWN_AFTER_MS,
            failover_timeout_ms=FAILOVER_TIMEOUT_MS,
        )
        stack.callback(sentinels.stop)
        sentinels.start()
        base = {**env, **sentinels.parley_env()}
        servers = {}
        for name, extra in (("a", {"PARLEY_FEED_POLL_SECONDS": "3600"}), ("b", {})):
            servers[name] = Daphne(
                [python, "-m", "daphne", "config.asgi:application"],
                {**base, **extra},
                scratch / f"parley-{name}-{number}.log",
            )
            stack.callback(servers[name].stop)
        a, b = Parley(servers["a"], token), Parley(servers["b"], token)
        try:
            return await _measure(a, b, sentinels)
        finally:
            await a.http.aclose()
            await b.http.aclose()


async def _measure(a: Parley, b: Parley, sentinels: RedisSentinels) -> dict:
    cid = await b.conversation()
    on_a, on_b = {}, {}
    arrived = asyncio.Event()  # on A
    async with a.watch(cid) as ws_a, b.watch(cid) as ws_b:
        await ws_a.recv()  # ws.ready
        await ws_b.recv()
        reading = [
            asyncio.create_task(_read(ws_a, on_a, arrived)),
            asyncio.create_task(_read(ws_b, on_b, asyncio.Event())),
        ]
        turn = (await b.start(cid, f"1000000 events every {PACE_MS}"))["turn"]
        async with asyncio.timeout(60):
            await _until(lambda: len(on_a) >= 500, arrived)
        killed_at = time.time()
        await asyncio.to_thread(sentinels.kill_primary)
        # Events B had from here on were published after the primary died: none can reach A
        # but over the new primary, or from the database once a frame that did shows the hole.
        dead_at = time.time() + SETTLE_SECONDS
        await asyncio.to_thread(sentinels.wait_for_failover, 120)
        promoted_at = time.time()

        def after_the_kill() -> list[float]:
            return [on_a[seq] for seq, when in list(on_b.items()) if when > dead_at and seq in on_a]

        async with asyncio.timeout(120):
            await _until(after_the_kill, arrived)
        back_at = min(after_the_kill())
        await asyncio.sleep(AFTER_SECONDS)
        stopped = await b.http.post(f"/api/conversations/{cid}/cancel/", json={"turn_id": turn})
        stopped.raise_for_status()
        async with asyncio.timeout(120):
            await asyncio.gather(*reading)
    stored = await _stored_seqs(b, cid)
    got = sorted(on_a)
    assert got == stored, "A's socket missed or repeated events"
    caught_up = sum(1 for seq in on_a if killed_at <= on_b.get(seq, 0.0) < back_at)
    switched = sentinels.switched_at()
    return {
        "without_wakeups_s": back_at - killed_at,
        "sentinel_switch_s": switched[0] - killed_at if switched else None,
        "promoted_and_answering_s": promoted_at - killed_at,
        "caught_up_from_database": caught_up,
        "events_on_a": len(on_a),
        "stream_events_per_s": (len(on_b) - 1) / (max(on_b.values()) - min(on_b.values())),
    }


async def _stored_seqs(parley: Parley, cid: str) -> list[int]:
    seqs, after = [], 0
    while True:
        page = (
            await parley.http.get(
                f"/api/conversations/{cid}/events/", params={"after_seq": after, "limit": 1000}
            )
        ).json()
        seqs += [event["seq"] for event in page["events"]]
        after = page["next_after_seq"]
        if not page["has_more"]:
            return seqs


async def run(runs: int) -> dict:
    with ExitStack() as stack:
        scratch = scratch_folder("parley-bench-failover-")
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        postgres = Postgres(scratch / "postgres", durable=False)
        stack.callback(postgres.stop, "immediate")
        postgres.start()
        postgres.create_database("parley")
        env, token = prepare_parley(
            scratch / "var",
            {"DATABASE_URL": postgres.url("parley"), "PARLEY_SHUTDOWN_GRACE_SECONDS": "0"},
        )
        measured = []
        for number in range(runs):
            print(f"  run {number + 1} of {runs} …", flush=True)
            measured.append(await one_run(scratch, env, token, number))
    return {
        "runs": runs,
        "settings": {
            "down_after_milliseconds": DOWN_AFTER_MS,
            "failover_timeout_milliseconds": FAILOVER_TIMEOUT_MS,
            "event_every_ms": PACE_MS,
            "feed_poll_seconds_on_a": 3600,
        },
        "median": {
            key: median([m[key] for m in measured if m[key] is not None])
            for key in measured[0]
            if key != "events_on_a"
        },
        "raw": measured,
    }


def report(results: dict) -> list[str]:
    m = results["median"]
    lines = [
        f"A Redis failover (Sentinel, down-after {DOWN_AFTER_MS} ms) mid-stream, "
        f"{results['runs']} runs, medians:",
        f"  sentinels' failover, kill -> +switch-master: {m['sentinel_switch_s']:.2f} s "
        f"(promoted and answering: {m['promoted_and_answering_s']:.2f} s)",
        f"  Parley without wake-ups, kill -> first frame on A again: "
        f"{m['without_wakeups_s']:.2f} s "
        f"({m['without_wakeups_s'] / m['sentinel_switch_s']:.2f} x the sentinels' failover)",
        f"  events A's socket caught up from the database: {m['caught_up_from_database']:.0f} "
        f"(of a stream of {m['stream_events_per_s']:,.0f} events/s), none lost",
        "  per run (without wake-ups s / switch s / caught up): "
        + "; ".join(
            f"{r['without_wakeups_s']:.2f} / {r['sentinel_switch_s']:.2f} / "
            f"{r['caught_up_from_database']}"
            for r in results["raw"]
        ),
    ]
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="failovers to measure (5)")
    args = parser.parse_args()
    results = asyncio.run(run(args.runs))
    print()
    print("\n".join(report(results)))

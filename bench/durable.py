"""The durable-turns stage of the benchmark: what a parked turn costs once it is released from
memory, how fast an answer brings a released turn back, and how fast a restarted process resumes
a waiting turn. The in-memory figures it is compared with come from the main stage, in the same
run (a process whose turns are never released)."""

import asyncio
import json
import sys
import time
from pathlib import Path

RELEASE_AFTER = 1.0
ROUNDS = 4


async def metric(parley, name: str) -> float:
    text = (await parley.http.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


async def wait_metric(parley, name: str, at_least: float, timeout: float = 600) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if await metric(parley, name) >= at_least:
                return
            await asyncio.sleep(0.2)


async def wait_metric_at_most(parley, name: str, at_most: float, timeout: float = 600) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if await metric(parley, name) <= at_most:
                return
            await asyncio.sleep(0.2)


async def park(parley, cids: list[str], pending_before: int) -> None:
    """Start a builtin ``summarize`` turn in each conversation (each parks on a file picker),
    20 at a time, and wait until every question is pending (counted, not listed: a listing of
    every pending question would itself grow the process's memory)."""
    semaphore = asyncio.Semaphore(20)

    async def start(cid):
        async with semaphore:
            await parley.start(cid, "summarize")

    await asyncio.gather(*(start(cid) for cid in cids))
    await wait_metric(parley, "parley_questions_pending", pending_before + len(cids))


async def pending_question(parley, cid: str) -> str:
    state = (await parley.http.get(f"/api/conversations/{cid}/in-flight/")).json()
    return state["pending_selections"][0]["id"]


async def conversations(parley, count: int) -> list[str]:
    semaphore = asyncio.Semaphore(20)

    async def one():
        async with semaphore:
            return await parley.conversation(agent="builtin")

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def answer_to_resumed(parley, cid: str, selection_id: str) -> tuple[float, float]:
    """Milliseconds from sending the answer to a released turn to its ``turn.resumed`` and to
    the resumed agent's next event, on a socket watching from the question on."""
    latest = (await parley.http.get(f"/api/conversations/{cid}/in-flight/")).json()["latest_seq"]
    async with parley.watch(cid, from_seq=latest) as ws:
        await ws.recv()  # ws.ready
        started = time.perf_counter()
        response = await parley.http.post(
            f"/api/selections/{selection_id}/reply/", json={"answer": "README.md"}
        )
        response.raise_for_status()
        while '"type":"turn.resumed"' not in (await ws.recv())[:60]:
            pass
        resumed = (time.perf_counter() - started) * 1000
        await ws.recv()
        following = (time.perf_counter() - started) * 1000
        while '"type":"turn.completed"' not in (await ws.recv())[:60]:
            pass
    return resumed, following


async def run(scratch: Path, quick: bool, *, Daphne, Parley, prepare_parley, percentile) -> dict:
    env, token = prepare_parley(
        scratch,
        {
            "PARLEY_RELEASE_PARKED_AFTER_SECONDS": str(RELEASE_AFTER),
            # Nothing expires while the stage runs, however slow the machine.
            "PARLEY_SELECTION_TIMEOUT_SECONDS": "3600",
        },
    )
    python = sys.executable
    count = 1000 if quick else 2000
    samples = 20 if quick else 50

    def start_server(n: int):
        return Daphne(
            [python, "-m", "daphne", "config.asgi:application"], env, scratch / f"durable-{n}.log"
        )

    server = start_server(0)
    parley = Parley(server, token)
    try:
        # Memory: park in four rounds; each is read once every turn of it has left memory. The
        # first round also warms the process up (its caches, pools and statements), so the
        # growth per turn is read over the three after it.
        cids = await conversations(parley, count + samples)
        await asyncio.sleep(1)
        rss = [server.rss]
        quarter = count // ROUNDS
        for number in range(ROUNDS):
            await park(parley, cids[number * quarter : (number + 1) * quarter], number * quarter)
            # Every turn of the round has left memory: none of their questions is held there
            # (counted so rather than by releases, since a turn whose release raced its own
            # lease check leaves memory let go by that check instead).
            await asyncio.sleep(0.5)  # the last questions stored are parked by now
            await wait_metric_at_most(parley, "parley_questions_parked", 0)
            await asyncio.sleep(1)
            rss.append(server.rss)
        in_memory = await metric(parley, "parley_questions_parked")
        # Latency: an answer to a turn released from memory, until it has resumed.
        resumed, following = [], []
        for cid in cids[:samples]:
            selection_id = await pending_question(parley, cid)
            first, second = await answer_to_resumed(parley, cid, selection_id)
            resumed.append(first)
            following.append(second)
        # A restart: the process stops (SIGTERM) with turns waiting; a new one starts, and an
        # answer to each resumes it there.
        restart_cids = cids[count : count + samples]
        await park(parley, restart_cids, count - samples)
    finally:
        await parley.http.aclose()
        server.stop()
    server = start_server(1)
    parley = Parley(server, token)
    try:
        after_restart = []
        for cid in restart_cids:
            selection_id = await pending_question(parley, cid)
            first, _ = await answer_to_resumed(parley, cid, selection_id)
            after_restart.append(first)
    finally:
        await parley.http.aclose()
        server.stop()

    def spread(values):
        return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}

    return {
        "turns": count,
        "release_after_s": RELEASE_AFTER,
        "rss_mb": [value / 2**20 for value in rss],
        "kb_per_released_turn": (rss[-1] - rss[0]) / count / 1024,
        "kb_per_released_turn_after_first_round": (rss[-1] - rss[1])
        / (count - count // ROUNDS)
        / 1024,
        "questions_in_memory": in_memory,
        "answer_to_resumed_ms": spread(resumed),
        "answer_to_next_event_ms": spread(following),
        "after_restart_answer_to_resumed_ms": spread(after_restart),
        "samples": samples,
    }


def report(durable: dict, parked: dict, questions: dict) -> list[str]:
    d = durable
    return [
        f"Durable turns ({d['turns']:,} parked turns, released after "
        f"{d['release_after_s']:.0f} s):",
        f"  in memory: {parked['kb_per_parked_turn']:.1f} KB per parked turn; released: "
        f"{d['kb_per_released_turn']:.1f} KB per turn "
        f"({d['kb_per_released_turn_after_first_round']:.1f} KB after the first quarter; "
        f"{json.dumps([round(v, 1) for v in d['rss_mb']])} MB resident at 0 and after each "
        "quarter; "
        f"{d['questions_in_memory']:.0f} questions left in memory)",
        f"  answer -> a released turn's turn.resumed: p50 "
        f"{d['answer_to_resumed_ms']['p50']:.1f} ms, p99 {d['answer_to_resumed_ms']['p99']:.1f} ms;"
        f" its next event p50 {d['answer_to_next_event_ms']['p50']:.1f} ms (a turn in memory: "
        f"p50 {questions['next_event']['p50']:.1f} ms)",
        f"  after a restart, answer -> turn.resumed: p50 "
        f"{d['after_restart_answer_to_resumed_ms']['p50']:.1f} ms, p99 "
        f"{d['after_restart_answer_to_resumed_ms']['p99']:.1f} ms ({d['samples']} samples)",
    ]

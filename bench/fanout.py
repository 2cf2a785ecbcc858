"""Figures 2 and 3 of bench/ratios.py: server CPU per delivered event at thousands of sockets,
and resident memory per open socket, each beside its bare twin.

bench/sockets.py's workload: ``sockets`` sockets over 100 conversations, 20 of which stream 20
events a second (a flood turn's tool call every 100 ms) for ``seconds``. Its twin, bench/
bare_app.py's ``/fan/``: as many sockets in 100 groups, 20 groups each sent an event-sized
frame 20 times a second for as long, through Daphne's send. Both sets of sockets are opened once
(by bench/sockets.py's client processes) and stay open; the memory figure is the servers'
resident memory over the opening (after a warm-up) per socket; then the streams take turns,
bare then Parley, each burst's CPU (the server processes' user + system time) divided by the
event frames the clients read in it. On two processes the sockets are split over A and B and
the CPU is A's + B's; PostgreSQL's and Redis's is given beside.
"""

import asyncio
from pathlib import Path

import httpx

from bench import gauges
from bench.sockets import STREAMING, Workers, profiling, stop_profiling

CPU_AIM = 1.5
MEMORY_AIM = 1.5
RATE = 20  # events a second in each streaming conversation


async def _warm_up(parleys, bare, token: str) -> None:
    """A stream watched on each Parley process, and a bare fan-out, before memory is read."""
    a = parleys[0]
    cid = await a.conversation()
    watching = [await p.watch(cid).__aenter__() for p in parleys]
    try:
        for ws in watching:
            await ws.recv()
        await a.start(cid, "200 events")
        for ws in watching:
            while '"type":"turn.completed"' not in (await ws.recv())[:60]:
                pass
    finally:
        for ws in watching:
            await ws.close()
    sockets = [await bare.ws("/fan/0/").__aenter__() for _ in range(20)]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bare.port}", timeout=60) as http:
        await http.post("/fan/run/", json={"groups": 1, "rate": RATE, "seconds": 1})
    for ws in sockets:
        await ws.close()
    await asyncio.sleep(1)


async def _burst(kind: str, pids, workers, start, backing=(), spy_into=None) -> dict:
    """One stream burst: ``start()`` sends it and returns once it is over; CPU per frame read."""
    await gauges.wait_idle(pids)
    spies = (
        [profiling(pid, spy_into, f"fanout-{n}") for n, pid in enumerate(pids)] if spy_into else []
    )
    meter = gauges.ClientMeter([p.pid for w in workers for p in w.processes])
    frames = sum([await w.frames() for w in workers])
    cpu, backed = gauges.cpu_seconds(pids), gauges.cpu_seconds(backing)
    await start()
    await asyncio.sleep(0.5)  # the last frames read
    frames = sum([await w.frames() for w in workers]) - frames
    cpu, backed = gauges.cpu_seconds(pids) - cpu, gauges.cpu_seconds(backing) - backed
    client = meter.stop()
    for spy in spies:
        stop_profiling(spy)
    return {
        "frames": frames,
        "cpu_us": cpu * 1e6 / max(frames, 1),
        "backing_cpu_us": backed * 1e6 / max(frames, 1),
        "client": client,
    }


async def run(
    parleys,
    bare,
    token: str,
    conversations: list[str],
    *,
    sockets: int,
    rounds: int,
    seconds: float,
    backing=(),
    profile_into: Path | None = None,
) -> dict:
    """``parleys``: Parley clients (bench/run.py's), one per process; ``bare``: the bare Daphne.
    With ``profile_into``, a missed aim is measured once more with py-spy on Parley's
    processes."""
    a = parleys[0]
    parley_pids = [p.server.process.pid for p in parleys]
    bare_pid = bare.process.pid
    await _warm_up(parleys, bare, token)
    memory_before = {"bare": gauges.rss([bare_pid]), "parley": gauges.rss(parley_pids)}
    paths = [f"/fan/{number}/" for number in range(len(conversations))]
    twin = [Workers(bare.port, token, paths, sockets)]
    share = len(parleys)
    ours = [
        Workers(p.server.port, token, conversations, sockets // share, processes=4 // share)
        for p in parleys
    ]
    try:
        opened, meters = {}, []
        for kind, workers in (("bare", twin), ("parley", ours)):
            for w in workers:
                await w.spawn()
            meters.append(gauges.ClientMeter([p.pid for w in workers for p in w.processes]))
            results = [await w.start() for w in workers]
            meters[-1].stop()
            opened[kind] = sum(r["connected"] for r in results)
            opened[f"{kind}_failed"] = sum(r["failed"] for r in results)
        await asyncio.sleep(2)
        memory_after = {"bare": gauges.rss([bare_pid]), "parley": gauges.rss(parley_pids)}

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bare.port}", timeout=600) as http:

            async def bare_stream():
                spec = {"groups": STREAMING, "rate": RATE, "seconds": seconds}
                (await http.post("/fan/run/", json=spec)).raise_for_status()

            async def parley_stream():
                per_turn = round(RATE * seconds)
                for cid in conversations[:STREAMING]:
                    await a.start(cid, f"{per_turn} events every {2000 / RATE:g}")
                await asyncio.sleep(seconds)
                while True:
                    if not (await a.http.get("/api/in-flight/")).json():
                        return
                    await asyncio.sleep(0.25)

            bursts = {"bare": [], "parley": []}
            for _ in range(rounds):
                bursts["bare"].append(await _burst("bare", [bare_pid], twin, bare_stream))
                bursts["parley"].append(
                    await _burst("parley", parley_pids, ours, parley_stream, backing)
                )
            result = figures(bursts, opened, memory_before, memory_after, sockets)
            result["memory"]["client"] = gauges.worst([m.summary() for m in meters])
            result["profiles"] = []
            if profile_into is not None and result["cpu"]["ratio"] > CPU_AIM:
                await _burst("parley", parley_pids, ours, parley_stream, spy_into=profile_into)
                result["profiles"] = [profile_into / f"fanout-{n}.txt" for n in range(share)]
        for w in twin + ours:
            await w.stop()
        twin, ours = [], []
    finally:
        for w in twin + ours:
            w.kill()
    return result


def figures(bursts: dict, opened: dict, before: dict, after: dict, sockets: int) -> dict:
    from bench.run import percentile

    bare = percentile([b["cpu_us"] for b in bursts["bare"]], 0.5)
    parley = percentile([b["cpu_us"] for b in bursts["parley"]], 0.5)
    kb = {
        kind: (after[kind] - before[kind]) / max(opened[kind], 1) / 1024
        for kind in ("bare", "parley")
    }
    every = [b["client"] for kind in bursts.values() for b in kind]
    return {
        "sockets": sockets,
        "opened": opened,
        "cpu": {
            "rounds": len(bursts["parley"]),
            "parley_us": parley,
            "twin_us": bare,
            "ratio": parley / bare,
            "aim": CPU_AIM,
            "backing_cpu_us": percentile([b["backing_cpu_us"] for b in bursts["parley"]], 0.5),
            "frames": {kind: [b["frames"] for b in values] for kind, values in bursts.items()},
            "client": gauges.worst(every),
            "raw": bursts,
        },
        "memory": {
            "parley_kb": kb["parley"],
            "twin_kb": kb["bare"],
            "ratio": kb["parley"] / kb["bare"] if kb["bare"] > 0 else float("inf"),
            "aim": MEMORY_AIM,
            "rss_bytes": {"before": before, "after": after},
        },
    }

"""Figures 4 and 5 of bench/ratios.py: the answer's path and every hot endpoint's round trip,
each beside its bare twin measured in the same samples, taking turns.

On one process, bench/run.py's ``request_latency``: each sample a bare ASGI POST, a bare DRF
POST and Parley's refused reply, then a turn started, steered and answered, and another started
and stopped, in a watched conversation. Figure 4 is the answer → the resumed turn's next event
on the socket beside the bare ASGI POST; figure 5 each endpoint's own round trip (start, steer,
answer, Stop, the refused reply) beside the bare DRF POST. On two processes, figure 4 is bench/
cluster.py's ``answer_across`` (the turn parked on B, the answer sent to A, the socket on A)
beside the bare ASGI POST, and figure 5 ``request_latency`` on A.
"""

from pathlib import Path

import httpx

from bench import gauges
from bench.run import percentile, request_latency
from bench.sockets import profiling, stop_profiling

ANSWER_AIM = {"S": 3.0, "P": 4.0}
ENDPOINT_AIM = 2.0
ENDPOINTS = (
    ("start", "start a turn", "own_ms"),
    ("steer", "steer", "own_ms"),
    ("reply", "answer", "own_ms"),
    ("cancel", "Stop", "own_ms"),
    ("refused", "the refused reply", "ms"),
)


async def _metered(coroutine):
    meter = gauges.ClientMeter()
    result = await coroutine
    return result, meter.stop()


async def _profiled(pids, into: Path, name: str, coroutine):
    spies = [profiling(pid, into, f"{name}-{n}") for n, pid in enumerate(pids)]
    try:
        await coroutine
    finally:
        for spy in spies:
            stop_profiling(spy)
    return [into / f"{name}-{n}.txt" for n in range(len(pids))]


def _endpoints(q: dict, client: dict) -> dict:
    twin = q["ms"]["drf"]["p50"]
    rows = {}
    for key, _, table in ENDPOINTS:
        ours = q[table][key]["p50"]
        rows[key] = {
            "parley_ms": ours,
            "twin_ms": twin,
            "ratio": ours / twin,
            "aim": ENDPOINT_AIM,
            "client": client,
        }
    return rows


async def run(config: str, a, b, bare, *, samples: int, profile_into: Path | None) -> dict:
    """``a`` (and ``b`` on two processes): bench/run.py's Parley clients; ``bare``: the bare
    Daphne. With ``profile_into``, a missed aim is measured once more (10 samples) with py-spy on
    Parley's processes."""
    bare_url = f"http://127.0.0.1:{bare.port}"
    q, client = await _metered(request_latency(a, bare_url, samples))
    result = {"endpoints": _endpoints(q, client), "raw": {"request_latency": q}}
    if b is None:
        ours, twin = q["ms"]["next_event"]["p50"], q["ms"]["bare"]["p50"]
        answer_client = client
    else:
        from bench.cluster import answer_across

        async with httpx.AsyncClient(base_url=bare_url, headers=a.headers, timeout=120) as http:
            across, answer_client = await _metered(answer_across(a, b, http, samples))
        result["raw"]["answer_across"] = across
        ours = percentile(across["next_event"], 0.5)
        twin = percentile(across["bare"], 0.5)
    result["answer"] = {
        "parley_ms": ours,
        "twin_ms": twin,
        "ratio": ours / twin,
        "aim": ANSWER_AIM[config],
        "client": answer_client,
    }
    if profile_into is None:
        return result
    endpoints_missed = any(r["ratio"] > r["aim"] for r in result["endpoints"].values())
    answer_missed = result["answer"]["ratio"] > result["answer"]["aim"]
    a_pid = a.server.process.pid
    if endpoints_missed or (answer_missed and b is None):
        paths = await _profiled([a_pid], profile_into, "requests", request_latency(a, bare_url, 10))
        for row in result["endpoints"].values():
            row["profiles"] = paths if row["ratio"] > row["aim"] else []
        if b is None:
            result["answer"]["profiles"] = paths if answer_missed else []
    if answer_missed and b is not None:
        from bench.cluster import answer_across

        async with httpx.AsyncClient(base_url=bare_url, headers=a.headers, timeout=120) as http:
            pids = [a_pid, b.server.process.pid]
            work = answer_across(a, b, http, 10)
            result["answer"]["profiles"] = await _profiled(pids, profile_into, "answer", work)
    return result

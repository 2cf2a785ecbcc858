"""Parley's speed as ratios to the bare stack, measured in the same run, taking turns (issue 31).

    make bench                                   (or: .venv/bin/python -m bench.ratios)
    .venv/bin/python -m bench.ratios --quick     # smaller runs: 3-6 minutes
    .venv/bin/python -m bench.ratios --only handshake [--only sockets] [--config S]

Two configurations: S, SQLite and one Parley process; P, PostgreSQL + Redis and two Parley
processes A and B (bench/cluster.py's ``two_processes``). In each, beside a bare Daphne
(bench/bare_app.py): the handshake's CPU (bench/handshakes.py), CPU per delivered event and
memory per socket (bench/fanout.py), the answer's path and the hot endpoints' round trips
(bench/answers.py); and on S, the memory per socket by owner (bench/tracing.py). A figure that
misses its aim is measured once more with py-spy recording the server, and the profile is
summarised under the table (bench/ratio_table.py). Results: bench/results/ratios.json.
"""

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import psutil

from bench import answers, fanout, gauges, handshakes, ratio_table, tracing
from bench.run import Daphne, Parley, prepare_parley

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PROFILES = RESULTS / "profiles"
STAGES = ("handshake", "sockets", "requests", "tracemalloc")
CONVERSATIONS = 100


def sizes(quick: bool) -> dict:
    if quick:
        return {
            "handshake_rounds": 2,
            "handshake_sockets": 200,
            "sockets": 1_000,
            "stream_rounds": 2,
            "stream_seconds": 4,
            "samples": 10,
            "traced_sockets": 300,
        }
    return {
        "handshake_rounds": 5,
        "handshake_sockets": 500,
        "sockets": 5_000,
        "stream_rounds": 3,
        "stream_seconds": 10,
        "samples": 40,
        "traced_sockets": 1_000,
    }


async def conversations(parley: Parley) -> list[str]:
    return [await parley.conversation() for _ in range(CONVERSATIONS)]


async def measure(
    config: str, parleys: list, bare, token: str, backing, stages, size, out: dict
) -> dict:
    """The stages asked for, on one configuration's servers, into ``out`` (which keeps the
    stages done if a later one fails)."""
    a = parleys[0]
    b = parleys[1] if len(parleys) > 1 else None
    into = PROFILES / config
    watched = await conversations(a)

    async def settled():
        """Until Parley's processes are idle: thousands of sockets closed keep a process busy
        for seconds, and a handshake not accepted within Daphne's 5 s is dropped."""
        await gauges.wait_idle([p.server.process.pid for p in parleys], limit=120)

    if "handshake" in stages:
        print(f"{config}: handshakes, {size['handshake_rounds']} rounds taking turns …", flush=True)
        out["handshake"] = await handshakes.run(
            a.server,
            bare,
            token,
            watched,
            rounds=size["handshake_rounds"],
            sockets=size["handshake_sockets"],
            backing=backing,
        )
        if out["handshake"]["ratio"] > handshakes.AIM:
            print(f"{config}: handshake missed its aim: once more under py-spy …", flush=True)
            out["handshake"]["profiles"] = await handshakes.profile(
                a.server, token, watched, size["handshake_sockets"], into
            )
    if "sockets" in stages:
        await settled()
        print(f"{config}: {size['sockets']:,} sockets, streams taking turns …", flush=True)
        out["sockets"] = await fanout.run(
            parleys,
            bare,
            token,
            watched,
            sockets=size["sockets"],
            rounds=size["stream_rounds"],
            seconds=size["stream_seconds"],
            backing=backing,
            profile_into=into,
        )
    if "requests" in stages:
        await settled()
        print(f"{config}: requests, {size['samples']} samples taking turns …", flush=True)
        out["requests"] = await answers.run(
            config, a, b, bare, samples=size["samples"], profile_into=into
        )
    return out


async def one_process(stages, size, out: dict) -> dict:
    """Configuration S: SQLite, one Parley process, and the bare app."""
    scratch = Path(tempfile.mkdtemp(prefix="parley-ratios-"))
    try:
        env, token = prepare_parley(scratch / "var")
        python = sys.executable
        server = Daphne(
            [python, "-m", "daphne", "config.asgi:application"], env, scratch / "parley.log"
        )
        try:
            bare = Daphne(
                [python, "-m", "daphne", "bench.bare_app:application"], env, scratch / "bare.log"
            )
            parley = Parley(server, token)
            try:
                return await measure("S", [parley], bare, token, [], stages, size, out)
            finally:
                await parley.http.aclose()
                bare.stop()
        finally:
            server.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def two_processes(stages, size, out: dict) -> dict:
    """Configuration P: PostgreSQL, Redis, Parley's A and B, and the bare app."""
    from bench.cluster import two_processes

    with two_processes() as (server_a, server_b, bare, token, _guest, env):
        a, b = Parley(server_a, token), Parley(server_b, token)
        try:
            backing = gauges.backing_pids(env)
            return await measure("P", [a, b], bare, token, backing, stages, size, out)
        finally:
            await a.http.aclose()
            await b.http.aclose()


async def main(quick: bool, stages, configs) -> dict:
    size = sizes(quick)
    results: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(),
            "load_before": os.getloadavg(),
        },
        "quick": quick,
        "sizes": size,
    }
    # A configuration that fails is reported as failed, and the others still run.
    failed = results["failed"] = {}
    for config in configs:  # this run's profiles replace the last run's
        shutil.rmtree(PROFILES / config, ignore_errors=True)
    if "S" in configs and set(stages) - {"tracemalloc"}:
        try:
            async with asyncio.timeout(1200):
                await one_process(stages, size, results.setdefault("S", {}))
        except Exception as error:
            failed["S"] = repr(error)
            traceback.print_exc()
    if "P" in configs and set(stages) - {"tracemalloc"}:
        try:
            async with asyncio.timeout(1200):
                await two_processes(stages, size, results.setdefault("P", {}))
        except Exception as error:
            failed["P"] = repr(error)
            traceback.print_exc()
    if "tracemalloc" in stages:
        print("Memory per socket by owner, under tracemalloc …", flush=True)
        scratch = Path(tempfile.mkdtemp(prefix="parley-ratios-traced-"))
        try:
            async with asyncio.timeout(900):
                results["tracemalloc"] = await tracing.run(
                    scratch, size["traced_sockets"], Daphne=Daphne, prepare_parley=prepare_parley
                )
        except Exception as error:
            failed["tracemalloc"] = repr(error)
            traceback.print_exc()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    results["rows"] = ratio_table.rows(results)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (3-6 minutes)")
    parser.add_argument(
        "--only", action="append", choices=STAGES, help="run only this stage (may be repeated)"
    )
    parser.add_argument(
        "--config", action="append", choices=("S", "P"), help="only this configuration"
    )
    args = parser.parse_args()
    results = asyncio.run(main(args.quick, args.only or STAGES, args.config or ("S", "P")))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ratios.json").write_text(json.dumps(results, indent=2, default=str))
    print()
    print(ratio_table.report(results))
    sys.exit(1 if results["failed"] else 0)

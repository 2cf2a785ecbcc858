"""Figure 3's breakdown in bench/ratios.py: a socket's memory by owner, from tracemalloc.

Parley's Daphne and the bare app's (``/accept/``), each started under bench/traced_server.py
(tracemalloc turned on once it has started, a snapshot written on SIGUSR1), in a scratch Parley
of their own: a warm-up of 100 sockets opened and closed, a snapshot, ``sockets`` sockets opened
by bench/sockets.py's client processes, a second snapshot, then the difference attributed to
each allocation's innermost frame that is not the standard library's (bench/owners.py), in KB
per socket. tracemalloc slows the servers down: no CPU or RSS figure is read from these
processes.
"""

import asyncio
import os
import signal
import sys
import time
import tracemalloc
from pathlib import Path

import httpx

from bench.owners import memory_by_owner
from bench.sockets import Workers


async def _snapshot(server, path: Path) -> tracemalloc.Snapshot:
    await asyncio.to_thread(path.unlink, missing_ok=True)
    os.kill(server.process.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 300
    while not await asyncio.to_thread(path.exists):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no tracemalloc snapshot at {path}")
        await asyncio.sleep(0.2)
    return await asyncio.to_thread(tracemalloc.Snapshot.load, str(path))


async def _open(server, token: str, targets: list[str], sockets: int) -> Workers:
    workers = Workers(server.port, token, targets, sockets)
    opened = await workers.start()
    assert opened["connected"] == sockets, opened
    return workers


async def breakdown(server, token: str, targets: list[str], sockets: int, into: Path) -> dict:
    os.kill(server.process.pid, signal.SIGUSR2)  # tracemalloc on
    await asyncio.sleep(0.5)
    warm = await _open(server, token, targets, 100)
    await warm.stop()
    await asyncio.sleep(1)
    before = await _snapshot(server, into / "snapshot")
    workers = await _open(server, token, targets, sockets)
    try:
        await asyncio.sleep(2)
        after = await _snapshot(server, into / "snapshot")
    finally:
        await workers.stop()
    return await asyncio.to_thread(memory_by_owner, before, after, sockets)


async def run(scratch: Path, sockets: int, *, Daphne, prepare_parley) -> dict:
    env, token = prepare_parley(scratch)
    python = sys.executable
    # Slowed down by tracemalloc, a handshake may take longer than Daphne's 5 s to be accepted.
    traced = [python, "bench/traced_server.py", "--websocket_connect_timeout", "300"]
    result = {"sockets": sockets}
    async with httpx.AsyncClient(headers={"Authorization": f"Token {token}"}, timeout=60) as http:
        for kind, app in (
            ("bare", "bench.bare_app:application"),
            ("parley", "config.asgi:application"),
        ):
            folder = scratch / kind
            folder.mkdir(parents=True, exist_ok=True)
            server_env = {**env, "BENCH_TRACE_SNAPSHOT": str(folder / "snapshot")}
            server = Daphne([*traced, app], server_env, folder / "daphne.log")
            try:
                targets = ["/accept/"]
                if kind == "parley":
                    base = f"http://127.0.0.1:{server.port}"
                    targets = []
                    for number in range(100):
                        created = await http.post(
                            f"{base}/api/conversations/",
                            json={"workspace": "bench", "title": f"T{number}", "agent": "flood"},
                        )
                        created.raise_for_status()
                        targets.append(created.json()["id"])
                result[kind] = await breakdown(server, token, targets, sockets, folder)
            finally:
                server.stop()
    return result


def report(result: dict, indent: str = "  ") -> list[str]:
    lines = [
        f"{indent}memory per open socket by owner (tracemalloc, {result['sockets']:,} sockets, "
        "KB per socket; each allocation's innermost frame not the standard library's):"
    ]
    for kind in ("parley", "bare"):
        owners = result[kind]
        total = sum(owners.values())
        shown = ", ".join(f"{name} {kb:.1f}" for name, kb in owners.items() if abs(kb) >= 0.05)
        label = "Parley" if kind == "parley" else "bare Daphne socket"
        lines.append(f"{indent}  {label}: {total:.1f} KB = {shown}")
    return lines

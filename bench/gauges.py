"""What bench/ratios.py reads off the processes it measures: CPU time, resident memory, whether a
server is idle, and the clients' own CPU share (item 4 of issue 31: a figure taken while a client
process was saturated is marked so).
"""

import asyncio
import os
import time
from urllib.parse import urlparse

import psutil

CLIENT_SATURATED = 0.90  # of a core, for any one client process
MACHINE_SATURATED = 0.95  # of all the machine's cores


def cpu_seconds(pids) -> float:
    """User + system CPU seconds of these processes (those gone count nothing)."""
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def rss(pids) -> int:
    return sum(psutil.Process(pid).memory_info().rss for pid in pids)


def tree(pid: int) -> list[int]:
    """A process and its children (PostgreSQL's postmaster and its backends)."""
    try:
        process = psutil.Process(pid)
        return [pid, *(child.pid for child in process.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def backing_pids(env: dict) -> list[int]:
    """PostgreSQL's and Redis's processes behind a Parley environment (none on SQLite): the
    postmaster named in its data folder's postmaster.pid with its backends, and the Redis server
    listening on REDIS_URL's port."""
    if "DATABASE_URL" not in env:
        return []
    pids = []
    port = str(urlparse(env["REDIS_URL"]).port)
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or ())
        if (process.info["name"] or "").startswith("redis-server") and f":{port}" in cmdline:
            pids.append(process.pid)
    pg_port = str(urlparse(env["DATABASE_URL"]).port)
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or ()
        if "postgres" in (process.info["name"] or "") and f"-p {pg_port}" in " ".join(cmdline):
            pids += tree(process.pid)
    return pids


async def wait_idle(pids, *, below: float = 0.05, window: float = 0.3, limit: float = 30) -> None:
    """Until these processes use less than ``below`` of a core over ``window`` seconds (at most
    ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_seconds(pids)
        await asyncio.sleep(window)
        if cpu_seconds(pids) - before < below * window:
            return


def _machine_busy() -> tuple[float, float]:
    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    return sum(times) - idle, sum(times)


class ClientMeter:
    """The clients' CPU over a measurement: this process's and each worker's CPU time over the
    wall time, and the whole machine's busy share. ``add`` more worker processes as they come."""

    def __init__(self, workers=()):
        self.pids = [os.getpid(), *workers]
        self.started = {pid: cpu_seconds([pid]) for pid in self.pids}
        self.wall = time.perf_counter()
        self.machine = _machine_busy()
        self.shares: dict[int, float] = {}
        self.machine_share = 0.0

    def add(self, workers) -> None:
        for pid in workers:
            self.pids.append(pid)
            self.started[pid] = cpu_seconds([pid])

    def stop(self) -> dict:
        wall = time.perf_counter() - self.wall
        busy, total = _machine_busy()
        self.machine_share = (busy - self.machine[0]) / max(total - self.machine[1], 1e-9)
        self.shares = {pid: (cpu_seconds([pid]) - self.started[pid]) / wall for pid in self.pids}
        return self.summary()

    def summary(self) -> dict:
        own = self.shares.get(os.getpid(), 0.0)
        workers = [share for pid, share in self.shares.items() if pid != os.getpid()]
        return {
            "bench": own,
            "workers_max": max(workers, default=0.0),
            "machine": self.machine_share,
            "saturated": max([own, *workers]) >= CLIENT_SATURATED,
            "machine_saturated": self.machine_share >= MACHINE_SATURATED,
        }


def worst(summaries: list[dict]) -> dict:
    """The highest client shares over several measurements (saturated if any was)."""
    if not summaries:
        return {
            "bench": 0.0,
            "workers_max": 0.0,
            "machine": 0.0,
            "saturated": False,
            "machine_saturated": False,
        }
    return {
        "bench": max(s["bench"] for s in summaries),
        "workers_max": max(s["workers_max"] for s in summaries),
        "machine": max(s["machine"] for s in summaries),
        "saturated": any(s["saturated"] for s in summaries),
        "machine_saturated": any(s.get("machine_saturated") for s in summaries),
    }

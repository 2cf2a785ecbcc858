"""Many sockets on one process: 5,000 sockets (1,000 with ``--quick``) watching 100 conversations
(50 each), 20 of which stream 20 events a second each (20,000 deliveries a second in all), the
clients in separate processes (the ``websockets`` library, token authentication).

Measured: how many socket handshakes a second the process accepts (every socket opened at once,
each client process keeping 100 handshakes in flight), its resident memory per open socket,
and the delay from each event's ``ts`` (when the turn produced it) to its arrival on every
socket, p50 and p99, with the share of a core the process used meanwhile.

Run alone with ``.venv/bin/python -m bench.sockets [--quick]``; bench/run.py runs it as a stage.
"""

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx
import psutil
import websockets

WORKERS = 4
IN_FLIGHT = 100  # handshakes each client process keeps going at once
CONVERSATIONS = 100
STREAMING = 20
EVENTS_PER_SECOND = 20


def _arrival_delay_ms(frame: str, now: float) -> float | None:
    """Milliseconds from an event frame's ``ts`` to ``now`` (None for other frames)."""
    at = frame.find('"ts":"')
    if not frame.startswith('{"seq"') or at < 0:
        return None
    ts = frame[at + 6 : frame.index('"', at + 6)]
    return (now - datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()) * 1000


async def worker(port: int, token: str, targets: list[str]) -> None:
    """A client process: say it is ready, wait for "go", open a socket to each conversation of
    ``targets`` (or to each path, for a target starting with ``/``), say so, read until told to
    stop (printing how many event frames it has read whenever told "count"), then print what
    it measured as JSON."""
    headers = {"Authorization": f"Token {token}"}
    gate = asyncio.Semaphore(IN_FLIGHT)
    delays: list[float] = []
    failed = 0
    print(json.dumps({"ready": True}), flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # "go"

    async def open_one(cid: str):
        nonlocal failed
        async with gate:
            try:
                path = cid if cid.startswith("/") else f"/ws/conversations/{cid}/"
                ws = await websockets.connect(
                    f"ws://127.0.0.1:{port}{path}",
                    additional_headers=headers,
                    open_timeout=120,
                    ping_interval=None,
                    max_size=2**24,
                )
                await ws.recv()  # ws.ready
                return ws
            except Exception:
                failed += 1
                return None

    opened = [ws for ws in await asyncio.gather(*map(open_one, targets)) if ws]
    print(json.dumps({"connected": len(opened), "failed": failed}), flush=True)

    async def read(ws):
        try:
            async for frame in ws:
                delay = _arrival_delay_ms(frame, time.time())
                if delay is not None:
                    delays.append(delay)
        except websockets.ConnectionClosed:
            pass

    readers = [asyncio.create_task(read(ws)) for ws in opened]
    while (await asyncio.to_thread(sys.stdin.readline)).strip() == "count":
        print(json.dumps({"frames": len(delays)}), flush=True)
    # "stop"
    for task in readers:
        task.cancel()
    await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
    print(json.dumps({"delays": [round(delay, 2) for delay in delays]}), flush=True)


class Workers:
    """The client processes, each given its share of the sockets (``conversations`` may be
    paths instead, each starting with ``/``)."""

    def __init__(
        self, port: int, token: str, conversations: list[str], sockets: int, processes=WORKERS
    ):
        self.processes = []
        # Socket k watches conversation k mod 100; the workers take the sockets in turn.
        targets = [conversations[k % len(conversations)] for k in range(sockets)]
        for number in range(processes):
            mine = targets[number::processes]
            args = json.dumps({"port": port, "token": token, "targets": mine})
            self.processes.append(
                asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "bench.sockets",
                    "--worker",
                    args,
                    cwd=Path(__file__).resolve().parent.parent,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    limit=2**30,  # the delays come back as one line
                )
            )

    async def spawn(self) -> list[int]:
        """The processes started and ready to open their sockets; their ids."""
        self.processes = [await process for process in self.processes]
        for process in self.processes:
            assert json.loads(await process.stdout.readline())["ready"]
        return [process.pid for process in self.processes]

    async def start(self) -> dict:
        """Every socket opened (the processes spawned first if they are not yet)."""
        if not all(isinstance(p, asyncio.subprocess.Process) for p in self.processes):
            await self.spawn()
        for process in self.processes:
            process.stdin.write(b"go\n")
            await process.stdin.drain()
        reports = [json.loads(await p.stdout.readline()) for p in self.processes]
        return {
            "connected": sum(r["connected"] for r in reports),
            "failed": sum(r["failed"] for r in reports),
        }

    async def frames(self) -> int:
        """How many event frames the sockets have read so far, in all."""
        for process in self.processes:
            process.stdin.write(b"count\n")
            await process.stdin.drain()
        return sum([json.loads(await p.stdout.readline())["frames"] for p in self.processes])

    async def stop(self) -> list[float]:
        delays: list[float] = []
        for process in self.processes:
            process.stdin.write(b"stop\n")
            await process.stdin.drain()
        for process in self.processes:
            delays += json.loads(await process.stdout.readline())["delays"]
            await process.wait()
        return delays

    def kill(self) -> None:
        for process in self.processes:
            if not isinstance(process, asyncio.subprocess.Process):
                continue
            if process.returncode is None:
                process.kill()


def profiling(pid: int, into: Path | None, name: str):
    """py-spy recording process ``pid`` into ``into/name.txt`` (collapsed stacks of whichever
    thread holds the GIL) until stopped; nothing when ``into`` is None."""
    if into is None:
        return None
    into.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            str(Path(sys.executable).with_name("py-spy")),
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "200",
            "--threads",
            "--gil",  # only what holds the GIL: where the process's Python time goes
            "--output",
            str(into / f"{name}.txt"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_profiling(spy) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)  # py-spy writes what it has, and exits
        spy.wait(timeout=60)


async def run(
    scratch: Path, quick: bool, *, Daphne, prepare_parley, percentile, profile: Path | None = None
) -> dict:
    sockets = 1_000 if quick else 5_000
    seconds = 10 if quick else 30
    env, token = prepare_parley(scratch)
    server = Daphne(
        [sys.executable, "-m", "daphne", "config.asgi:application"], env, scratch / "sockets.log"
    )
    process = psutil.Process(server.process.pid)
    url = f"http://127.0.0.1:{server.port}"
    workers = None
    try:
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60
        ) as http:
            conversations = []
            for number in range(CONVERSATIONS):
                created = await http.post(
                    "/api/conversations/",
                    json={"workspace": "bench", "title": f"Watched {number}", "agent": "flood"},
                )
                created.raise_for_status()
                conversations.append(created.json()["id"])
            # Warm the process up (a stream and a socket, in a conversation of its own) before
            # its memory is read.
            created = await http.post(
                "/api/conversations/",
                json={"workspace": "bench", "title": "Warm", "agent": "flood"},
            )
            warm = created.json()["id"]
            async with server.ws(f"/ws/conversations/{warm}/", http.headers) as ws:
                await ws.recv()
                await http.post(f"/api/conversations/{warm}/turns/", json={"input": "200 events"})
                while '"type":"turn.completed"' not in (await ws.recv())[:60]:
                    pass
            await asyncio.sleep(1)
            rss_before = process.memory_info().rss

            workers = Workers(server.port, token, conversations, sockets)
            spy = profiling(process.pid, profile, "handshakes")
            cpu_before = sum(process.cpu_times()[:2])
            started = time.perf_counter()
            opened = await workers.start()
            handshake_seconds = time.perf_counter() - started
            handshake_cpu = sum(process.cpu_times()[:2]) - cpu_before
            stop_profiling(spy)
            await asyncio.sleep(2)
            rss_open = process.memory_info().rss

            # The streams: a tool call (two events) every 100 ms in each of 20 conversations.
            per_turn = EVENTS_PER_SECOND * seconds
            pause = 2000 / EVENTS_PER_SECOND
            spy = profiling(process.pid, profile, "streams")
            process.cpu_percent()
            streamed = time.perf_counter()
            for cid in conversations[:STREAMING]:
                response = await http.post(
                    f"/api/conversations/{cid}/turns/",
                    json={"input": f"{per_turn} events every {pause:g}"},
                )
                response.raise_for_status()
            while True:
                state = (await http.get("/api/in-flight/")).json()
                if not state:
                    break
                await asyncio.sleep(0.2)
            stream_seconds = time.perf_counter() - streamed
            cpu = process.cpu_percent() / 100
            stop_profiling(spy)
            delays = await workers.stop()
            workers = None
    finally:
        if workers is not None:
            workers.kill()
        server.stop()
    watchers = sockets // CONVERSATIONS
    expected = STREAMING * (per_turn + 2) * watchers
    return {
        "sockets": sockets,
        "connected": opened["connected"],
        "failed": opened["failed"],
        "handshakes_per_s": opened["connected"] / handshake_seconds,
        "cpu_ms_per_handshake": handshake_cpu * 1000 / max(opened["connected"], 1),
        "kb_per_socket": (rss_open - rss_before) / max(opened["connected"], 1) / 1024,
        "deliveries": len(delays),
        "deliveries_expected": expected,
        "deliveries_per_s": len(delays) / stream_seconds,
        "ts_to_socket_ms": {"p50": percentile(delays, 0.5), "p99": percentile(delays, 0.99)},
        "server_cpu": cpu,
        "stream_seconds": stream_seconds,
    }


def report(result: dict) -> list[str]:
    delay = result["ts_to_socket_ms"]
    return [
        f"Many sockets: {result['sockets']:,} sockets on one process over {CONVERSATIONS} "
        f"conversations, {STREAMING} streaming {EVENTS_PER_SECOND} events/s each "
        f"(clients in {WORKERS} processes):",
        f"  handshakes accepted: {result['handshakes_per_s']:,.0f}/s (aim >= 1,000/s); "
        f"{result['connected']:,} open, {result['failed']} failed; "
        f"{result['cpu_ms_per_handshake']:.2f} ms of the server's CPU each",
        f"  resident memory per open socket: {result['kb_per_socket']:.1f} KB (aim <= 20 KB)",
        f"  event ts -> socket: p50 {delay['p50']:.0f} ms, p99 {delay['p99']:.0f} ms "
        f"(aim p99 < 100 ms); {result['deliveries']:,} of {result['deliveries_expected']:,} "
        f"deliveries, {result['deliveries_per_s']:,.0f}/s; the process used "
        f"{result['server_cpu']:.0%} of a core",
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 sockets, 10 s of streams")
    parser.add_argument(
        "--profile", type=Path, help="record py-spy profiles of the server into this folder"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        asyncio.run(worker(spec["port"], spec["token"], spec["targets"]))
    else:
        from bench.run import Daphne, percentile, prepare_parley

        with tempfile.TemporaryDirectory(prefix="parley-bench-sockets-") as folder:
            result = asyncio.run(
                run(
                    Path(folder),
                    args.quick,
                    Daphne=Daphne,
                    prepare_parley=prepare_parley,
                    percentile=percentile,
                    profile=args.profile,
                )
            )
        print("\n".join(report(result)))

"""Parley's benchmark: the bare-Daphne ceiling and Parley, measured side by side in one run.

    make bench-all        (after bench/ratios.py; or: .venv/bin/python bench/run.py [--quick])

Every figure is the median of several rounds, and every Parley figure is reported beside the
ceiling measured in the same run, because this machine is shared and noisy. Results are printed
and written to bench/results/latest.json.
"""

import argparse
import asyncio
import itertools
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import websockets

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def cluster_stage():
    """bench/cluster.py, the stage across two processes (imported once this file's folder's
    parent is on the path, since `make bench` runs this file as a script)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import cluster

    return cluster


def mcp_stage():
    """bench/outside.py, the outside agent's stage over MCP (imported as cluster_stage is)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import outside

    return outside


def search_stage():
    """bench/search.py, search on 100,000 stored messages (imported as history_stage is)."""
    from bench import search

    return search


def history_stage():
    """bench/history.py, a long conversation opened in Chromium (imported as cluster_stage is)."""
    cluster_stage()
    from bench import history

    return history


def peers_stage():
    """bench/peers.py, replay beside django-eventstream (imported as cluster_stage is)."""
    cluster_stage()
    from bench import peers

    return peers


def page_stage():
    """bench/page.py, a long answer streamed into Chromium (imported as cluster_stage is)."""
    cluster_stage()
    from bench import page

    return page


def sidebar_stage():
    """bench/sidebar.py, a conversation opened from the sidebar (imported as cluster_stage is)."""
    cluster_stage()
    from bench import sidebar

    return sidebar


def sockets_stage():
    """bench/sockets.py, thousands of sockets on one process (imported as cluster_stage is)."""
    cluster_stage()
    from bench import sockets

    return sockets


def limits_stage():
    """bench/limits.py, stalled readers and rate limits (imported as cluster_stage is)."""
    cluster_stage()
    from bench import limits

    return limits


def durable_stage():
    """bench/durable.py, the durable-turns stage (imported as cluster_stage is)."""
    cluster_stage()
    from bench import durable

    return durable


def failover_stage():
    """bench/failover.py, a Redis failover through Sentinel (imported as cluster_stage is)."""
    cluster_stage()
    from bench import failover

    return failover


def reach_stage():
    """bench/reach.py, questions emailed (imported as cluster_stage is)."""
    cluster_stage()
    from bench import reach

    return reach


class Daphne:
    """A Daphne process on a loopback socket bound here (the same way the tests start one)."""

    def __init__(self, argv: list[str], env: dict, log: Path):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.log = open(log, "w")
        self.process = subprocess.Popen(
            [*argv[:-1], "--fd", str(self.sock.fileno()), argv[-1]],
            cwd=ROOT,
            env={**os.environ, **env},
            pass_fds=[self.sock.fileno()],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=2)
                break
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    # Leave nothing behind: the caller has no server to stop.
                    self.process.kill()
                    self.process.wait()
                    self.sock.close()
                    self.log.close()
                    raise RuntimeError(f"Daphne did not start; see {log}") from None
                time.sleep(0.05)

    @property
    def rss(self) -> int:
        return psutil.Process(self.process.pid).memory_info().rss

    def ws(self, path: str, headers: dict | None = None):
        return websockets.connect(
            f"ws://127.0.0.1:{self.port}{path}",
            additional_headers=headers or {},
            max_size=2**24,
            max_queue=None,
            open_timeout=30,
            ping_interval=None,
        )

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.sock.close()
        self.log.close()


def median(values):
    return statistics.median(values)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


# The ceiling ------------------------------------------------------------------------------


async def ceiling_round(server: Daphne, sockets: int, frames: int, path: str = "/") -> float:
    """Deliveries per second from a bare consumer pushing ``frames`` to ``sockets`` sockets
    (at ``/stock/``, through Channels' group_send instead)."""
    connections = [await server.ws(path).__aenter__() for _ in range(sockets)]
    try:
        await asyncio.sleep(0.2)

        async def drain(ws):
            for _ in range(frames):
                await ws.recv()

        started = time.perf_counter()
        await connections[0].send(json.dumps({"count": frames}))
        await asyncio.gather(*(drain(ws) for ws in connections))
        elapsed = time.perf_counter() - started
    finally:
        for ws in connections:
            await ws.close()
    return sockets * frames / elapsed


# Parley -----------------------------------------------------------------------------------


class Parley:
    def __init__(self, server: Daphne, token: str):
        self.server = server
        self.headers = {"Authorization": f"Token {token}"}
        self.http = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{server.port}", headers=self.headers, timeout=120
        )

    async def conversation(self, agent: str = "flood") -> str:
        response = await self.http.post(
            "/api/conversations/", json={"workspace": "bench", "title": "bench", "agent": agent}
        )
        response.raise_for_status()
        return response.json()["id"]

    async def start(self, cid: str, text: str) -> dict:
        response = await self.http.post(f"/api/conversations/{cid}/turns/", json={"input": text})
        response.raise_for_status()
        return response.json()

    def watch(self, cid: str, from_seq: int | None = None):
        query = "" if from_seq is None else f"?from_seq={from_seq}"
        return self.server.ws(f"/ws/conversations/{cid}/{query}", self.headers)

    async def wait_idle(self, cid: str) -> int:
        while True:
            state = (await self.http.get(f"/api/conversations/{cid}/in-flight/")).json()
            if not state["in_flight"]:
                return state["latest_seq"]
            await asyncio.sleep(0.05)


async def until_terminal(ws, arrivals: dict | None = None) -> int:
    """Read frames until a terminal event; returns how many events came."""
    count = 0
    while True:
        frame = await ws.recv()
        if frame.startswith('{"seq"'):
            count += 1
            if arrivals is not None:
                arrivals[int(frame[7 : frame.index(",")])] = time.time()
            if '"type":"turn.' in frame[:60] and '"type":"turn.started"' not in frame[:60]:
                return count


async def parley_stream_round(parley: Parley, sockets: int, events: int) -> tuple[float, float]:
    """Events per second persisted and delivered to ``sockets`` watchers, and deliveries/s."""
    cid = await parley.conversation()
    connections = [await parley.watch(cid).__aenter__() for _ in range(sockets)]
    try:
        for ws in connections:
            await ws.recv()  # ws.ready
        started = time.perf_counter()
        await parley.start(cid, f"{events} events")
        counts = await asyncio.gather(*(until_terminal(ws) for ws in connections))
        elapsed = time.perf_counter() - started
    finally:
        for ws in connections:
            await ws.close()
    assert all(c == events + 2 for c in counts), counts
    return (events + 2) / elapsed, sockets * (events + 2) / elapsed


async def persist_only_round(parley: Parley, events: int) -> tuple[float, str]:
    cid = await parley.conversation()
    started = time.perf_counter()
    await parley.start(cid, f"{events} events")
    latest = await parley.wait_idle(cid)
    return latest / (time.perf_counter() - started), cid


async def paced_arrivals(parley: Parley, sockets: int, events: int, every_ms: float):
    """Arrival times per seq on each socket for a stream paced below saturation."""
    cid = await parley.conversation()
    connections = [await parley.watch(cid).__aenter__() for _ in range(sockets)]
    arrivals = [{} for _ in connections]
    try:
        for ws in connections:
            await ws.recv()
        await parley.start(cid, f"{events} events every {every_ms}")
        watching = zip(connections, arrivals, strict=True)
        await asyncio.gather(*(until_terminal(ws, a) for ws, a in watching))
    finally:
        for ws in connections:
            await ws.close()
    return cid, arrivals


def commit_delays(commits: list, cid: str, arrivals: list[dict]) -> list[float]:
    committed = {}
    for conversation, first, last, moment in commits:
        if conversation == cid:
            for seq in range(first, last + 1):
                committed[seq] = moment
    delays = []
    for per_socket in arrivals:
        for seq, arrived in per_socket.items():
            if seq in committed:
                delays.append((arrived - committed[seq]) * 1000)
    return delays


# Questions --------------------------------------------------------------------------------


async def park_one(parley: Parley, cid: str, ws) -> str:
    """Start a builtin ``summarize`` turn through ``parley`` (it parks on a file picker) and
    return its question's id, read from the watching socket ``ws``."""
    await parley.start(cid, "summarize")
    while '"type":"selection.requested"' not in (frame := await ws.recv())[:60]:
        pass
    return json.loads(frame)["data"]["id"]


async def until_type(ws, kind: str) -> dict:
    """The next event of type ``kind`` on ``ws`` (events before it are skipped)."""
    marker = f'"type":"{kind}"'
    while marker not in (frame := await ws.recv())[:60]:
        pass
    return json.loads(frame)


async def timed(request, ws, kind: str) -> tuple[float, float]:
    """Milliseconds from sending ``request`` (a coroutine) to its response, and to the next
    ``kind`` event on ``ws`` (read while the request is in flight: the event may come first)."""
    started = time.perf_counter()
    arrival = asyncio.create_task(until_type(ws, kind))
    response = await request
    answered = time.perf_counter()
    await arrival
    response.raise_for_status()
    return (answered - started) * 1000, (time.perf_counter() - started) * 1000


async def request_latency(parley: Parley, bare_url: str, samples: int) -> dict:
    """Every request-shaped figure beside the stack's floor, measured in the same round.

    Each sample: a bare ASGI POST and a bare DRF POST (``bench/bare_app.py``), Parley's own
    refused reply (an unknown question: authentication and one lookup), then two builtin turns
    that park on a file picker in a watched conversation. The first is steered (→
    ``turn.steered``) and answered over REST (→ its ``selection.resolved``, and the resumed
    turn's next event); the second is stopped (→ ``turn.cancelled``). Starting each is timed
    to its ``turn.started``. Every time is from sending the request to the event's arrival on
    the watching socket, except the three bare round trips (to the response)."""
    cid = await parley.conversation(agent="builtin")
    names = ("bare", "drf", "refused", "start", "steer", "resolved", "next_event", "cancel")
    times: dict[str, list[float]] = {name: [] for name in names}
    own: dict[str, list[float]] = {name: [] for name in ("start", "steer", "reply", "cancel")}
    base = f"/api/conversations/{cid}"
    async with httpx.AsyncClient(base_url=bare_url, timeout=60) as bare, parley.watch(cid) as ws:
        await ws.recv()
        for _ in range(samples):
            for name, url in (("bare", "/api/selections/s_bare/reply/"), ("drf", "/drf/")):
                started = time.perf_counter()
                (await bare.post(url, json={"answer": "x"})).raise_for_status()
                times[name].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await parley.http.post("/api/selections/s_missing/reply/", json={"answer": "x"})
            times["refused"].append((time.perf_counter() - started) * 1000)

            for stop in (False, True):
                start = parley.http.post(f"{base}/turns/", json={"input": "summarize"})
                responded, arrived = await timed(start, ws, "turn.started")
                own["start"].append(responded)
                times["start"].append(arrived)
                question = await until_type(ws, "selection.requested")
                turn = question["turn"]
                if stop:
                    cancel = parley.http.post(f"{base}/cancel/", json={"turn_id": turn})
                    responded, arrived = await timed(cancel, ws, "turn.cancelled")
                    own["cancel"].append(responded)
                    times["cancel"].append(arrived)
                    continue
                steer = parley.http.post(
                    f"{base}/steer/", json={"expected_turn_id": turn, "input": "and be brief"}
                )
                responded, arrived = await timed(steer, ws, "turn.steered")
                own["steer"].append(responded)
                times["steer"].append(arrived)

                async def arrivals(started: float):
                    await until_type(ws, "selection.resolved")
                    times["resolved"].append((time.perf_counter() - started) * 1000)
                    await ws.recv()
                    times["next_event"].append((time.perf_counter() - started) * 1000)

                started = time.perf_counter()
                reading = asyncio.create_task(arrivals(started))
                response = await parley.http.post(
                    f"/api/selections/{question['data']['id']}/reply/", json={"answer": "README.md"}
                )
                own["reply"].append((time.perf_counter() - started) * 1000)
                await reading
                response.raise_for_status()
                await until_terminal(ws)

    def spread(values):
        return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}

    floor = percentile(times["bare"], 0.5)
    return {
        "samples": samples,
        "ms": {name: spread(values) for name, values in times.items()},
        "own_ms": {name: spread(values) for name, values in own.items()},
        "x_bare": {name: percentile(values, 0.5) / floor for name, values in times.items()},
        "own_x_bare": {name: percentile(values, 0.5) / floor for name, values in own.items()},
    }


async def until_finished(parley: Parley, questions: list[dict]) -> float:
    """Seconds until the turns that asked these questions are no longer in flight."""
    started = time.perf_counter()
    waiting = {question["conversation"] for question in questions}
    while True:
        in_flight = (await parley.http.get("/api/in-flight/")).json()
        if not waiting & {state["conversation"] for state in in_flight}:
            return time.perf_counter() - started
        await asyncio.sleep(0.05)


async def admin_action(parley: Parley, action: str, ids: list[str], query: str = "") -> None:
    """Run an admin action on questions, as an admin's browser does (one request for all). With
    ``query`` (the list's filter, say ``status__exact=pending``) it is run on every question the
    filtered list holds, as "Select all" does (``select_across``), and ``ids`` is only the page's
    first: a form may not carry a thousand ids (Django's DATA_UPLOAD_MAX_NUMBER_FIELDS)."""
    base = str(parley.http.base_url)
    async with httpx.AsyncClient(base_url=base, timeout=300) as admin:
        page = await admin.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        await admin.post(
            "/admin/login/",
            data={"username": "bench", "password": "bench", "csrfmiddlewaretoken": token},
            headers={"Referer": f"{base}/admin/login/"},
        )
        path = "/admin/selection/selection/" + (f"?{query}" if query else "")
        page = await admin.get(path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        done = await admin.post(
            path,
            data={
                "action": action,
                "_selected_action": ids[:1] if query else ids,
                "select_across": "1" if query else "0",
                "index": "0",
                "csrfmiddlewaretoken": token,
            },
            headers={"Referer": f"{base}{path}"},
        )
        assert done.status_code == 302, done.text[:500]


async def park(parley: Parley, count: int, limited) -> tuple[list[dict], float]:
    """Park ``count`` builtin turns on a file picker, each in a conversation of its own; returns
    their questions and the seconds it took."""
    cids = await asyncio.gather(
        *(limited(parley.conversation(agent="builtin")) for _ in range(count))
    )
    started = time.perf_counter()
    await asyncio.gather(*(limited(parley.start(cid, "summarize")) for cid in cids))
    mine = set(cids)
    while True:
        pending = (await parley.http.get("/api/selections/?status=pending")).json()
        pending = [question for question in pending if question["conversation"] in mine]
        if len(pending) >= count:
            return pending, time.perf_counter() - started
        await asyncio.sleep(0.2)


async def parked_turns(parley: Parley, count: int) -> dict:
    """Park ``count`` turns on questions in one process and measure the memory they hold; answer
    them all over REST (20 requests at a time) and time until every turn has resumed and
    finished; then park ``count`` more and dismiss them all in one admin action, timed the same
    way, while someone watches a paced stream in another conversation."""
    semaphore = asyncio.Semaphore(20)

    async def limited(coroutine):
        async with semaphore:
            return await coroutine

    await asyncio.sleep(1)
    before = parley.server.rss
    pending, parked_in = await park(parley, count, limited)
    await asyncio.sleep(1)
    after = parley.server.rss

    started = time.perf_counter()
    replies = [
        limited(parley.http.post(f"/api/selections/{s['id']}/reply/", json={"answer": "README.md"}))
        for s in pending
    ]
    assert all(r.status_code == 200 for r in await asyncio.gather(*replies))
    rest_answered = time.perf_counter() - started
    rest_finished = rest_answered + await until_finished(parley, pending)

    at_once, _ = await park(parley, count, limited)
    # Meanwhile someone watches a paced stream (a tool call, two events, every 2 ms): does it
    # keep its pace?
    stream = await parley.conversation()
    async with parley.watch(stream) as ws:
        await ws.recv()
        await parley.start(stream, "20000 events every 2")
        arrivals: list[float] = []

        async def watch():
            while True:
                frame = await ws.recv()
                arrivals.append(time.perf_counter())
                if '"type":"turn.completed"' in frame[:60]:
                    return

        watching = asyncio.create_task(watch())
        await asyncio.sleep(1)
        started = time.perf_counter()
        # Every pending question (only these are): "Select all" on the list filtered so.
        ids = [s["id"] for s in at_once]
        await admin_action(parley, "dismiss_selected", ids, query="status__exact=pending")
        bulk_answered = time.perf_counter() - started
        bulk_finished = bulk_answered + await until_finished(parley, at_once)
        just_before = [t for t in arrivals if started - 0.8 <= t < started]
        during = [t for t in arrivals if started <= t <= started + bulk_answered]
        gaps = [b - a for a, b in itertools.pairwise(during)]
        watching.cancel()
    stream_during = {
        "events_per_s_before": len(just_before) / 0.8,
        "events_per_s": len(during) / bulk_answered,
        "longest_gap_ms": max(gaps) * 1000,
    }
    return {
        "turns": count,
        "rss_before_mb": before / 2**20,
        "rss_parked_mb": after / 2**20,
        "kb_per_parked_turn": (after - before) / count / 1024,
        "seconds_to_park_all": parked_in,
        "rest": {
            "turns": count,
            "answered_s": rest_answered,
            "finished_s": rest_finished,
            "after_last_answer_s": rest_finished - rest_answered,
        },
        "bulk": {
            "turns": count,
            "answered_s": bulk_answered,
            "finished_s": bulk_finished,
            "after_action_s": bulk_finished - bulk_answered,
        },
        "stream_during_bulk": stream_during,
    }


# Setting up -------------------------------------------------------------------------------


def manage_shell(env: dict, script: str, timeout: float = 120) -> str:
    """What ``script`` prints, run by ``manage.py shell`` with Parley's ``env``."""
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    ).stdout


BENCH_LIMITS = {
    "PARLEY_MAX_SOCKETS_PER_PERSON": "1000000",
    "PARLEY_MAX_TAILS_PER_PERSON": "1000000",
    "PARLEY_MAX_MCP_SESSIONS_PER_PERSON": "1000000",
    "PARLEY_TURN_RATE": "1000000/s",
    "PARLEY_CONVERSATION_RATE": "1000000/s",
    "PARLEY_QUESTION_RATE": "1000000/s",
}


def prepare_parley(scratch: Path, extra: dict | None = None) -> tuple[dict, str]:
    """A fresh Parley database with a workspace, a person and their token; ``extra`` adds to
    the environment (DATABASE_URL and REDIS_URL for the processes of a cluster)."""
    env = {
        "PARLEY_VAR_DIR": str(scratch),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PARLEY_AGENTS": json.dumps({"flood": "conversations.agents.flood.FloodAgent"}),
        "PARLEY_LOG_LEVEL": "WARNING",
        "PARLEY_BUILTIN_PACE_MS": "0",
        # One person opens thousands of sockets and starts thousands of turns here: people's
        # limits stay on (their cost is measured) but far off (bench/limits.py measures them).
        **BENCH_LIMITS,
        **(extra or {}),
    }
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
    )
    script = (
        "from django.contrib.auth import get_user_model;"
        "from accounts.tokens import token_create;"
        "from conversations.models import Workspace, Membership;"
        "u = get_user_model().objects.create_superuser('bench', password='bench');"
        "w = Workspace.objects.create(slug='bench', name='Bench');"
        "Membership.objects.create(workspace=w, user=u, role='owner');"
        "print(token_create(user=u, name='bench')[1])"
    )
    out = manage_shell(env, script)
    # The builtin agent's questions pick among the workspace's files: give it the demo's.
    shutil.copytree(ROOT / "conversations" / "demo_files", scratch / "files" / "bench")
    return env, out.strip().splitlines()[-1]


async def main(quick: bool) -> dict:
    rounds = 3 if quick else 5
    n_one, n_many, n_replay = (5_000, 2_000, 10_000) if quick else (20_000, 10_000, 50_000)
    scratch = Path(tempfile.mkdtemp(prefix="parley-bench-"))
    python = sys.executable
    results: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "rounds": rounds,
    }
    # This process keeps its parked turns in memory (the durable stage measures releasing them).
    env, token = prepare_parley(scratch, {"PARLEY_RELEASE_PARKED_AFTER_SECONDS": "86400"})
    commit_log = scratch / "commits.json"
    bare = Daphne(
        [python, "-m", "daphne", "bench.bare_app:application"],
        {"DJANGO_SETTINGS_MODULE": "config.settings", "PARLEY_VAR_DIR": str(scratch)},
        scratch / "bare.log",
    )
    server = Daphne(
        [python, "bench/parley_server.py", "config.asgi:application"],
        {**env, "BENCH_COMMIT_LOG": str(commit_log)},
        scratch / "parley.log",
    )
    parley = Parley(server, token)
    try:
        # Ceiling and Parley take turns, round by round, so that both see the same noise;
        # each ratio is taken within a round.
        print(f"Throughput: {rounds} rounds of ceiling and Parley, taking turns …", flush=True)
        table = {key: [] for key in ("c1", "p1", "c20", "p20", "s20")}
        for _ in range(rounds):
            table["c1"].append(await ceiling_round(bare, 1, n_one))
            table["p1"].append(await parley_stream_round(parley, 1, n_one))
            table["c20"].append(await ceiling_round(bare, 20, n_many))
            table["p20"].append(await parley_stream_round(parley, 20, n_many))
            table["s20"].append(await ceiling_round(bare, 20, n_many, "/stock/"))
        print("Persistence alone, replay, commit -> socket delay …", flush=True)
        persist, replay_cid = [], None
        for _ in range(rounds):
            rate, replay_cid = await persist_only_round(parley, n_replay)
            persist.append(rate)
        total = n_replay + 2
        print("Replay beside django-eventstream …", flush=True)
        results["replay"] = await peers_stage().run(
            parley, replay_cid, total, rounds, scratch / "peer", Daphne
        )
        paced = []
        for sockets in (1, 20):
            cid, arrivals = await paced_arrivals(parley, sockets, 1000 if quick else 3000, 2)
            paced.append((sockets, cid, arrivals))
        print("Questions: reply -> resumed turn, and 1,000 parked turns …", flush=True)
        async with asyncio.timeout(600):
            results["requests"] = await request_latency(
                parley, f"http://127.0.0.1:{bare.port}", 50 if quick else 200
            )
            results["parked"] = await parked_turns(parley, 1000)
    finally:
        await parley.http.aclose()
        server.stop()
        bare.stop()
    print("Durable turns: parked turns released from memory, resumed on their answer …", flush=True)
    async with asyncio.timeout(1200):
        results["durable"] = await durable_stage().run(
            scratch / "durable",
            quick,
            Daphne=Daphne,
            Parley=Parley,
            prepare_parley=prepare_parley,
            percentile=percentile,
        )
    # The stages that start a Parley of their own, each in its own scratch folder.
    stages = (
        ("mcp", mcp_stage, "An outside agent over MCP: answer -> the agent has the result", 600),
        ("history", history_stage, "A long conversation opened in Chromium", 1200),
        ("search", search_stage, "Search on 100,000 stored messages", 1800),
        ("page", page_stage, "A long answer streamed into the page in Chromium", 1200),
        ("sidebar", sidebar_stage, "A conversation opened from the sidebar in Chromium", 600),
        ("sockets", sockets_stage, "Many sockets on one process", 1200),
        ("limits", limits_stage, "Stalled tails and rate limits", 1200),
    )
    for name, stage, title, seconds in stages:
        print(f"{title} …", flush=True)
        async with asyncio.timeout(seconds):
            results[name] = await stage().run(
                scratch / name,
                quick,
                Daphne=Daphne,
                prepare_parley=prepare_parley,
                percentile=percentile,
            )
    print("Across two processes: PostgreSQL, Redis, Parley A and B …", flush=True)
    async with asyncio.timeout(1200):
        results["cluster"] = await cluster_stage().run(quick, rounds)
    print("A Redis failover through Sentinel, mid-stream across two processes …", flush=True)
    async with asyncio.timeout(1200):
        results["failover"] = await failover_stage().run(3 if quick else 5)
    print("Questions reaching people: two processes, an SMTP server …", flush=True)
    async with asyncio.timeout(1200):
        results["reach"] = await reach_stage().run(quick)
    commits = json.loads(commit_log.read_text())
    delays = {sockets: commit_delays(commits, cid, arrivals) for sockets, cid, arrivals in paced}
    results["ceiling"] = {
        "deliveries_per_s_1": median(table["c1"]),
        "deliveries_per_s_20": median(table["c20"]),
        "stock_channels_deliveries_per_s_20": median(table["s20"]),
    }
    results["parley"] = {
        "events_per_s_1_socket": median([e for e, _ in table["p1"]]),
        "deliveries_per_s_1": median([d for _, d in table["p1"]]),
        "events_per_s_20_sockets": median([e for e, _ in table["p20"]]),
        "deliveries_per_s_20": median([d for _, d in table["p20"]]),
        "events_per_s_persist_only": median(persist),
        "commit_to_socket_ms": {
            str(sockets): {
                "p50": percentile(values, 0.5),
                "p99": percentile(values, 0.99),
                "samples": len(values),
            }
            for sockets, values in delays.items()
        },
    }
    results["ratios"] = {
        "parley_vs_ceiling_1": median(
            [p[1] / c for p, c in zip(table["p1"], table["c1"], strict=True)]
        ),
        "parley_vs_ceiling_20": median(
            [p[1] / c for p, c in zip(table["p20"], table["c20"], strict=True)]
        ),
        "parley_vs_stock_20": median(
            [p[1] / c for p, c in zip(table["p20"], table["s20"], strict=True)]
        ),
    }
    results["raw"] = table
    return results


REQUEST_ROWS = (
    ("bare", "bare ASGI POST (no framework)", None),
    ("drf", "bare DRF POST (Django, no middleware)", None),
    ("refused", "Parley: a refused reply (auth + one lookup)", 1.5),
    ("start", "start -> turn.started on a socket", None),
    ("steer", "steer -> turn.steered", None),
    ("resolved", "answer -> its selection.resolved", None),
    ("next_event", "answer -> the resumed turn's next event", 2.0),
    ("cancel", "Stop -> turn.cancelled", None),
)
OWN_ROWS = (("start", "start"), ("steer", "steer"), ("reply", "answer"), ("cancel", "Stop"))


def requests_report(q: dict) -> list[str]:
    """The request-shaped figures, each a multiple of the bare ASGI POST of the same run."""
    lines = [
        f"Requests ({q['samples']} samples of each, taking turns): ms and multiple of the "
        "bare ASGI POST at p50",
        f"{'':48}{'p50':>9}{'p99':>9}{'x bare':>9}{'aim':>9}",
    ]
    for key, label, aim in REQUEST_ROWS:
        ms = q["ms"][key]
        lines.append(
            f"{label:48}{ms['p50']:>9.2f}{ms['p99']:>9.2f}{q['x_bare'][key]:>9.2f}"
            f"{'' if aim is None else f'<= {aim}':>9}"
        )
    lines.append("Each hot endpoint's own round trip (request -> response):")
    for key, label in OWN_ROWS:
        ms = q["own_ms"][key]
        lines.append(
            f"{'  ' + label:48}{ms['p50']:>9.2f}{ms['p99']:>9.2f}{q['own_x_bare'][key]:>9.2f}"
            f"{'<= 1.5':>9}"
        )
    return lines


def report(results: dict) -> str:
    c, p, r = results["ceiling"], results["parley"], results["ratios"]
    lines = [
        f"Machine: {results['machine']['cpus']} cores, {results['machine']['memory_gb']} GB, "
        f"Python {results['machine']['python']}; medians of {results['rounds']} rounds, "
        "ratios taken within each round",
        "",
        f"{'':44}{'1 socket':>14}{'20 sockets':>14}",
        f"{'ceiling: bare consumer, deliveries/s':44}{c['deliveries_per_s_1']:>14,.0f}"
        f"{c['deliveries_per_s_20']:>14,.0f}",
        f"{'Parley: events/s persisted + delivered':44}{p['events_per_s_1_socket']:>14,.0f}"
        f"{p['events_per_s_20_sockets']:>14,.0f}",
        f"{'Parley: deliveries/s':44}{p['deliveries_per_s_1']:>14,.0f}"
        f"{p['deliveries_per_s_20']:>14,.0f}",
        f"{'Parley / ceiling':44}{r['parley_vs_ceiling_1']:>14.0%}"
        f"{r['parley_vs_ceiling_20']:>14.0%}",
        f"{'stock Channels (group_send), deliveries/s':44}{'':>14}"
        f"{c['stock_channels_deliveries_per_s_20']:>14,.0f}",
        f"{'Parley / stock Channels':44}{'':>14}{r['parley_vs_stock_20']:>14.1f}x",
        "",
        f"Persisted with nobody watching: {p['events_per_s_persist_only']:,.0f} events/s",
    ]
    for sockets, delay in p["commit_to_socket_ms"].items():
        lines.append(
            f"Commit -> socket delay, {sockets} watching: p50 {delay['p50']:.2f} ms, "
            f"p99 {delay['p99']:.2f} ms ({delay['samples']:,} samples)"
        )
    lines += ["", *peers_stage().report(results["replay"])]
    q, k = results["requests"], results["parked"]
    lines += ["", *requests_report(q)]
    lines += [
        f"{k['turns']:,} parked turns: {k['rss_before_mb']:.1f} MB -> {k['rss_parked_mb']:.1f} MB "
        f"resident, {k['kb_per_parked_turn']:.1f} KB per parked turn; parked in "
        f"{k['seconds_to_park_all']:.1f} s",
        f"  {k['rest']['turns']:,} answered over REST, 20 at a time: the last answer accepted "
        f"after {k['rest']['answered_s']:.1f} s, every turn resumed and finished "
        f"{k['rest']['after_last_answer_s']:.2f} s later (aim <= 5 s), "
        f"{k['rest']['finished_s']:.1f} s in all",
        f"  {k['bulk']['turns']:,} more parked, dismissed in one admin action: done in "
        f"{k['bulk']['answered_s']:.1f} s, every turn resumed and finished "
        f"{k['bulk']['after_action_s']:.2f} s later (aim <= 5 s), "
        f"{k['bulk']['finished_s']:.1f} s in all",
        f"  meanwhile a paced stream delivered {k['stream_during_bulk']['events_per_s']:,.0f} "
        f"events/s to its watcher (just before: "
        f"{k['stream_during_bulk']['events_per_s_before']:,.0f}), longest gap "
        f"{k['stream_during_bulk']['longest_gap_ms']:.0f} ms",
    ]
    if "durable" in results:
        lines += ["", *durable_stage().report(results["durable"], k, q["ms"])]
    if "mcp" in results:
        lines += ["", *mcp_stage().report(results["mcp"])]
    if "history" in results:
        lines += ["", *history_stage().report(results["history"])]
    if "search" in results:
        lines += ["", *search_stage().report(results["search"])]
    if "page" in results:
        lines += ["", *page_stage().report(results["page"])]
    if "sidebar" in results:
        lines += ["", *sidebar_stage().report(results["sidebar"])]
    if "sockets" in results:
        lines += ["", *sockets_stage().report(results["sockets"])]
    if "limits" in results:
        lines += ["", *limits_stage().report(results["limits"])]
    if "cluster" in results:
        lines += ["", *cluster_stage().report(results["cluster"])]
    if "failover" in results:
        lines += ["", *failover_stage().report(results["failover"])]
    if "reach" in results:
        lines += ["", *reach_stage().report(results["reach"])]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, three rounds")
    args = parser.parse_args()
    results = asyncio.run(main(args.quick))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2))
    print()
    print(report(results))

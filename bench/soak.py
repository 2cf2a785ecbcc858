"""Parley's soak: minutes of sockets dropping and resuming at random while turns stream, ask and
get answered, then a check that nothing was lost, duplicated or left behind.

    make soak     (or: .venv/bin/python bench/soak.py [--quick] [--minutes N] [--sockets N] …)

One Parley (a Daphne process on loopback, on PostgreSQL, or SQLite with ``--sqlite``) serves:

- **drivers**, one per conversation, each running a turn at a time, again and again, over REST
  and watching it on a socket of its own: the flood agent (tool calls or text, paced), the
  scripted agent of the tests (says a little, asks a question of some kind, says what it was
  told) and the builtin agent (``summarize``, ``compare``, ``tidy``, ``find``: its file picker,
  text and choice questions);
- **a bot** answering every question over REST, after a pause, with an answer its kind accepts
  (now and then dismissing or declining, and now and then answering twice at once, as two
  people would, where exactly one answer must win);
- **watchers**, hundreds of sockets over the conversations, each dropping its socket at random
  (a clean close, or the connection just lost) and coming back after a pause with
  ``?from_seq=<last seq it saw>&presence=1``, as the page does.

At the end every socket must have seen seq 1 to the conversation's latest (read over REST), with
no gap and no duplicate across its reconnects; every turn must have completed, every question
have been settled as the bot's winning reply said; the server's log must hold no ERROR; once the
sockets are closed the server must hold none open and no watcher; and its resident memory,
sampled every few seconds, must be flat from the second minute on. It prints a summary, writes
``bench/results/soak.json``, and exits 1 if any check failed. Everything stops by itself: each
phase has a time limit, and a watchdog kills what is left past the hard deadline.
"""

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import websockets

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.durable import metric  # noqa: E402
from bench.run import RESULTS, Daphne, Parley, manage_shell, prepare_parley  # noqa: E402
from ops.servers import Postgres, scratch_folder  # noqa: E402

TERMINAL = {"turn.completed", "turn.failed", "turn.cancelled"}
# Seconds: a turn's own limit (questions included), the drain after the run (turns in flight
# end), the watchers' catch-up at the end, and the setup (PostgreSQL, migrations, the server).
TURN_SECONDS = 120
DRAIN_SECONDS = 150
CATCH_UP_SECONDS = 120
SETUP_SECONDS = 240
SAMPLE_SECONDS = 2
METRICS_SECONDS = 10
# A watcher's connections last this long on average (exponentially distributed), and it stays
# away this long between them; a few stay away long enough to miss a lot.
LIFETIME_SECONDS = 20.0
RAMP_SECONDS = 5.0
DISMISS_SHARE = 0.1
RACE_SHARE = 0.1
WORDS = ["plan", "notes", "data", "report", "the", "draft", "release", "budget"]
BUILTIN_INPUTS = ["summarize", "compare", "what now?", "find", "tidy", "list", "help"]
QUESTIONS = [
    {
        "kind": "choice",
        "prompt": "Which **database**?",
        "options": [
            {"label": "PostgreSQL", "value": "pg", "description": "the *usual* one"},
            {"label": "SQLite", "value": "sqlite"},
            {"label": "MySQL", "value": "mysql"},
        ],
    },
    {
        "kind": "choice",
        "prompt": "Which checks should run?",
        "options": [{"label": name.title(), "value": name} for name in ("lint", "unit", "e2e")],
        "multiple": True,
        "min_choices": 1,
        "max_choices": 2,
    },
    {"kind": "text", "prompt": "Name the release (ünïcödé welcome)"},
    {"kind": "confirm", "prompt": "Ship it?"},
    {
        "kind": "form",
        "prompt": "Tell me about the note.",
        "schema": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 40},
                "pinned": {"type": "boolean"},
                "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            },
            "required": ["title"],
        },
    },
    {"kind": "path", "prompt": "Which file?", "mode": "file"},
]


@dataclass
class SocketLog:
    """What one client saw of one conversation, across all its connections."""

    cid: str
    last: int = 0
    delivered: int = 0
    duplicates: int = 0
    connects: int = 0
    gaps: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    server_closes: list = field(default_factory=list)
    connect_failures: list = field(default_factory=list)
    behind_ready: list = field(default_factory=list)
    target: int | None = None
    caught_up: asyncio.Event = field(default_factory=asyncio.Event)

    def take(self, frame: str) -> bool:
        """Note a frame; True if it is an event this client had not seen."""
        if frame.startswith('{"seq":'):
            seq = int(frame[7 : frame.index(",", 7)])
            if seq <= self.last:
                self.duplicates += 1
                return False
            if seq != self.last + 1:
                self.gaps.append((self.last + 1, seq))
            self.last = seq
            self.delivered += 1
            if self.target is not None and seq >= self.target:
                self.caught_up.set()
            return True
        if '"type":"ws.ready"' in frame:
            if (latest := json.loads(frame)["latest_seq"]) < self.last:
                self.behind_ready.append((self.last, latest))
        elif '"type":"ws.error"' in frame:
            self.errors.append(frame[:300])
        return False

    def aim(self, latest: int) -> None:
        """The conversation's latest seq, once every turn has ended: the client is done on it."""
        self.target = latest
        if self.last >= latest:
            self.caught_up.set()


class Soak:
    """The run's shared state: the server, its clients and what they saw."""

    def __init__(self, server: Daphne, parley: Parley, args, rng: random.Random):
        self.server, self.parley, self.args, self.rng = server, parley, args, rng
        self.loop = asyncio.get_running_loop()
        self.t0 = self.loop.time()
        self.run_until = self.t0 + args.minutes * 60
        self.final = asyncio.Event()  # every turn has ended: watchers catch up and close
        self.resolved: dict[str, tuple] = {}  # question id -> (status, answer) from its event
        self.samples: list[tuple] = []  # (seconds, rss, fds, threads)
        self.socket_counts: list[tuple] = []  # (seconds, server's sockets open, ours)
        self.open = 0

    def elapsed(self) -> float:
        return self.loop.time() - self.t0

    async def pause(self, seconds: float) -> None:
        """Sleep, but no longer once the run is in its final phase."""
        try:
            async with asyncio.timeout(seconds):
                await self.final.wait()
        except TimeoutError:
            pass

    async def connect(self, log: SocketLog):
        """A socket on ``log``'s conversation from the last seq it saw, as the page opens one;
        None (noted) if it could not be opened."""
        path = f"/ws/conversations/{log.cid}/?from_seq={log.last}&presence=1"
        try:
            ws = await self.server.ws(path, self.parley.headers)
        except (OSError, TimeoutError, websockets.InvalidHandshake) as error:
            log.connect_failures.append(f"{self.elapsed():.0f}s {error!r}"[:200])
            return None
        log.connects += 1
        self.open += 1
        return ws

    def closed(self, ws) -> None:
        ws.transport.abort()  # a no-op once the close handshake is done
        self.open -= 1

    async def sample(self) -> None:
        process = psutil.Process(self.server.process.pid)
        while True:
            self.samples.append(
                (
                    self.elapsed(),
                    process.memory_info().rss,
                    process.num_fds(),
                    process.num_threads(),
                )
            )
            await asyncio.sleep(SAMPLE_SECONDS)

    async def count_sockets(self) -> None:
        while True:
            await asyncio.sleep(METRICS_SECONDS)
            open_there = await metric(self.parley, "parley_sockets_open")
            self.socket_counts.append((self.elapsed(), open_there, self.open))


async def read(ws, log: SocketLog, on_event=None) -> None:
    """Read a socket until it closes."""
    try:
        while True:
            frame = await ws.recv()
            if log.take(frame) and on_event is not None:
                on_event(frame)
    except websockets.ConnectionClosed:
        pass


class Watcher:
    """A page watching one conversation whose connection comes and goes."""

    def __init__(self, soak: Soak, cid: str):
        self.soak, self.rng, self.log = soak, soak.rng, SocketLog(cid)
        self.drops = {"close": 0, "lost": 0, "going away": 0}

    async def run(self) -> None:
        await self.soak.pause(self.rng.uniform(0, RAMP_SECONDS))
        while not await self.session():
            # Mostly a short blip; now and then long enough to miss a lot.
            if self.rng.random() < 0.15:
                await self.soak.pause(self.rng.uniform(4, 15))
            else:
                await self.soak.pause(self.rng.uniform(0, 2))

    async def session(self) -> bool:
        """One connection; True once the run is over and this client has every event."""
        soak = self.soak
        ws = await soak.connect(self.log)
        if ws is None:
            await asyncio.sleep(self.rng.uniform(0.5, 2))
            return False
        reader = asyncio.create_task(read(ws, self.log))
        ends = soak.loop.time() + min(60, self.rng.expovariate(1 / soak.args.lifetime))
        try:
            while True:
                if self.log.caught_up.is_set():
                    await ws.close()
                    return True
                final = soak.final.is_set()
                waiter = asyncio.create_task((self.log.caught_up if final else soak.final).wait())
                done, _ = await asyncio.wait(
                    {reader, waiter},
                    timeout=None if final else max(0, ends - soak.loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
                if reader in done:
                    reader.result()
                    self.log.server_closes.append(ws.close_code)
                    return False
                if not done:
                    await self.drop(ws)
                    return False
        finally:
            reader.cancel()
            soak.closed(ws)

    async def drop(self, ws) -> None:
        """Leave as a page does: a clean close (offline, or going away), or a connection lost."""
        draw = self.rng.random()
        if draw < 0.5:
            self.drops["close"] += 1
            await ws.close(4000, "offline")
        elif draw < 0.85:
            self.drops["lost"] += 1
            ws.transport.abort()
        else:
            self.drops["going away"] += 1
            await ws.close(1001)


class Driver:
    """Runs turns in one conversation, one at a time, watching each on a socket of its own."""

    def __init__(self, soak: Soak, cid: str, agent: str, bot: "Bot", number: int):
        self.soak, self.cid, self.agent, self.bot = soak, cid, agent, bot
        self.rng = random.Random(soak.rng.random())
        self.log = SocketLog(cid)
        self.number = number
        self.turns = 0
        self.outcomes: dict[str, int] = {}
        self.malformed: list[str] = []
        self.durations: list[float] = []
        self.ws = None

    async def run(self) -> None:
        try:
            while self.soak.loop.time() < self.soak.run_until:
                await self.turn()
                await asyncio.sleep(self.rng.uniform(0.2, 1.5))
        finally:
            if self.ws is not None:
                await self.ws.close()
                self.soak.closed(self.ws)

    async def next_event(self) -> dict:
        while True:
            if self.ws is None:
                self.ws = await self.soak.connect(self.log)
                if self.ws is None:
                    await asyncio.sleep(1)
                    continue
            try:
                frame = await self.ws.recv()
            except websockets.ConnectionClosed:
                self.log.server_closes.append(self.ws.close_code)
                self.soak.closed(self.ws)
                self.ws = None
                continue
            if self.log.take(frame):
                return json.loads(frame)

    async def turn(self) -> None:
        self.turns += 1
        began = self.soak.loop.time()
        started = await self.soak.parley.start(self.cid, self.next_input())
        outcome = "timed out"
        try:
            async with asyncio.timeout(TURN_SECONDS):
                while True:
                    event = await self.next_event()
                    kind, data = event["type"], event["data"]
                    if event["seq"] == started["seq"]:
                        if kind != "turn.started" or event["turn"] != started["turn"]:
                            self.malformed.append(f"seq {event['seq']} is {kind}")
                    elif event["seq"] < started["seq"]:
                        self.malformed.append(f"seq {event['seq']} after its turn's end")
                    elif event["turn"] != started["turn"]:
                        self.malformed.append(f"seq {event['seq']} of another turn")
                    if kind == "selection.requested":
                        self.bot.ask(data)
                    elif kind == "selection.resolved":
                        self.soak.resolved[data["selection"]] = (data["status"], data["answer"])
                    if kind in TERMINAL and event["turn"] == started["turn"]:
                        outcome = kind
                        if kind == "turn.failed":
                            self.malformed.append(f"failed: {json.dumps(data)[:300]}")
                        return
        finally:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            self.durations.append(self.soak.loop.time() - began)
            if outcome == "timed out":
                # The conversation may still be busy: this driver stops here.
                self.soak.run_until = min(self.soak.run_until, self.soak.loop.time())

    def next_input(self) -> str:
        rng, n = self.rng, self.turns
        if self.agent == "flood":
            mode = "text" if n % 2 else "events"
            return f"{rng.choice([100, 200, 300])} {mode} every {rng.choice([5, 10, 20])}"
        if self.agent == "builtin":
            return BUILTIN_INPUTS[(self.number + n) % len(BUILTIN_INPUTS)]
        steps = []
        for part in range(rng.randint(2, 6)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
            steps += [{"say": f"Part {part + 1}: {words} — ✓ `done`"}, {"sleep": 0.02}]
        steps.append({"ask": QUESTIONS[(self.number + n) % len(QUESTIONS)]})
        if rng.random() < 0.3:
            steps.append({"ask": QUESTIONS[(self.number + n + 1) % len(QUESTIONS)]})
        steps.append({"say": "That's all for this turn."})
        return json.dumps(steps)


def reply_for(question: dict, rng: random.Random, variant: int) -> dict:
    """A reply the question accepts (``variant`` makes a second one differ), or now and then a
    dismissal (or, for a confirmation, a refusal)."""
    kind = question["kind"]
    if rng.random() < DISMISS_SHARE:
        return {"action": "decline" if kind == "confirm" else "dismiss"}
    if kind == "path":
        return {"answer": "." if question["mode"] == "folder" else "README.md"}
    if kind == "choice":
        values = [option["value"] for option in question["options"]]
        if question["multiple"]:
            return {"answer": values[-max(1, question["min_choices"] or 1) :]}
        return {"answer": values[variant % len(values)]}
    if kind == "text":
        return {"answer": WORDS[(rng.randrange(len(WORDS)) + variant) % len(WORDS)]}
    if kind == "confirm":
        return {"answer": variant % 2 == 0}
    fields = {}
    for name, schema in question["schema"]["properties"].items():
        if schema.get("enum"):
            fields[name] = schema["enum"][0]
        elif schema.get("type") == "boolean":
            fields[name] = variant % 2 == 1
        elif schema.get("type") in ("integer", "number"):
            fields[name] = schema.get("minimum", 1)
        else:
            fields[name] = f"soak {variant}"
    return {"answer": fields}


class Bot:
    """Answers every question over REST, after a pause, as a person would."""

    def __init__(self, soak: Soak):
        self.soak = soak
        self.rng = random.Random(soak.rng.random())
        self.pending: set[asyncio.Task] = set()
        self.asked: set[str] = set()
        self.replies: dict[str, dict] = {}  # question id -> the winning reply's response
        self.sent: dict[str, dict] = {}  # question id -> the winning reply as sent
        self.races = 0
        self.failures: list[str] = []

    def ask(self, question: dict) -> None:
        self.asked.add(question["id"])
        task = asyncio.create_task(self.answer(question))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def answer(self, question: dict) -> None:
        await asyncio.sleep(self.rng.uniform(0.05, 1.5))
        race = self.rng.random() < RACE_SHARE
        bodies = [reply_for(question, self.rng, variant) for variant in range(2 if race else 1)]
        url = f"/api/selections/{question['id']}/reply/"
        try:
            responses = await asyncio.gather(
                *(self.soak.parley.http.post(url, json=body) for body in bodies)
            )
        except Exception as error:  # anything here is a finding to report
            self.failures.append(f"{question['id']}: {error!r}")
            return
        self.races += race
        won = [(b, r) for b, r in zip(bodies, responses, strict=True) if r.status_code == 200]
        lost = [r for r in responses if r.status_code != 200]
        if len(won) != 1 or any(r.status_code != 409 for r in lost):
            codes = [r.status_code for r in responses]
            self.failures.append(
                f"{question['id']}: replies got {codes}: {responses[0].text[:200]}"
            )
            return
        body, response = won[0]
        self.sent[question["id"]] = body
        self.replies[question["id"]] = response.json()

    def check(self) -> list[str]:
        """What went wrong between the questions asked, the replies and the events."""
        problems = list(self.failures)
        for question_id in sorted(self.asked):
            body, reply = self.sent.get(question_id), self.replies.get(question_id)
            seen = self.soak.resolved.get(question_id)
            if reply is None:
                if not any(failure.startswith(question_id) for failure in self.failures):
                    problems.append(f"{question_id}: never answered")
            elif seen is None:
                problems.append(f"{question_id}: no selection.resolved on the driver's socket")
            elif seen != (reply["status"], reply["answer"]):
                problems.append(f"{question_id}: resolved as {seen}, the reply said {reply}")
            elif "answer" in body and body["answer"] != reply["answer"]:
                problems.append(f"{question_id}: sent {body}, stored {reply['answer']!r}")
        return problems


# The run --------------------------------------------------------------------------------------


def start_parley(stack: ExitStack, args, scratch: Path) -> tuple[Daphne, str, dict]:
    """PostgreSQL (unless --sqlite) and one Parley process on it, each stopped by ``stack``."""
    extra = {
        "PARLEY_AGENTS": json.dumps(
            {
                "flood": "conversations.agents.flood.FloodAgent",
                "scripted": "tests.agents.ScriptedAgent",
            }
        ),
        "PARLEY_BUILTIN_PACE_MS": "10",
        "PARLEY_SHUTDOWN_GRACE_SECONDS": "0",
    }
    if not args.sqlite:
        postgres = Postgres(scratch / "postgres", durable=False)
        stack.callback(postgres.stop, "immediate")
        postgres.start()
        postgres.create_database("parley")
        extra["DATABASE_URL"] = postgres.url("parley")
    env, token = prepare_parley(scratch / "var", extra)
    server = Daphne(
        [sys.executable, "-m", "daphne", "config.asgi:application"], env, scratch / "parley.log"
    )
    stack.callback(server.stop)
    return server, token, env


async def drive(server: Daphne, token: str, args) -> dict:
    rng = random.Random(args.seed)
    parley = Parley(server, token)
    agents = ["flood", "scripted", "builtin"]
    try:
        cids = [await parley.conversation(agents[n % 3]) for n in range(args.conversations)]
        soak = Soak(server, parley, args, rng)
        bot = Bot(soak)
        drivers = [Driver(soak, cid, agents[n % 3], bot, n) for n, cid in enumerate(cids)]
        watchers = [Watcher(soak, cids[n % len(cids)]) for n in range(args.sockets)]
        background = [asyncio.create_task(soak.sample()), asyncio.create_task(soak.count_sockets())]
        watching = [asyncio.create_task(w.run()) for w in watchers]
        minutes = args.minutes
        print(
            f"Soak: {minutes:g} min, {args.sockets} watching sockets over {len(cids)} "
            f"conversations, one driving each; the server's log is {server.log.name}",
            flush=True,
        )
        driving = [asyncio.create_task(d.run()) for d in drivers]
        try:
            async with asyncio.timeout(minutes * 60 + DRAIN_SECONDS):
                await asyncio.gather(*driving)
                while bot.pending:
                    await asyncio.wait(set(bot.pending))
        except TimeoutError:
            # Noted as a failed check (the turns still going did not complete).
            for task in driving:
                task.cancel()
            await asyncio.gather(*driving, return_exceptions=True)
        ran = soak.elapsed()
        print(f"  turns ended after {ran:.0f} s; watchers catching up …", flush=True)
        async with asyncio.timeout(TURN_SECONDS):
            latest = {cid: await parley.wait_idle(cid) for cid in cids}
        for watcher in watchers:
            watcher.log.aim(latest[watcher.log.cid])
        soak.final.set()
        try:
            async with asyncio.timeout(CATCH_UP_SECONDS):
                await asyncio.gather(*watching)
        except TimeoutError:
            for task in watching:
                task.cancel()
            await asyncio.gather(*watching, return_exceptions=True)
        # Every socket is closed: the server must let go of them all.
        left = None
        try:
            async with asyncio.timeout(30):
                while True:
                    if (left := await metric(parley, "parley_sockets_open")) == 0:
                        break
                    await asyncio.sleep(0.5)
        except TimeoutError:
            pass  # left open: a failed check
        await asyncio.sleep(SAMPLE_SECONDS * 2)
        for task in background:
            task.cancel()
        state = {
            name: await metric(parley, f"parley_{name}")
            for name in ("turns_running", "questions_parked", "questions_pending")
        }
        state["sockets_open"] = left
        return {
            "soak": soak,
            "bot": bot,
            "drivers": drivers,
            "watchers": watchers,
            "latest": latest,
            "ran": ran,
            "state": state,
        }
    finally:
        await parley.http.aclose()


def watchers_left(env: dict) -> int:
    """Watcher rows still in the database (each open socket has one)."""
    script = "from conversations.models import Watcher; print(Watcher.objects.count())"
    return int(manage_shell(env, script).split()[-1])


def log_lines(log: Path) -> dict:
    lines = log.read_text(errors="replace").splitlines()
    errors = [
        line
        for line in lines
        if " ERROR " in line or "Traceback" in line or "Exception inside application" in line
    ]
    # Warnings by what they say, without their time.
    warnings: dict[str, int] = {}
    for line in lines:
        if " WARNING " in line:
            what = line.split(" WARNING ", 1)[1][:160]
            warnings[what] = warnings.get(what, 0) + 1
    return {
        "errors": errors,
        "warnings": sum(warnings.values()),
        "distinct_warnings": sorted(warnings.items(), key=lambda item: -item[1])[:10],
    }


def memory(samples: list[tuple], minutes: float, reconnects_per_s: float) -> dict:
    """Resident memory: the first minute's peak; from minute 2 to the end of the run, its
    lowest, highest and the slope of a least-squares line, in MB a minute."""
    mb = [(t, rss / 2**20) for t, rss, _, _ in samples]
    first = [value for t, value in mb if t <= 60]
    later = [(t, value) for t, value in mb if 120 <= t <= minutes * 60]
    figures = {
        "start_mb": mb[0][1],
        "first_minute_peak_mb": max(first),
        "fds": [samples[0][2], max(s[2] for s in samples), samples[-1][2]],
        "threads": [samples[0][3], max(s[3] for s in samples), samples[-1][3]],
        "end_mb": mb[-1][1],
    }
    if len(later) >= 10:
        slope = statistics.linear_regression([t / 60 for t, _ in later], [v for _, v in later])
        figures |= {
            "after_2_min": {
                "min_mb": min(v for _, v in later),
                "max_mb": max(v for _, v in later),
                "slope_mb_per_min": slope.slope,
                "bytes_per_reconnect": slope.slope * 2**20 / 60 / reconnects_per_s
                if reconnects_per_s
                else None,
                "samples": len(later),
            }
        }
    return figures


def judge(run: dict, args, log: dict, watcher_rows: int) -> tuple[dict, list[tuple]]:
    """The figures of the run, and the checks as (passed, what) rows."""
    soak, bot, drivers, watchers = run["soak"], run["bot"], run["drivers"], run["watchers"]
    logs = [d.log for d in drivers] + [w.log for w in watchers]
    incomplete = [
        f"{log.cid}: ended at {log.last} of {run['latest'][log.cid]}"
        for log in logs
        if log.last != run["latest"][log.cid]
    ]
    gaps = sum(len(log.gaps) for log in logs)
    duplicates = sum(log.duplicates for log in logs)
    errors = [e for log in logs for e in log.errors]
    server_closes = [c for log in logs for c in log.server_closes]
    failed_connects = [f for log in logs for f in log.connect_failures]
    behind = [b for log in logs for b in log.behind_ready]
    connections = sum(log.connects for log in logs)
    reconnects = connections - len(logs)
    outcomes: dict[str, int] = {}
    for driver in drivers:
        for outcome, count in driver.outcomes.items():
            outcomes[outcome] = outcomes.get(outcome, 0) + count
    malformed = [m for d in drivers for m in d.malformed]
    asked = bot.asked
    question_problems = bot.check()
    statuses: dict[str, int] = {}
    for reply in bot.replies.values():
        statuses[reply["status"]] = statuses.get(reply["status"], 0) + 1
    drops: dict[str, int] = {}
    for watcher in watchers:
        for manner, count in watcher.drops.items():
            drops[manner] = drops.get(manner, 0) + count
    mem = memory(soak.samples, args.minutes, reconnects / run["ran"])
    figures = {
        "minutes": args.minutes,
        "database": "SQLite" if args.sqlite else "PostgreSQL",
        "sockets": len(logs),
        "watching_sockets": len(watchers),
        "conversations": len(drivers),
        "connections": connections,
        "reconnects": reconnects,
        "reconnects_per_s": reconnects / run["ran"],
        "drops": drops,
        "turns": outcomes,
        "turn_seconds": {
            agent: {
                "p50": statistics.median(durations),
                "max": max(durations),
                "turns": len(durations),
            }
            for agent in ("flood", "scripted", "builtin")
            if (durations := [t for d in drivers if d.agent == agent for t in d.durations])
        },
        "questions": len(asked),
        "replies": statuses,
        "races": bot.races,
        "events_stored": sum(run["latest"].values()),
        "events_delivered": sum(log.delivered for log in logs),
        "gaps": gaps,
        "duplicates": duplicates,
        "ws_errors": len(errors),
        "server_closes": len(server_closes),
        "failed_connects": len(failed_connects),
        "error_lines": len(log["errors"]),
        "warning_lines": log["warnings"],
        "warnings": log["distinct_warnings"],
        "after_close": {**run["state"], "watcher_rows": watcher_rows},
        "memory": mem,
        "socket_counts": soak.socket_counts,
        "load_average": os.getloadavg(),
    }
    after = figures["after_close"]
    later = mem.get("after_2_min")
    checks = [
        (
            not incomplete and gaps == 0 and duplicates == 0 and not behind,
            f"every socket's log is seq 1..latest: {len(logs)} sockets, {reconnects:,} reconnects,"
            f" gaps {gaps}, duplicates {duplicates}, incomplete {len(incomplete)}"
            + (f" ({incomplete[:3]})" if incomplete else "")
            + (f", ws.ready behind {behind[:3]}" if behind else ""),
        ),
        (
            not errors and not server_closes and not failed_connects,
            f"no socket refused or closed by the server: ws.error {len(errors)}, server closes "
            f"{len(server_closes)} {sorted(set(server_closes))}, failed connects "
            f"{len(failed_connects)}"
            + (f" ({(errors + failed_connects)[:3]})" if errors or failed_connects else ""),
        ),
        (
            set(outcomes) == {"turn.completed"} and not malformed,
            f"every turn completed, started first and ended last: {outcomes}"
            + (f"; {malformed[:3]}" if malformed else ""),
        ),
        (
            not question_problems,
            f"every question settled as its winning reply said: {len(asked)} asked, {statuses}, "
            f"{bot.races} answered twice at once with one winner each"
            + (f"; {question_problems[:3]}" if question_problems else ""),
        ),
        (
            not log["errors"],
            f"server log: {len(log['errors'])} ERROR lines ({log['warnings']} WARNING)"
            + (f": {log['errors'][:3]}" if log["errors"] else ""),
        ),
        (
            after["sockets_open"] == 0
            and watcher_rows == 0
            and after["turns_running"] == 0
            and after["questions_parked"] == 0,
            f"after every socket closed: sockets open {after['sockets_open']:.0f}, watcher rows "
            f"{watcher_rows}, turns running {after['turns_running']:.0f}, questions parked "
            f"{after['questions_parked']:.0f}",
        ),
    ]
    if later is None:
        checks.append(
            (True, f"resident memory not judged: a run of {args.minutes:g} min has no minute 2 on")
        )
    else:
        checks.append(
            (
                later["slope_mb_per_min"] <= args.max_slope,
                f"resident memory flat from minute 2: slope {later['slope_mb_per_min']:+.2f} MB/min"
                f" (at most {args.max_slope:g})",
            )
        )
    return figures, checks


def report(figures: dict, checks: list[tuple]) -> str:
    f, mem = figures, figures["memory"]
    turns = sum(f["turns"].values())
    lines = [
        f"Soak of {f['minutes']:g} min on {f['database']}: {f['sockets']} sockets "
        f"({f['watching_sockets']} watching at random, {f['conversations']} driving) over "
        f"{f['conversations']} conversations; load average at the end "
        f"{', '.join(f'{v:.1f}' for v in f['load_average'])}",
        f"  connections {f['connections']:,}: {f['reconnects']:,} reconnects "
        f"({f['reconnects_per_s']:.1f}/s; dropped by closing {f['drops']['close']:,}, going away "
        f"{f['drops']['going away']:,}, connection lost {f['drops']['lost']:,})",
        f"  turns {turns:,}; questions {f['questions']:,} ({f['replies']}; "
        f"{f['races']} answered twice at once)",
        "  a turn's seconds, p50 / max: "
        + ", ".join(
            f"{agent} {t['p50']:.1f} / {t['max']:.1f} ({t['turns']})"
            for agent, t in f["turn_seconds"].items()
        ),
        f"  events stored {f['events_stored']:,}, delivered to sockets {f['events_delivered']:,}; "
        f"gaps {f['gaps']}, duplicates {f['duplicates']}, errors {f['error_lines']}",
        f"  resident memory: {mem['start_mb']:.1f} MB at the start, first-minute peak "
        f"{mem['first_minute_peak_mb']:.1f} MB, {mem['end_mb']:.1f} MB with every socket closed",
    ]
    if later := mem.get("after_2_min"):
        per = later["bytes_per_reconnect"]
        lines.append(
            f"  from minute 2: min {later['min_mb']:.1f} MB, max {later['max_mb']:.1f} MB, slope "
            f"{later['slope_mb_per_min']:+.2f} MB/min"
            + (f" ({per:+.0f} bytes per reconnect)" if per is not None else "")
            + f", {later['samples']} samples"
        )
    lines.append(
        f"  server's file descriptors (start, max, end) {mem['fds']}, threads {mem['threads']}"
    )
    lines += [f"  warning x{count}: {what}" for what, count in f["warnings"][:5]]
    lines += [f"  [{'ok' if passed else 'FAILED'}] {what}" for passed, what in checks]
    return "\n".join(lines)


def watchdog(deadline: float, stack: ExitStack) -> threading.Timer:
    """Past the hard deadline, stop everything this run started and leave, whatever the loop
    is doing."""

    def expire():
        print(f"Soak: hard deadline of {deadline:.0f} s passed; stopping.", flush=True)
        try:
            stack.close()
        finally:
            os._exit(3)

    timer = threading.Timer(deadline, expire)
    timer.daemon = True
    timer.start()
    return timer


def main(args) -> int:
    deadline = SETUP_SECONDS + args.minutes * 60 + DRAIN_SECONDS + CATCH_UP_SECONDS + 120
    scratch = scratch_folder("parley-soak-")
    passed = False
    with ExitStack() as stack:
        timer = watchdog(deadline, stack)
        stack.callback(timer.cancel)
        server, token, env = start_parley(stack, args, scratch)
        run = asyncio.run(drive(server, token, args))
        rows = watchers_left(env)
        server.stop()
        figures, checks = judge(run, args, log_lines(scratch / "parley.log"), rows)
        passed = all(ok for ok, _ in checks)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "soak.json").write_text(
        json.dumps({**figures, "passed": passed, "checks": checks}, indent=2)
    )
    print()
    print(report(figures, checks))
    if passed:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"\nSoak FAILED; the server's log and database are in {scratch}")
    return 0 if passed else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="half a minute, to try it")
    parser.add_argument("--minutes", type=float, default=4.0, help="how long the load runs")
    parser.add_argument("--sockets", type=int, default=300, help="watching sockets")
    parser.add_argument("--conversations", type=int, default=24, help="one driver each")
    parser.add_argument(
        "--lifetime", type=float, default=LIFETIME_SECONDS, help="a connection's mean seconds"
    )
    parser.add_argument(
        "--max-slope", type=float, default=1.0, help="MB a minute resident memory may grow"
    )
    parser.add_argument("--sqlite", action="store_true", help="SQLite rather than PostgreSQL")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.quick:
        args.minutes = 0.5
    sys.exit(main(args))

"""Rolling deploys of `make cluster` under steady load, through HAProxy and TLS, as a team would
live through them: nothing fails, nothing is lost, nothing is done twice.

Each test starts the cluster as an operator does (``python -m ops.cluster``), sends traffic
through the one https address it prints (tests.cluster.traffic), runs ``python -m ops.cluster
deploy`` while the traffic flows, then stops the traffic and compares what every client saw with
what is stored. The figures of each run (requests, sockets, events, 5xx, the longest pause a
socket saw) are written to test-artifacts/deploy-figures.json."""

import asyncio
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.cluster.running import RunningCluster
from tests.cluster.traffic import TERMINAL, Traffic
from tests.conftest import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.deploy]

SOCKETS = 100
# Room for the traffic: a hundred sockets and a few tails per person, turns back to back.
LIMITS = {
    "PARLEY_MAX_SOCKETS_PER_PERSON": "200",
    "PARLEY_MAX_TAILS_PER_PERSON": "50",
    "PARLEY_TURN_RATE": "6000/min",
    "PARLEY_QUESTION_RATE": "6000/min",
    "PARLEY_CONVERSATION_RATE": "6000/min",
}


@pytest.fixture(scope="module")
def cluster():
    """One `make cluster` for the module's deploys (each test brings its own traffic), in a
    folder PostgreSQL's user can reach (test_make_cluster.py tries one it cannot)."""
    parent = Path(tempfile.mkdtemp(prefix="parley-deploy-"))
    parent.chmod(0o755)  # PostgreSQL's user passes through it
    running = RunningCluster(parent / "cluster", **LIMITS)
    try:
        running.wait_ready()
        assert "cannot reach" not in running.text  # PostgreSQL's data is where it was asked
        yield running
    finally:
        code = running.stop()
        # The proxy's and the processes' logs, kept for whoever reads a failure.
        kept = ROOT / "test-artifacts" / "deploy-logs"
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        for log in [*running.folder.glob("daphne-*.log"), running.folder / "proxy/haproxy.log"]:
            shutil.copy(log, kept)
        shutil.rmtree(parent, ignore_errors=True)
        assert code == 0, running.text


async def _wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        await asyncio.sleep(0.1)


async def _answer_the_outside_agent(traffic: Traffic, cids: list[str]) -> str:
    """The outside agent's question (the one in no conversation of the traffic), answered."""
    async with traffic.client("alice") as client:
        while True:
            pending = await traffic.request(client, "GET", "/api/selections/?status=pending")
            if pending is not None and pending.status_code == 200:
                for question in pending.json():
                    if question["conversation"] not in cids and question["kind"] == "choice":
                        path = f"/api/selections/{question['id']}/reply/"
                        answered = await traffic.request(
                            client, "POST", path, json={"answer": "pg"}
                        )
                        assert answered is not None and answered.status_code == 200
                        return question["id"]
            await asyncio.sleep(0.2)


async def _under_traffic(cluster: RunningCluster, during) -> dict:
    """Run the traffic, ``during(traffic)`` while it flows, then check everything; the figures."""
    logged_before = len(_proxy_log(cluster))  # the module's cluster served other tests first
    people = {name: cluster.token(name) for name in ("alice", "bob", "carol")}
    traffic = Traffic(cluster.url, cluster.ca_file, people)
    streaming = [await traffic.create_conversation("alice", f"Streams {n}") for n in range(4)]
    asking = [await traffic.create_conversation("bob", f"Questions {n}") for n in range(2)]
    cids = streaming + asking
    workers = [asyncio.create_task(traffic.stream_turns("alice", cid)) for cid in streaming]
    workers += [asyncio.create_task(traffic.ask_and_answer("bob", "alice", cid)) for cid in asking]
    workers += [asyncio.create_task(traffic.browse(who, cids)) for who in ("alice", "carol")]
    watching = [
        asyncio.create_task(traffic.watch(("alice", "bob", "carol")[n % 3], cids[n % len(cids)]))
        for n in range(SOCKETS)
    ]
    watching += [asyncio.create_task(traffic.tail("carol", cid)) for cid in cids]
    outside = asyncio.create_task(traffic.outside_agent("bob"))
    started = time.monotonic()
    await _wait_until(
        lambda: (
            len(traffic.watchers) == len(watching)
            and all(watcher.events for watcher in traffic.watchers)
            and traffic.answered
        ),
        120,
        "traffic flowing",
    )
    deploys = await during(traffic, lambda: _answer_the_outside_agent(traffic, cids))
    async with asyncio.timeout(180):
        await outside
    traffic.stopping.set()
    async with asyncio.timeout(180):
        await asyncio.gather(*workers)
        traffic.settled.set()
        watchers = await asyncio.gather(*watching)
    seconds = time.monotonic() - started

    assert traffic.tally.failures == [], traffic.tally.failures[:20]
    stored = {cid: await traffic.stored(cid) for cid in cids}
    for watcher in watchers:
        assert watcher.out_of_order == [], (watcher.kind, watcher.cid, watcher.out_of_order[:5])
        assert [(e["seq"], e["type"]) for e in watcher.events] == [
            (e["seq"], e["type"]) for e in stored[watcher.cid]
        ], (watcher.kind, watcher.cid)
    for cid in cids:
        ends = [e["type"] for e in stored[cid] if e["type"] in TERMINAL]
        assert ends == ["turn.completed"] * traffic.turns_started[cid], (cid, ends)
    for cid in asking:
        resolved = [e for e in stored[cid] if e["type"] == "selection.resolved"]
        asked = [e for e in stored[cid] if e["type"] == "selection.requested"]
        assert len(resolved) == len(asked) == traffic.turns_started[cid]
        assert all(e["data"]["status"] == "answered" for e in resolved)
        turns = [e for e in stored[cid] if e["type"] in ("turn.completed", "turn.failed")]
        assert [e["type"] for e in turns] == ["turn.completed"] * traffic.turns_started[cid]
    assert set(traffic.answered.values()) == {1}
    assert len(traffic.answered) == len(traffic.questions)
    assert traffic.mcp_result is not None and traffic.mcp_result["answer"] == "pg"
    for deploy in deploys:
        assert deploy.count("stopped after") == 2, deploy
        assert "killed" not in deploy
    # What the proxy saw: every request it logged answered below 500, none ended by a server
    # (termination flags starting with S: the server aborted, refused or broke the response),
    # but for a WebSocket's end (101), which the server closing after its close frame is.
    this_run = _proxy_log(cluster)[logged_before:]
    logged = re.findall(r"\] \S+ \S+ \S+ (\d{3}) \S+ \S+ \S+ (\S{4}) ", this_run)
    broken = [
        (code, flags)
        for code, flags in logged
        if code >= "500" or (flags[0] == "S" and code != "101")
    ]
    assert logged and broken == [], broken[:20]
    return {
        "seconds": round(seconds, 1),
        "requests": traffic.tally.requests,
        "statuses": dict(traffic.tally.statuses),
        "requests_the_proxy_logged": len(logged),
        "5xx": sum(1 for code, _ in logged if code >= "500"),
        "failures": len(traffic.tally.failures),
        "sockets": SOCKETS,
        "tails": len(cids),
        "events_delivered": sum(len(w.events) for w in watchers),
        "events_stored": sum(len(events) for events in stored.values()),
        "questions_answered": len(traffic.answered),
        "reconnects": dict(traffic.tally.reconnects),
        "longest_pause_seconds": round(max(w.longest_pause() for w in watchers), 2),
    }


def _proxy_log(cluster: RunningCluster) -> str:
    return (cluster.folder / "proxy" / "haproxy.log").read_text()


def _record(name: str, figures: dict) -> None:
    path = ROOT / "test-artifacts" / "deploy-figures.json"
    path.parent.mkdir(exist_ok=True)
    known = json.loads(path.read_text()) if path.exists() else {}
    known[name] = figures
    path.write_text(json.dumps(known, indent=2) + "\n")


@pytest.mark.timeout(900)
async def test_two_rolling_deploys_under_load_fail_nothing_and_lose_nothing(cluster):
    async def two_deploys(traffic, answer_outside_agent):
        first = await asyncio.to_thread(cluster.deploy)
        # The outside agent's question waited through the first deploy; answered now.
        await answer_outside_agent()
        second = await asyncio.to_thread(cluster.deploy)
        return [first, second]

    figures = await _under_traffic(cluster, two_deploys)
    _record("two rolling deploys", figures)


@pytest.mark.timeout(900)
async def test_a_deploy_through_a_database_restart_and_a_redis_failover_fails_nothing(cluster):
    """The same traffic through one deploy during which PostgreSQL is restarted behind
    PgBouncer (as the README says to: PAUSE, restart, RESUME) while the first process drains,
    and the Redis primary is killed (the sentinels promote the replica) as the second process's
    successor starts."""
    outages = []

    def on_line(line: str) -> None:
        if "draining port" in line and not outages:
            outages.append("database")
            cluster.restart_database()
        elif line.startswith("Starting a process") and outages == ["database"]:
            outages.append("redis")
            cluster.kill_redis_primary()

    async def deploy_through_outages(traffic, answer_outside_agent):
        deployed = await asyncio.to_thread(cluster.deploy, on_line)
        await answer_outside_agent()
        return [deployed]

    figures = await _under_traffic(cluster, deploy_through_outages)
    assert outages == ["database", "redis"]
    _record("a deploy through a database restart and a Redis failover", figures)

"""Search on 100,000 stored messages (``python -m bench.search``; on PostgreSQL:
``python -m ops.servers -- python -m bench.search``): the latency of ``/api/search/`` through a
real Daphne for a common word, a rare word, a phrase and a prefix, each request alternating with
a bare DRF GET on the same server (``/api/workspaces/``: the same authentication and one small
read), so each figure stands beside its twin measured in the same run."""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent

MESSAGES = int(os.environ.get("PARLEY_BENCH_SEARCH_MESSAGES", "100000"))
QUERIES = {
    "common word": "the",
    "rare word": "zeppelin",
    "phrase": '"release notes"',
    "prefix": "deploy*",
}

# Run in the Parley process's environment (manage.py shell): stores MESSAGES messages (half
# inputs, half the agent's replies) through the event log, as turns store them, in 200
# conversations over four workspaces (the bench's person is a member of three).
SEED = r"""
import random, time
from django.db import transaction
from conversations.models import Conversation, Membership, Turn, Workspace
from conversations.services import append_events
from django.contrib.auth import get_user_model
from core.people import person

random.seed(30)
user = get_user_model().objects.get(username="bench")
me = person(user)
workspaces = [Workspace.objects.get(slug="bench")]
for n in range(3):
    w = Workspace.objects.create(slug=f"team{n}", name=f"Team {n}")
    workspaces.append(w)
    if n < 2:
        Membership.objects.create(workspace=w, user=user, role="member")
common = ("the a to of and in is for on that with it this be we as are at by from or "
          "can will not you your have has was should".split())
topic = ("deploy deployment deployed release notes plan budget report schema migration "
         "database index query latency customer invoice meeting roadmap sprint review "
         "design test failure rollback server cluster cache token search page draft "
         "question answer agent workspace conversation file folder quarterly summary").split()
names = ["Alice", "Bob", "Carol", "Dave", "Émile", "Zoë"]
def sentence():
    words = [random.choice(common) if random.random() < 0.55 else random.choice(topic)
             for _ in range(random.randint(6, 18))]
    if random.random() < 0.2:
        words.insert(random.randrange(len(words)), random.choice(names))
    return " ".join(words).capitalize() + "."
def text():
    said = " ".join(sentence() for _ in range(random.randint(1, 4)))
    if random.random() < 0.0002:
        said += " The zeppelin is here."
    return said
conversations = [
    Conversation.objects.create(
        workspace=workspaces[n % 4], title=f"Conversation {n}", agent="builtin"
    )
    for n in range(200)
]
started = time.monotonic()
per_conversation = MESSAGES // 2 // len(conversations)
for conversation in conversations:
    for first in range(0, per_conversation, 10):
        turn = Turn.objects.create(
            conversation=conversation, input="", started_by=user, status="completed"
        )
        events = []
        for _ in range(10):
            said = {"input": text(), "started_by": me, "interactive": True}
            events.append(("turn.started", said))
            events.append(("message.completed", {"text": text()}))
        with transaction.atomic():
            append_events(conversation_id=conversation.pk, turn_id=turn.pk, events=events)
print(round(time.monotonic() - started, 1))
"""


def _seed(env: dict) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", f"MESSAGES = {MESSAGES}\n" + SEED],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
    ).stdout


async def run(scratch: Path, quick: bool, *, Daphne, prepare_parley, percentile) -> dict:
    """bench/run.py's stage."""
    return await asyncio.to_thread(
        measure,
        scratch,
        30 if quick else 200,
        Daphne=Daphne,
        prepare_parley=prepare_parley,
        percentile=percentile,
    )


def measure(scratch: Path, rounds: int, *, Daphne, prepare_parley, percentile) -> dict:
    load_before = os.getloadavg()[0]
    scratch.mkdir(parents=True, exist_ok=True)
    env, token = prepare_parley(scratch)
    seconds = _seed(env)
    server = Daphne(
        [sys.executable, "-m", "daphne", "config.asgi:application"], env, scratch / "search.log"
    )
    times = {name: [] for name in QUERIES} | {"bare": []}
    found = {}
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            headers={"Authorization": f"Token {token}"},
            timeout=60,
        ) as http:
            for name, query in QUERIES.items():  # warm up, and what each finds on its first page
                found[name] = len(http.get("/api/search/", params={"q": query}).json()["results"])
            for _ in range(rounds):
                for name, query in QUERIES.items():
                    for label, path, params in (
                        ("bare", "/api/workspaces/", {}),
                        (name, "/api/search/", {"q": query}),
                    ):
                        start = time.perf_counter()
                        http.get(path, params=params).raise_for_status()
                        times[label].append((time.perf_counter() - start) * 1000)
    finally:
        server.stop()
    postgres = os.environ.get("DATABASE_URL", "").startswith("postgres")
    return {
        "database": "PostgreSQL" if postgres else "SQLite",
        "messages": MESSAGES,
        "seed_seconds": float(seconds.strip().splitlines()[-1]),
        "rounds": rounds,
        "first_page": found,
        # The machine's 1-minute load average as the run began (others' work, on a shared
        # machine) and as it ended (its own requests too).
        "load": [load_before, os.getloadavg()[0]],
        "ms": {
            name: {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}
            for name, values in times.items()
        },
    }


def report(result: dict) -> list[str]:
    ms = result["ms"]
    lines = [
        f"## Search on {result['messages']:,} messages ({result['database']})",
        "",
        f"`/api/search/` through Daphne, {result['rounds']} requests per query, each after a "
        f"bare DRF GET (`/api/workspaces/`) on the same server (stored in "
        f"{result['seed_seconds']:.0f} s through the event log, indexed as stored):",
        "",
        "| query | first page | p50 ms | p99 ms | p50 / bare p50 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    bare = ms["bare"]["p50"]
    for name, query in QUERIES.items():
        lines.append(
            f"| {name} `{query}` | {result['first_page'][name]} | {ms[name]['p50']:.1f} | "
            f"{ms[name]['p99']:.1f} | {ms[name]['p50'] / bare:.1f} |"
        )
    lines.append(f"| bare DRF GET | | {bare:.1f} | {ms['bare']['p99']:.1f} | 1 |")
    began, ended = result["load"]
    lines += ["", f"Load average {began:.1f} as the run began, {ended:.1f} as it ended."]
    return lines


if __name__ == "__main__":
    from bench.run import Daphne, percentile, prepare_parley

    result = measure(
        Path(tempfile.mkdtemp(prefix="parley-search-")),
        30 if "--quick" in sys.argv else 200,
        Daphne=Daphne,
        prepare_parley=prepare_parley,
        percentile=percentile,
    )
    print("\n".join(report(result)))
    print(json.dumps(result))

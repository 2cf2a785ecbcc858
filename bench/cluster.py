"""Parley across two processes, the last stage of `make bench`.

PostgreSQL and Redis in a scratch folder, and two Parley processes A and B sharing them (as
`make cluster` runs them), beside the bare Daphne app of bench/bare_app.py:

- **a question answered across processes**: a turn started over B's REST API (so it runs and
  parks on B) asks a question; a socket on A watches the conversation; the answer is POSTed to
  A. Timed from sending the answer to its ``selection.resolved`` and to the resumed turn's next
  event on A's socket, beside a bare ASGI POST round trip to bench/bare_app.py (and, for
  comparison with the one-process figure, Parley's own refused reply on A), sample by sample;
  the ratio of the p50s is taken within each round;
- **one stream fanned out across processes**: a flood agent's turn started on A, watched by 20
  sockets on A and 20 on B, beside the bare consumer's ceiling for 20 sockets in the same round;
- **access removed**: a guest with a socket open on A and one on B is removed from the workspace
  in A's admin; timed from sending the admin's delete to each socket's close (4403): A acts
  once the change commits, B once A tells it over Redis.

Run alone with ``.venv/bin/python -m bench.cluster [--quick]``; bench/run.py runs it as its
last stage. Every process, PostgreSQL and Redis are stopped and the scratch folder removed
whatever happens.
"""

import argparse
import asyncio
import re
import shutil
import sys
import time
from contextlib import ExitStack, contextmanager

import httpx
import websockets

from bench.run import (
    Daphne,
    Parley,
    ceiling_round,
    manage_shell,
    median,
    park_one,
    percentile,
    prepare_parley,
    until_terminal,
)
from ops.servers import Postgres, Redis, scratch_folder

SOCKETS_PER_PROCESS = 20


@contextmanager
def two_processes(extra: dict | None = None):
    """PostgreSQL, Redis, Parley's A and B and the bare app, started in a scratch folder; all
    stopped and the folder removed on the way out, however it is left. ``extra``: more of
    Parley's environment."""
    python = sys.executable
    with ExitStack() as stack:
        scratch = scratch_folder("parley-bench-cluster-")
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        postgres = Postgres(scratch / "postgres", durable=False)
        stack.callback(postgres.stop, "immediate")
        postgres.start()
        postgres.create_database("parley")
        redis = Redis(scratch / "redis")
        stack.callback(redis.stop)
        redis.start()
        env, token = prepare_parley(
            scratch / "var",
            {
                "DATABASE_URL": postgres.url("parley"),
                "REDIS_URL": redis.url,
                "PARLEY_SHUTDOWN_GRACE_SECONDS": "0",
                **(extra or {}),
            },
        )
        servers = {}
        for name in ("a", "b"):
            servers[name] = Daphne(
                [python, "-m", "daphne", "config.asgi:application"],
                env,
                scratch / f"parley-{name}.log",
            )
            stack.callback(servers[name].stop)
        guest = _make_guest(env)
        bare = Daphne(
            [python, "-m", "daphne", "bench.bare_app:application"],
            {"DJANGO_SETTINGS_MODULE": "config.settings", "PARLEY_VAR_DIR": str(scratch / "var")},
            scratch / "bare.log",
        )
        stack.callback(bare.stop)
        yield servers["a"], servers["b"], bare, token, guest, env


def _make_guest(env: dict) -> dict:
    """A second person, not yet a member, with a token (for the access round)."""
    script = (
        "from django.contrib.auth import get_user_model;"
        "from accounts.tokens import token_create;"
        "from conversations.models import Workspace;"
        "u = get_user_model().objects.create_user('guest', password='guest');"
        "print(u.pk, Workspace.objects.get(slug='bench').pk, token_create(user=u, name='bench')[1])"
    )
    out = manage_shell(env, script)
    user, workspace, token = out.strip().splitlines()[-1].split()
    return {"user": user, "workspace": workspace, "token": token}


class Admin:
    """The bench's superuser in A's Django admin."""

    def __init__(self, server: Daphne):
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=120)

    async def post(self, path: str, data: dict) -> httpx.Response:
        page = await self.http.get(path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return await self.http.post(
            path,
            data={**data, "csrfmiddlewaretoken": token},
            headers={"Referer": f"{self.http.base_url}{path}"},
        )

    async def log_in(self) -> None:
        done = await self.post("/admin/login/", {"username": "bench", "password": "bench"})
        assert done.status_code == 302, done.text

    async def add_membership(self, guest: dict) -> str:
        data = {"user": guest["user"], "workspace": guest["workspace"], "role": "member"}
        done = await self.post("/admin/conversations/membership/add/", data)
        assert done.status_code == 302, done.text
        page = (await self.http.get(done.headers["Location"])).text
        return re.search(r"/admin/conversations/membership/(\d+)/change/", page).group(1)


async def access_round(a: Parley, b: Parley, admin: Admin, guest: dict, samples: int) -> dict:
    """``samples`` times: the guest made a member, a socket of theirs opened on A and one on B,
    then the membership deleted in A's admin; milliseconds from sending the delete to each
    socket's close."""
    cid = await a.conversation()
    headers = {"Authorization": f"Token {guest['token']}"}
    times = {"a": [], "b": []}

    async def closed(ws, started: float) -> float:
        try:
            while True:
                await ws.recv()
        except websockets.ConnectionClosed as closing:
            assert closing.rcvd is not None and closing.rcvd.code == 4403, closing
        return (time.perf_counter() - started) * 1000

    for _ in range(samples):
        membership = await admin.add_membership(guest)
        path = f"/ws/conversations/{cid}/"
        async with a.server.ws(path, headers) as on_a, b.server.ws(path, headers) as on_b:
            await on_a.recv()  # ws.ready
            await on_b.recv()
            started = time.perf_counter()
            delete = f"/admin/conversations/membership/{membership}/delete/"
            waiting = [asyncio.create_task(closed(ws, started)) for ws in (on_a, on_b)]
            done = await admin.post(delete, {"post": "yes"})
            assert done.status_code == 302, done.text
            async with asyncio.timeout(60):
                on_a_ms, on_b_ms = await asyncio.gather(*waiting)
        times["a"].append(on_a_ms)
        times["b"].append(on_b_ms)
    return times


async def answer_across(a: Parley, b: Parley, bare: httpx.AsyncClient, samples: int) -> dict:
    """One round of ``samples`` questions asked on B and answered on A, each followed by a bare
    POST and by Parley's refused reply on A; milliseconds, per sample."""
    cid = await a.conversation(agent="builtin")
    times = {"resolved": [], "next_event": [], "bare": [], "refused": []}
    async with a.watch(cid) as ws:
        await ws.recv()  # ws.ready
        for _ in range(samples):
            selection_id = await park_one(b, cid, ws)  # the turn runs on B, and parks there

            async def arrivals(started: float):
                # Read A's socket while the answer is in flight.
                while '"type":"selection.resolved"' not in (await ws.recv())[:60]:
                    pass
                times["resolved"].append((time.perf_counter() - started) * 1000)
                while not (await ws.recv()).startswith('{"seq"'):
                    pass
                times["next_event"].append((time.perf_counter() - started) * 1000)

            started = time.perf_counter()
            reading = asyncio.create_task(arrivals(started))
            response = await a.http.post(
                f"/api/selections/{selection_id}/reply/", json={"answer": "README.md"}
            )
            async with asyncio.timeout(60):
                await reading
            response.raise_for_status()
            await until_terminal(ws)
            # The bare round trip: the same request to an ASGI app with nothing in it.
            started = time.perf_counter()
            response = await bare.post("/api/selections/s_bare/reply/", json={"answer": "x"})
            times["bare"].append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            # Parley's own floor on A: a reply to an unknown question, refused after one lookup.
            started = time.perf_counter()
            await a.http.post("/api/selections/s_missing/reply/", json={"answer": "x"})
            times["refused"].append((time.perf_counter() - started) * 1000)
    return times


async def fan_out_round(a: Parley, b: Parley, per_process: int, events: int) -> dict:
    """A flood turn started on A, watched by ``per_process`` sockets on A and as many on B:
    deliveries per second to all of them, and to each process's sockets."""
    cid = await a.conversation()
    on_a = [await a.watch(cid).__aenter__() for _ in range(per_process)]
    on_b = [await b.watch(cid).__aenter__() for _ in range(per_process)]
    connections = on_a + on_b
    try:
        for ws in connections:
            await ws.recv()  # ws.ready

        async def watched(ws) -> tuple[int, float]:
            count = await until_terminal(ws)
            return count, time.perf_counter()

        started = time.perf_counter()
        await a.start(cid, f"{events} events")
        async with asyncio.timeout(600):
            done = await asyncio.gather(*(watched(ws) for ws in connections))
    finally:
        for ws in connections:
            await ws.close()
    assert all(count == events + 2 for count, _ in done), [count for count, _ in done]
    elapsed_a = max(moment for _, moment in done[:per_process]) - started
    elapsed_b = max(moment for _, moment in done[per_process:]) - started
    per_socket = events + 2
    return {
        "events_per_s": per_socket / max(elapsed_a, elapsed_b),
        "deliveries_per_s": 2 * per_process * per_socket / max(elapsed_a, elapsed_b),
        "deliveries_per_s_a": per_process * per_socket / elapsed_a,
        "deliveries_per_s_b": per_process * per_socket / elapsed_b,
    }


def spread(values: list[float]) -> dict:
    return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}


async def run(quick: bool, rounds: int) -> dict:
    """The stage: ``rounds`` rounds, each a batch of questions answered across processes (with
    their bare POSTs) and then a ceiling round and a fan-out round, taking turns."""
    samples = 15 if quick else 40
    events = 2_000 if quick else 10_000
    per_process = SOCKETS_PER_PROCESS
    with two_processes() as (server_a, server_b, bare_server, token, guest, _):
        a, b = Parley(server_a, token), Parley(server_b, token)
        bare = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{bare_server.port}", headers=a.headers, timeout=120
        )
        admin = Admin(server_a)
        questions, ceiling, fan_out = [], [], []
        try:
            for number in range(rounds):
                print(f"  round {number + 1} of {rounds} …", flush=True)
                questions.append(await answer_across(a, b, bare, samples))
                ceiling.append(await ceiling_round(bare_server, per_process, events))
                fan_out.append(await fan_out_round(a, b, per_process, events))
            await admin.log_in()
            access = await access_round(a, b, admin, guest, 5 if quick else 20)
        finally:
            for client in (a.http, b.http, bare, admin.http):
                await client.aclose()

    def pooled(key: str) -> list[float]:
        return [value for round_ in questions for value in round_[key]]

    def within(numerator, denominator) -> float:
        return median([n / d for n, d in zip(numerator, denominator, strict=True)])

    next_p50 = [percentile(q["next_event"], 0.5) for q in questions]
    bare_p50 = [percentile(q["bare"], 0.5) for q in questions]
    refused_p50 = [percentile(q["refused"], 0.5) for q in questions]
    total = [f["deliveries_per_s"] for f in fan_out]
    return {
        "rounds": rounds,
        "questions": {
            "samples": samples * rounds,
            "reply_to_resolved_ms": spread(pooled("resolved")),
            "reply_to_next_event_ms": spread(pooled("next_event")),
            "bare_asgi_post_ms": spread(pooled("bare")),
            "parley_refused_post_ms": spread(pooled("refused")),
            "ratio_p50_vs_bare_asgi": within(next_p50, bare_p50),
            "ratio_p50_vs_parley_refused": within(next_p50, refused_p50),
            "raw_p50_per_round": {
                "next_event": next_p50,
                "bare_asgi": bare_p50,
                "parley_refused": refused_p50,
            },
        },
        "fan_out": {
            "sockets_per_process": per_process,
            "events": events + 2,
            "ceiling_deliveries_per_s_20": median(ceiling),
            "events_per_s": median([f["events_per_s"] for f in fan_out]),
            "deliveries_per_s": median(total),
            "deliveries_per_s_a": median([f["deliveries_per_s_a"] for f in fan_out]),
            "deliveries_per_s_b": median([f["deliveries_per_s_b"] for f in fan_out]),
            "total_vs_ceiling": within(total, ceiling),
            "total_vs_twice_ceiling": within(total, [2 * c for c in ceiling]),
            "a_vs_ceiling": within([f["deliveries_per_s_a"] for f in fan_out], ceiling),
            "b_vs_ceiling": within([f["deliveries_per_s_b"] for f in fan_out], ceiling),
            "raw": {"ceiling": ceiling, "parley": fan_out},
        },
        "access": {
            "samples": len(access["a"]),
            "delete_to_close_ms_same_process": spread(access["a"]),
            "delete_to_close_ms_other_process": spread(access["b"]),
            "max_ms_other_process": max(access["b"]),
        },
    }


def report(results: dict) -> list[str]:
    q, f = results["questions"], results["fan_out"]
    n = f["sockets_per_process"]
    return [
        f"Across two processes (PostgreSQL + Redis; medians of {results['rounds']} rounds, "
        "ratios within each round):",
        f"  turn parked on B, REST answer sent to A -> on a socket on A ({q['samples']} samples):",
        f"    its selection.resolved: p50 {q['reply_to_resolved_ms']['p50']:.2f} ms, "
        f"p99 {q['reply_to_resolved_ms']['p99']:.2f} ms",
        f"    the resumed turn's next event: p50 {q['reply_to_next_event_ms']['p50']:.2f} ms, "
        f"p99 {q['reply_to_next_event_ms']['p99']:.2f} ms",
        f"    bare ASGI POST under Daphne: p50 {q['bare_asgi_post_ms']['p50']:.2f} ms, "
        f"p99 {q['bare_asgi_post_ms']['p99']:.2f} ms; next event / bare POST at p50: "
        f"{q['ratio_p50_vs_bare_asgi']:.2f}",
        f"    Parley's refused reply on A: p50 {q['parley_refused_post_ms']['p50']:.2f} ms; "
        f"next event / refused reply at p50: {q['ratio_p50_vs_parley_refused']:.2f}",
        f"  one stream of {f['events']:,} events started on A, {n} sockets on A and {n} on B:",
        f"    {f['events_per_s']:,.0f} events/s, {f['deliveries_per_s']:,.0f} deliveries/s to "
        f"all {2 * n} sockets (A's {f['deliveries_per_s_a']:,.0f}, B's "
        f"{f['deliveries_per_s_b']:,.0f})",
        f"    ceiling, bare consumer to {n} sockets: {f['ceiling_deliveries_per_s_20']:,.0f} "
        f"deliveries/s; per process A {f['a_vs_ceiling']:.0%}, B {f['b_vs_ceiling']:.0%} of it; "
        f"all {2 * n} sockets {f['total_vs_ceiling']:.0%} of it, "
        f"{f['total_vs_twice_ceiling']:.0%} of twice it",
        f"  a guest removed in A's admin ({results['access']['samples']} samples), from sending "
        "the delete to the guest's socket closing (4403):",
        f"    on A: p50 {results['access']['delete_to_close_ms_same_process']['p50']:.1f} ms; "
        f"on B: p50 {results['access']['delete_to_close_ms_other_process']['p50']:.0f} ms, "
        f"at most {results['access']['max_ms_other_process']:.0f} ms",
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, three rounds")
    args = parser.parse_args()
    results = asyncio.run(run(args.quick, 3 if args.quick else 5))
    print()
    print("\n".join(report(results)))

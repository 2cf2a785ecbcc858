"""People's limits, a stage of ``make bench``: what readers that stop reading cost the server,
and what the rate limits cost a request.

- **stalled tails**: the flood agent streams a Markdown answer of 8 MB (as a model's tokens
  come), each turn in a new conversation, rounds taking turns: with nobody stalled, and with
  sixteen raw-TCP tails that read nothing: the server's resident memory at its peak in each,
  and the difference against the bytes the tails left unread, as a ratio; then ten raw-TCP
  tails from ``from_seq=0`` on a finished conversation of one such turn, the same figures; and
  what the server held for them (``parley_tail_unsent_bytes``) at its most;
- **throttling**: 200 samples, taking turns, of a bare ASGI POST (bench/bare_app.py), Parley's
  ``POST /api/conversations/`` with its rate limit off (``PARLEY_CONVERSATION_RATE`` empty), on
  (DRF's throttle, counts in the process's memory), and refused (429 past the rate); and, when
  Redis is installed, on and refused with the counts on Redis: each as a multiple of the bare
  POST's p50, and the throttle's own cost (on minus off).

Run alone with ``.venv/bin/python -m bench.limits [--quick]``.
"""

import argparse
import asyncio
import json
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

MARKDOWN_BYTES = 8_000_000
LIVE_TAILS = 16
REPLAY_TAILS = 10
# The server's defaults: 256 KiB of buffer, 15 s of stall.
STALL_SECONDS = 15


def _stalled_tail(port: int, token: str, cid: str, from_seq: int) -> socket.socket:
    """A tail over raw TCP whose client reads nothing (a 16 KiB kernel buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        (
            f"GET /api/conversations/{cid}/tail/?from_seq={from_seq} HTTP/1.1\r\n"
            f"Host: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
            "Accept: text/event-stream\r\nConnection: close\r\n\r\n"
        ).encode()
    )
    return sock


def _read_to_end(sock: socket.socket) -> int:
    """Bytes the server sent before it ended the response (and closed the connection)."""
    sock.settimeout(120)
    size = 0
    with sock:
        while chunk := sock.recv(1 << 20):
            size += len(chunk)
    return size


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def _until_idle(http: httpx.AsyncClient, cid: str) -> int:
    while True:
        state = (await http.get(f"/api/conversations/{cid}/in-flight/")).json()
        if not state["in_flight"]:
            return state["latest_seq"]
        await asyncio.sleep(0.05)


async def _stream_bytes(http: httpx.AsyncClient, cid: str, after: int) -> int:
    """The size of the tail of a finished conversation after ``after``, read whole."""
    size = 0
    path = f"/api/conversations/{cid}/tail/"
    async with http.stream("GET", path, params={"from_seq": after}, timeout=300) as tail:
        async for chunk in tail.aiter_bytes():
            size += len(chunk)
    return size


async def _sampling(server, http, until) -> dict:
    """Sample the server's resident memory and what it holds for tails' clients until
    ``until()`` (async) is true."""
    peak_rss = peak_unsent = 0
    while True:
        page = (await http.get("/metrics")).text
        peak_unsent = max(peak_unsent, _metric(page, "parley_tail_unsent_bytes"))
        peak_rss = max(peak_rss, server.rss)
        if await until(page):
            return {"peak_rss": peak_rss, "peak_unsent": peak_unsent}
        await asyncio.sleep(0.05)


async def stalled_tails(server, token: str, size: int, rounds: int) -> dict:
    headers = {"Authorization": f"Token {token}"}
    url = f"http://127.0.0.1:{server.port}"
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
        turn = f"{size} markdown"
        cid = None

        async def one_turn(tails: int) -> dict:
            """A turn, in a conversation of its own (a turn's history is what the turns before
            it said: 8 MB each), watched by ``tails`` stalled tails: memory before and at its
            peak, and what each tail got."""
            nonlocal cid
            response = await http.post(
                "/api/conversations/",
                json={"workspace": "bench", "title": "8 MB", "agent": "flood"},
            )
            cid = response.json()["id"]
            await asyncio.sleep(1)
            before = server.rss
            started = (
                await http.post(f"/api/conversations/{cid}/turns/", json={"input": turn})
            ).json()
            socks = [
                _stalled_tail(server.port, token, cid, started["seq"] - 1) for _ in range(tails)
            ]
            behind_before = _metric((await http.get("/metrics")).text, "parley_tails_behind_total")

            async def done(page: str) -> bool:
                behind = _metric(page, "parley_tails_behind_total") - behind_before
                running = (await http.get(f"/api/conversations/{cid}/in-flight/")).json()
                return behind >= tails and not running["in_flight"]

            sampled = await _sampling(server, http, done)
            received = [await asyncio.to_thread(_read_to_end, sock) for sock in socks]
            whole = await _stream_bytes(http, cid, started["seq"] - 1)
            return {
                "rss_before_mb": before / 2**20,
                "rss_peak_mb": sampled["peak_rss"] / 2**20,
                "grown_mb": (sampled["peak_rss"] - before) / 2**20,
                "peak_unsent_kb": sampled["peak_unsent"] / 1024,
                "stream_mb": whole / 2**20,
                "unread_mb": sum(whole - got for got in received) / 2**20,
            }

        await one_turn(0)  # warm-up: the server's memory as such a turn leaves it
        alone, stalled = [], []
        for _ in range(rounds):
            alone.append(await one_turn(0))
            stalled.append(await one_turn(LIVE_TAILS))

        # The last one, finished, replayed from seq 0 by ten tails that read nothing.
        latest = await _until_idle(http, cid)
        whole = await _stream_bytes(http, cid, 0)
        await asyncio.sleep(1)
        before = server.rss
        behind_before = _metric((await http.get("/metrics")).text, "parley_tails_behind_total")
        socks = [_stalled_tail(server.port, token, cid, 0) for _ in range(REPLAY_TAILS)]

        async def all_behind(page: str) -> bool:
            behind = _metric(page, "parley_tails_behind_total") - behind_before
            return behind >= REPLAY_TAILS

        sampled = await _sampling(server, http, all_behind)
        received = [await asyncio.to_thread(_read_to_end, sock) for sock in socks]
        await asyncio.sleep(1)
        after = server.rss
    peak_alone = statistics.median(r["rss_peak_mb"] for r in alone)
    peak_stalled = statistics.median(r["rss_peak_mb"] for r in stalled)
    unread = statistics.median(r["unread_mb"] for r in stalled)
    replay_grown = (sampled["peak_rss"] - before) / 2**20
    replay_unread = sum(whole - got for got in received) / 2**20
    return {
        "markdown_bytes": size,
        "live": {
            "tails": LIVE_TAILS,
            "rounds": rounds,
            "stream_mb": stalled[0]["stream_mb"],
            "peak_alone_mb": peak_alone,
            "peak_stalled_mb": peak_stalled,
            "unread_mb": unread,
            "peak_unsent_kb": max(r["peak_unsent_kb"] for r in stalled),
            "extra_mb": peak_stalled - peak_alone,
            "extra_vs_unread": (peak_stalled - peak_alone) / unread,
            "raw": {"alone": alone, "stalled": stalled},
        },
        "replay": {
            "tails": REPLAY_TAILS,
            "events": latest,
            "conversation_mb": whole / 2**20,
            "rss_before_mb": before / 2**20,
            "rss_peak_mb": sampled["peak_rss"] / 2**20,
            "rss_after_mb": after / 2**20,
            "grown_mb": replay_grown,
            "peak_unsent_kb": sampled["peak_unsent"] / 1024,
            "unread_mb": replay_unread,
            "grown_vs_unread": replay_grown / replay_unread,
        },
    }


# Throttling ----------------------------------------------------------------------------------


async def throttling(servers: dict, bare_url: str, tokens: dict, samples: int, percentile):
    """Milliseconds per POST of each kind, sample by sample, taking turns."""
    times = {name: [] for name in ("bare", *servers)}
    body = {"workspace": "bench", "title": "rate", "agent": "builtin"}
    clients = {
        name: httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{server.port}",
            headers={"Authorization": f"Token {tokens[name]}"},
            timeout=60,
        )
        for name, server in servers.items()
    }
    expected = {name: 429 if name.startswith("refused") else 201 for name in servers}
    async with httpx.AsyncClient(base_url=bare_url, timeout=60) as bare:
        try:
            for client in clients.values():  # warm-up: connections, the first request's imports
                await client.post("/api/conversations/", json=body)
            for _ in range(samples):
                started = time.perf_counter()
                (await bare.post("/api/selections/s_bare/reply/", json={"answer": "x"})).read()
                times["bare"].append((time.perf_counter() - started) * 1000)
                for name, client in clients.items():
                    started = time.perf_counter()
                    response = await client.post("/api/conversations/", json=body)
                    times[name].append((time.perf_counter() - started) * 1000)
                    assert response.status_code == expected[name], (name, response.text)
        finally:
            for client in clients.values():
                await client.aclose()
    floor = percentile(times["bare"], 0.5)
    result = {
        "samples": samples,
        "ms": {
            name: {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}
            for name, values in times.items()
        },
        "x_bare": {name: percentile(values, 0.5) / floor for name, values in times.items()},
    }
    result["throttle_ms"] = result["ms"]["on"]["p50"] - result["ms"]["off"]["p50"]
    if "on_redis" in result["ms"]:
        result["throttle_redis_ms"] = (
            result["ms"]["on_redis"]["p50"] - result["ms"]["off_redis"]["p50"]
        )
    return result


def _person(env: dict, name: str, manage_shell) -> str:
    """Another person of the bench's workspace, and their token."""
    script = (
        "from django.contrib.auth import get_user_model;"
        "from accounts.tokens import token_create;"
        "from conversations.models import Workspace, Membership;"
        f"u = get_user_model().objects.create_user({name!r});"
        "w = Workspace.objects.get(slug='bench');"
        "Membership.objects.create(workspace=w, user=u, role='owner');"
        "print(token_create(user=u, name='bench')[1])"
    )
    return manage_shell(env, script).strip().splitlines()[-1]


async def run(
    scratch: Path,
    quick: bool,
    *,
    Daphne,
    prepare_parley,
    percentile,
    parts=("tails", "throttling"),
) -> dict:
    from bench.run import manage_shell

    python = sys.executable
    env, token = prepare_parley(scratch)
    results = {}
    if "tails" in parts:
        server = Daphne([python, "-m", "daphne", "config.asgi:application"], env, scratch / "p.log")
        try:
            size = MARKDOWN_BYTES // 4 if quick else MARKDOWN_BYTES
            results["stalled_tails"] = await stalled_tails(server, token, size, 2 if quick else 3)
        finally:
            server.stop()
    if "throttling" not in parts:
        return results

    # Throttling: one database, a Parley process per way of limiting, each its own person.
    redis = None
    ways = {
        "off": {"PARLEY_CONVERSATION_RATE": ""},
        "on": {"PARLEY_CONVERSATION_RATE": "1000000/min"},
        "refused": {"PARLEY_CONVERSATION_RATE": "1/day"},
    }
    if shutil.which("redis-server"):
        from ops.servers import Redis

        redis = Redis(scratch / "redis").start()
        ways["off_redis"] = {**ways["off"], "REDIS_URL": redis.url}
        ways["on_redis"] = {**ways["on"], "REDIS_URL": redis.url}
        ways["refused_redis"] = {**ways["refused"], "REDIS_URL": redis.url}
    tokens = {name: _person(env, f"rate-{name}", manage_shell) for name in ways}
    started = []
    try:
        bare = Daphne(
            [python, "-m", "daphne", "bench.bare_app:application"],
            {"DJANGO_SETTINGS_MODULE": "config.settings", "PARLEY_VAR_DIR": str(scratch)},
            scratch / "bare.log",
        )
        started.append(bare)
        servers = {}
        for name, extra in ways.items():
            servers[name] = Daphne(
                [python, "-m", "daphne", "config.asgi:application"],
                {**env, **extra},
                scratch / f"{name}.log",
            )
            started.append(servers[name])
        # Each "refused" person has made the one request their rate allows.
        for name in ways:
            if name.startswith("refused"):
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{servers[name].port}",
                    headers={"Authorization": f"Token {tokens[name]}"},
                ) as client:
                    await client.post(
                        "/api/conversations/", json={"workspace": "bench", "title": "first"}
                    )
        results["throttling"] = await throttling(
            servers,
            f"http://127.0.0.1:{bare.port}",
            tokens,
            50 if quick else 200,
            percentile,
        )
    finally:
        for process in started:
            process.stop()
        if redis is not None:
            redis.stop()
    return results


def report(stage: dict) -> list[str]:
    lines = []
    if "stalled_tails" in stage:
        t = stage["stalled_tails"]
        live, replay = t["live"], t["replay"]
        lines += [
            f"Stalled tails: a Markdown answer of {t['markdown_bytes'] / 1e6:.0f} MB "
            f"({live['stream_mb']:.1f} MB as SSE); the server's resident memory at its peak "
            f"(medians of {live['rounds']} rounds, taking turns):",
            f"  nobody stalled: {live['peak_alone_mb']:.0f} MB; {live['tails']} raw-TCP tails "
            f"reading nothing: {live['peak_stalled_mb']:.0f} MB ({live['extra_mb']:+.1f} MB) "
            f"with {live['unread_mb']:.0f} MB left unread: {live['extra_vs_unread']:.1%} of it; "
            f"at most {live['peak_unsent_kb']:.0f} KB held for them",
            f"  {replay['tails']} raw-TCP tails from seq 0 of the finished conversation "
            f"({replay['events']:,} events, {replay['conversation_mb']:.0f} MB as SSE): "
            f"{replay['rss_before_mb']:.0f} -> {replay['rss_peak_mb']:.0f} MB "
            f"({replay['grown_mb']:+.1f} MB) with {replay['unread_mb']:.0f} MB left unread: "
            f"{replay['grown_vs_unread']:.2%} of it; at most {replay['peak_unsent_kb']:.0f} KB "
            f"held for them; {replay['rss_after_mb']:.0f} MB once they had ended",
        ]
    if "throttling" in stage:
        q = stage["throttling"]
        lines += [
            f"Throttling ({q['samples']} samples of each, taking turns): ms and multiple of the "
            "bare ASGI POST at p50",
            f"{'':56}{'p50':>9}{'p99':>9}{'x bare':>9}",
        ]
        for name, label in LABELS.items():
            if name in q["ms"]:
                ms = q["ms"][name]
                lines.append(
                    f"{label:56}{ms['p50']:>9.2f}{ms['p99']:>9.2f}{q['x_bare'][name]:>9.2f}"
                )
        on_redis = q.get("throttle_redis_ms")
        lines.append(
            f"The throttle's own cost at p50: {q['throttle_ms']:+.2f} ms in memory"
            + ("" if on_redis is None else f", {on_redis:+.2f} ms on Redis")
        )
    return lines


LABELS = {
    "bare": "bare ASGI POST (no framework)",
    "off": "create a conversation, rate limit off",
    "on": "create a conversation, throttled (counts in memory)",
    "refused": "refused past the rate: 429 (in memory)",
    "off_redis": "create a conversation, rate limit off (with Redis)",
    "on_redis": "create a conversation, throttled (counts on Redis)",
    "refused_redis": "refused past the rate: 429 (on Redis)",
}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2 MB answer, 50 samples")
    parser.add_argument(
        "--only", choices=("tails", "throttling"), help="measure only stalled tails or throttling"
    )
    args = parser.parse_args()
    from bench.run import Daphne, percentile, prepare_parley

    scratch = Path(tempfile.mkdtemp(prefix="parley-bench-limits-"))
    try:
        stage = asyncio.run(
            run(
                scratch,
                args.quick,
                Daphne=Daphne,
                prepare_parley=prepare_parley,
                percentile=percentile,
                parts=(args.only,) if args.only else ("tails", "throttling"),
            )
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(stage, indent=2))
    print("\n".join(report(stage)))

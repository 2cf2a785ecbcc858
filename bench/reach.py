"""Questions reaching people, a stage of ``make bench``: on two Parley processes (PostgreSQL,
Redis) with a real SMTP server (aiosmtpd, tests/smtp_server.py) in this process:

- **asked → email accepted**: a builtin turn started on A parks on a question; timed from the
  question's ``created_at`` (stored when it was asked) to the SMTP server accepting its email,
  beside a bare twin in the same rounds, taking turns: ``smtplib`` sending a message of the
  same size to the same server from this process (connect, send, quit);
- **a thousand questions at once**: 1,000 builtin turns parked at once, half on A and half on
  B, each question emailed: the seconds from the first request until every email was accepted
  (and how many were accepted twice: none is the promise), beside the bare twin: the same
  number of messages sent by ``smtplib`` from 8 threads (as many as a process's sending
  threads).

Run alone with ``.venv/bin/python -m bench.reach [--quick]``.
"""

import argparse
import asyncio
import smtplib
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.cluster import two_processes  # noqa: E402
from bench.run import Parley, manage_shell, park, percentile  # noqa: E402
from tests.smtp_server import Mailbox  # noqa: E402

SENDING_THREADS = 8


def _bench_person_hears_everything(env: dict) -> None:
    """The bench's person gets an email for every question they may answer."""
    manage_shell(
        env,
        "from django.contrib.auth import get_user_model;"
        "from reach.models import Preference;"
        "u = get_user_model().objects.get(username='bench');"
        "u.email = 'bench@example.com'; u.save();"
        "Preference.objects.create(user=u, email='all')",
    )


def _bare_send(port: int, body: bytes) -> float:
    started = time.perf_counter()
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as smtp:
        smtp.sendmail("bench@parley.test", ["bench@example.com"], body)
    return time.perf_counter() - started


def _asked_at(question: dict) -> float:
    return datetime.fromisoformat(question["created_at"].replace("Z", "+00:00")).timestamp()


async def asked_to_accepted(parley: Parley, mailbox: Mailbox, samples: int) -> dict:
    """``samples`` questions on A, each timed to its email, each followed by a bare send."""
    loop = asyncio.get_running_loop()
    parley_ms, bare_ms = [], []
    cids = [await parley.conversation(agent="builtin") for _ in range(samples)]
    body = None
    for cid in cids:
        seen = len(mailbox.messages)
        await parley.start(cid, "summarize")
        messages = await loop.run_in_executor(None, mailbox.wait_for, seen + 1, 60)
        message, arrived = messages[-1], mailbox.arrivals[seen]
        question = (
            await parley.http.get(f"/api/selections/{message['X-Parley-Question']}/")
        ).json()
        parley_ms.append((arrived - _asked_at(question)) * 1000)
        body = body or mailbox.raw[seen]
        bare_ms.append(
            await loop.run_in_executor(None, _bare_send, mailbox.controller.port, body) * 1000
        )
        # The bare message is not Parley's: forget it, so the next sample counts from here.
        await loop.run_in_executor(None, mailbox.wait_for, seen + 2, 60)
    return {"parley_ms": parley_ms, "bare_ms": bare_ms, "bytes": len(body)}


async def a_thousand_at_once(a: Parley, b: Parley, mailbox: Mailbox, count: int) -> dict:
    """``count`` questions parked at once across A and B, until every email was accepted."""
    semaphore = asyncio.Semaphore(40)

    async def limited(coroutine):
        async with semaphore:
            return await coroutine

    before = len(mailbox.messages)
    started = time.perf_counter()
    (first, _), (second, _) = await asyncio.gather(
        park(a, count // 2, limited), park(b, count - count // 2, limited)
    )
    asked = time.perf_counter() - started
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, mailbox.wait_for, before + count, 600)
    delivered = time.perf_counter() - started
    ours = {question["id"] for question in first + second}
    sent = Counter(
        message["X-Parley-Question"]
        for message in mailbox.messages[before:]
        if message["X-Parley-Question"] in ours
    )
    body = mailbox.raw[before]
    bare_started = time.perf_counter()
    with ThreadPoolExecutor(SENDING_THREADS) as pool:
        list(pool.map(lambda _: _bare_send(mailbox.controller.port, body), range(count)))
    bare = time.perf_counter() - bare_started
    return {
        "questions": count,
        "asked_s": asked,
        "all_accepted_s": delivered,
        "emails": sum(sent.values()),
        "questions_emailed": len(sent),
        "emailed_twice": sum(1 for n in sent.values() if n > 1),
        "bare_s": bare,
    }


def spread(values: list[float]) -> dict:
    return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}


async def run(quick: bool) -> dict:
    samples = 20 if quick else 60
    count = 200 if quick else 1000
    mailbox = Mailbox().start()
    try:
        extra = {"PARLEY_EMAIL_URL": mailbox.url, "PARLEY_EMAIL_FROM": "bench@parley.test"}
        with two_processes(extra) as (server_a, server_b, _bare, token, _guest, env):
            _bench_person_hears_everything(env)
            a, b = Parley(server_a, token), Parley(server_b, token)
            try:
                latency = await asked_to_accepted(a, mailbox, samples)
                burst = await a_thousand_at_once(a, b, mailbox, count)
            finally:
                await a.http.aclose()
                await b.http.aclose()
    finally:
        mailbox.stop()
    parley, bare = spread(latency["parley_ms"]), spread(latency["bare_ms"])
    return {
        "email": {
            "samples": samples,
            "asked_to_accepted_ms": parley,
            "bare_smtp_send_ms": bare,
            "ratio_p50": parley["p50"] / bare["p50"],
            "ratio_p99": parley["p99"] / bare["p99"],
            "per_sample_ratio_median": statistics.median(
                p / b for p, b in zip(latency["parley_ms"], latency["bare_ms"], strict=True)
            ),
            "message_bytes": latency["bytes"],
        },
        "burst": {
            **burst,
            "after_last_asked_s": burst["all_accepted_s"] - burst["asked_s"],
            "ratio_vs_bare": burst["all_accepted_s"] / burst["bare_s"],
        },
    }


def report(results: dict) -> list[str]:
    e, b = results["email"], results["burst"]
    return [
        "Questions reaching people (two processes, PostgreSQL + Redis, a real SMTP server):",
        f"  asked -> email accepted ({e['samples']} samples, {e['message_bytes']:,} bytes): "
        f"p50 {e['asked_to_accepted_ms']['p50']:.1f} ms, "
        f"p99 {e['asked_to_accepted_ms']['p99']:.1f} ms",
        f"    bare smtplib send of the same message: p50 {e['bare_smtp_send_ms']['p50']:.1f} ms, "
        f"p99 {e['bare_smtp_send_ms']['p99']:.1f} ms; ratio p50 {e['ratio_p50']:.2f}, "
        f"p99 {e['ratio_p99']:.2f}",
        f"  {b['questions']:,} questions at once on A and B: all asked in {b['asked_s']:.1f} s, "
        f"every email accepted {b['all_accepted_s']:.1f} s from the start, "
        f"{b['after_last_asked_s']:.1f} s after the last was asked "
        f"({b['emails']:,} emails for {b['questions_emailed']:,} questions, "
        f"{b['emailed_twice']} sent twice)",
        f"    bare: {b['questions']:,} smtplib sends from {SENDING_THREADS} threads in "
        f"{b['bare_s']:.1f} s; ratio {b['ratio_vs_bare']:.2f}",
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, 200 questions")
    args = parser.parse_args()
    print("\n".join(report(asyncio.run(run(args.quick)))))

"""Questions reaching people, a stage of ``make bench``: on two Parley processes (PostgreSQL,
Redis) with a real SMTP server (aiosmtpd, tests/smtp_server.py) and the local server speaking
Slack's Web API (tests/slack_server.py) in this process; the bench's person hears of every
question by email and by Slack direct message:

- **asked → email accepted, and → Slack's chat.postMessage received**: a builtin turn started
  on A parks on a question; timed from the question's ``created_at`` (stored when it was asked)
  to the SMTP server accepting its email and to the Slack server receiving its message, each
  beside its bare twin in the same rounds, taking turns: ``smtplib`` sending a message of the
  same size to the same server from this process (connect, send, quit), and ``slack_sdk``'s
  ``chat_postMessage`` to the same Slack server;
- **a thousand questions at once**: 1,000 builtin turns parked at once, half on A and half on
  B, each question emailed and posted: the seconds from the first request until every email was
  accepted and every message posted (and how many were sent twice: none is the promise), beside
  the bare twins: as many ``smtplib`` sends, and as many ``chat_postMessage`` calls, from 8
  threads (as many as a process's sending threads).

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
from tests.slack_server import SlackServer  # noqa: E402
from tests.smtp_server import Mailbox  # noqa: E402

SENDING_THREADS = 8
SLACK_TOKEN = "xoxb-bench"
SLACK_ID = "U0BENCH"


def _bench_person_hears_everything(env: dict) -> None:
    """The bench's person hears of every question they may answer, by email and on Slack."""
    manage_shell(
        env,
        "from django.contrib.auth import get_user_model;"
        "from reach.models import Preference;"
        "u = get_user_model().objects.get(username='bench');"
        "u.email = 'bench@example.com'; u.save();"
        "Preference.objects.create(user=u, email='all', slack='all')",
    )


def _bare_send(port: int, body: bytes) -> float:
    started = time.perf_counter()
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as smtp:
        smtp.sendmail("bench@parley.test", ["bench@example.com"], body)
    return time.perf_counter() - started


def _bare_post(slack: SlackServer) -> float:
    from slack_sdk import WebClient

    client = WebClient(token=SLACK_TOKEN, base_url=slack.api_url, timeout=30)
    started = time.perf_counter()
    client.chat_postMessage(channel=SLACK_ID, text="A question for you in “Bench”")
    return time.perf_counter() - started


def _posts(slack: SlackServer) -> list:
    return slack.calls_of("chat.postMessage")


def _wait_posts(slack: SlackServer, count: int, timeout: float) -> list:
    return slack.wait_for(lambda: len(_posts_locked(slack)) >= count, "Slack posts", timeout)


def _posts_locked(slack: SlackServer) -> list:
    return [call for call in slack.calls if call.method == "chat.postMessage"]


def _asked_at(question: dict) -> float:
    return datetime.fromisoformat(question["created_at"].replace("Z", "+00:00")).timestamp()


async def asked_to_accepted(parley: Parley, mailbox: Mailbox, slack: SlackServer, samples: int):
    """``samples`` questions on A, each timed to its email and its Slack message, each followed
    by a bare send and a bare post."""
    loop = asyncio.get_running_loop()
    times = {"email": [], "bare_email": [], "slack": [], "bare_slack": []}
    cids = [await parley.conversation(agent="builtin") for _ in range(samples)]
    body = None
    for cid in cids:
        seen, posted = len(mailbox.messages), len(_posts(slack))
        await parley.start(cid, "summarize")
        messages = await loop.run_in_executor(None, mailbox.wait_for, seen + 1, 60)
        await loop.run_in_executor(None, _wait_posts, slack, posted + 1, 60)
        message, arrived = messages[-1], mailbox.arrivals[seen]
        question = (
            await parley.http.get(f"/api/selections/{message['X-Parley-Question']}/")
        ).json()
        asked = _asked_at(question)
        times["email"].append((arrived - asked) * 1000)
        times["slack"].append((_posts(slack)[posted].wall - asked) * 1000)
        body = body or mailbox.raw[seen]
        port = mailbox.controller.port
        times["bare_email"].append(await loop.run_in_executor(None, _bare_send, port, body) * 1000)
        times["bare_slack"].append(await loop.run_in_executor(None, _bare_post, slack) * 1000)
        # The bare ones are not Parley's: the next sample counts from after them.
        await loop.run_in_executor(None, mailbox.wait_for, seen + 2, 60)
    return {**times, "bytes": len(body)}


async def a_thousand_at_once(
    a: Parley, b: Parley, mailbox: Mailbox, slack: SlackServer, count: int
) -> dict:
    """``count`` questions parked at once across A and B, until every email was accepted and
    every Slack message posted."""
    semaphore = asyncio.Semaphore(40)

    async def limited(coroutine):
        async with semaphore:
            return await coroutine

    before, posted = len(mailbox.messages), len(_posts(slack))
    started = time.perf_counter()
    (first, _), (second, _) = await asyncio.gather(
        park(a, count // 2, limited), park(b, count - count // 2, limited)
    )
    asked = time.perf_counter() - started
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, mailbox.wait_for, before + count, 600)
    emailed = time.perf_counter() - started
    await loop.run_in_executor(None, _wait_posts, slack, posted + count, 600)
    delivered = time.perf_counter() - started
    ours = {question["id"] for question in first + second}
    sent = Counter(
        message["X-Parley-Question"]
        for message in mailbox.messages[before:]
        if message["X-Parley-Question"] in ours
    )
    posts = Counter(call.args.get("text", "") for call in _posts(slack)[posted:])
    body = mailbox.raw[before]
    port = mailbox.controller.port
    bare_started = time.perf_counter()
    with ThreadPoolExecutor(SENDING_THREADS) as pool:
        list(pool.map(lambda _: _bare_send(port, body), range(count)))
    bare_email = time.perf_counter() - bare_started
    bare_started = time.perf_counter()
    with ThreadPoolExecutor(SENDING_THREADS) as pool:
        list(pool.map(lambda _: _bare_post(slack), range(count)))
    bare_slack = time.perf_counter() - bare_started
    return {
        "questions": count,
        "asked_s": asked,
        "all_emailed_s": emailed,
        "all_delivered_s": delivered,
        "emails": sum(sent.values()),
        "questions_emailed": len(sent),
        "emailed_twice": sum(1 for n in sent.values() if n > 1),
        "slack_posts": sum(posts.values()),
        "bare_email_s": bare_email,
        "bare_slack_s": bare_slack,
    }


def spread(values: list[float]) -> dict:
    return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}


async def run(quick: bool) -> dict:
    samples = 20 if quick else 60
    count = 200 if quick else 1000
    mailbox = Mailbox().start()
    slack = SlackServer(token=SLACK_TOKEN).start()
    slack.add_user(SLACK_ID, "bench@example.com", "Bench")
    try:
        extra = {
            "PARLEY_EMAIL_URL": mailbox.url,
            "PARLEY_EMAIL_FROM": "bench@parley.test",
            "PARLEY_SLACK_BOT_TOKEN": SLACK_TOKEN,
            "PARLEY_SLACK_SIGNING_SECRET": "bench-signing-secret",
            "PARLEY_SLACK_API_URL": slack.api_url,
        }
        with two_processes(extra) as (server_a, server_b, _bare, token, _guest, env):
            _bench_person_hears_everything(env)
            a, b = Parley(server_a, token), Parley(server_b, token)
            try:
                latency = await asked_to_accepted(a, mailbox, slack, samples)
                burst = await a_thousand_at_once(a, b, mailbox, slack, count)
            finally:
                await a.http.aclose()
                await b.http.aclose()
    finally:
        mailbox.stop()
        slack.stop()

    def beside(name: str) -> dict:
        parley, bare = latency[name], latency[f"bare_{name}"]
        return {
            "samples": samples,
            "asked_to_received_ms": spread(parley),
            "bare_ms": spread(bare),
            "ratio_p50": percentile(parley, 0.5) / percentile(bare, 0.5),
            "ratio_p99": percentile(parley, 0.99) / percentile(bare, 0.99),
            "per_sample_ratio_median": statistics.median(
                p / b for p, b in zip(parley, bare, strict=True)
            ),
        }

    return {
        "email": {**beside("email"), "message_bytes": latency["bytes"]},
        "slack": beside("slack"),
        "burst": {
            **burst,
            "after_last_asked_s": burst["all_delivered_s"] - burst["asked_s"],
            "email_ratio_vs_bare": burst["all_emailed_s"] / burst["bare_email_s"],
            "slack_ratio_vs_bare": burst["all_delivered_s"] / burst["bare_slack_s"],
        },
    }


def report(results: dict) -> list[str]:
    e, k, b = results["email"], results["slack"], results["burst"]

    def line(what: str, r: dict, bare: str) -> list[str]:
        return [
            f"  asked -> {what} ({r['samples']} samples): "
            f"p50 {r['asked_to_received_ms']['p50']:.1f} ms, "
            f"p99 {r['asked_to_received_ms']['p99']:.1f} ms",
            f"    {bare}: p50 {r['bare_ms']['p50']:.1f} ms, p99 {r['bare_ms']['p99']:.1f} ms; "
            f"ratio p50 {r['ratio_p50']:.2f}, p99 {r['ratio_p99']:.2f} "
            f"(per sample, median {r['per_sample_ratio_median']:.2f})",
        ]

    return [
        "Questions reaching people (two processes, PostgreSQL + Redis, a real SMTP server, "
        "Slack's protocol on loopback):",
        *line(f"email accepted ({e['message_bytes']:,} bytes)", e, "bare smtplib send"),
        *line("Slack chat.postMessage received", k, "bare slack_sdk chat_postMessage"),
        f"  {b['questions']:,} questions at once on A and B: all asked in {b['asked_s']:.1f} s; "
        f"every email accepted {b['all_emailed_s']:.1f} s and every Slack message posted "
        f"{b['all_delivered_s']:.1f} s from the start ({b['after_last_asked_s']:.1f} s after "
        f"the last was asked); {b['emails']:,} emails for {b['questions_emailed']:,} questions "
        f"({b['emailed_twice']} sent twice), {b['slack_posts']:,} Slack messages",
        f"    bare: {b['questions']:,} smtplib sends from {SENDING_THREADS} threads in "
        f"{b['bare_email_s']:.1f} s (ratio {b['email_ratio_vs_bare']:.2f}), as many "
        f"chat_postMessage calls in {b['bare_slack_s']:.1f} s (ratio "
        f"{b['slack_ratio_vs_bare']:.2f})",
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, 200 questions")
    args = parser.parse_args()
    print("\n".join(report(asyncio.run(run(args.quick)))))

"""The long-history stage of ``make bench``: a conversation of about 50,000 events opened in
Chromium, against one of a single short turn in the same rounds (alternating): the time from
navigation until the page shows the latest turn's end and is live (every stored event applied),
and until the turns before those shown have come in once the reader scrolls to the top."""

import asyncio
import os
import shutil
import sys
from pathlib import Path

import httpx
from playwright.async_api import async_playwright

CHROMIUM = os.environ.get("PARLEY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


async def log_in(page, url: str) -> None:
    """Sign the page in as the bench's person, through the login form."""
    await page.goto(f"{url}/login/")
    await page.fill("#id_username", "bench")
    await page.fill("#id_password", "bench")
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{url}/")


async def _conversation(http: httpx.AsyncClient, title: str) -> str:
    response = await http.post(
        "/api/conversations/", json={"workspace": "bench", "title": title, "agent": "flood"}
    )
    response.raise_for_status()
    return response.json()["id"]


async def _turn(http: httpx.AsyncClient, cid: str, text: str) -> None:
    response = await http.post(f"/api/conversations/{cid}/turns/", json={"input": text})
    response.raise_for_status()
    async with asyncio.timeout(120):
        while True:
            if not (await http.get(f"/api/conversations/{cid}/in-flight/")).json()["in_flight"]:
                return
            await asyncio.sleep(0.02)


async def _open(page, url: str, latest: int) -> float:
    """Milliseconds from navigation until every stored event is applied and the last turn's end
    is shown."""
    await page.goto(url, wait_until="commit")
    await page.wait_for_function(
        """(latest) => Number(document.body.dataset.lastSeq) >= latest &&
          document.querySelector('.turn:last-of-type .turn-end-row:not([hidden])') !== null""",
        arg=latest,
        timeout=120_000,
    )
    return await page.evaluate("performance.now()")


async def _earlier(page) -> float:
    """Milliseconds from scrolling to the top until the turns before those shown are in."""
    return await page.evaluate(
        """() => new Promise((resolve) => {
          const turns = () => document.querySelectorAll('.turn').length;
          const before = turns();
          const started = performance.now();
          new MutationObserver((_, observer) => {
            if (turns() > before) { observer.disconnect(); resolve(performance.now() - started); }
          }).observe(document.getElementById('transcript'), { childList: true });
          window.scrollTo(0, 0);
        })"""
    )


async def run(scratch: Path, quick: bool, *, Daphne, prepare_parley, percentile) -> dict:
    env, token = prepare_parley(scratch)
    server = Daphne(
        [sys.executable, "-m", "daphne", "config.asgi:application"], env, scratch / "history.log"
    )
    turns = 20 if quick else 100
    rounds = 3 if quick else 5
    url = f"http://127.0.0.1:{server.port}"
    headers = {"Authorization": f"Token {token}"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
            short = await _conversation(http, "Short")
            await _turn(http, short, "10 events")
            long = await _conversation(http, "Long")
            for _ in range(turns):
                await _turn(http, long, "500 events")
            latest = {
                cid: (await http.get(f"/api/conversations/{cid}/")).json()["latest_seq"]
                for cid in (short, long)
            }
        times = {"short": [], "long": [], "earlier": []}
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            await log_in(page, url)
            for _ in range(rounds):
                times["short"].append(
                    await _open(page, f"{url}/conversations/{short}/", latest[short])
                )
                times["long"].append(
                    await _open(page, f"{url}/conversations/{long}/", latest[long])
                )
                times["earlier"].append(await _earlier(page))
            await browser.close()
    finally:
        server.stop()
    ratios = [lg / sh for lg, sh in zip(times["long"], times["short"], strict=True)]
    return {
        "events": latest[long],
        "turns": turns,
        "rounds": rounds,
        "open_short_ms": percentile(times["short"], 0.5),
        "open_long_ms": percentile(times["long"], 0.5),
        "earlier_ms": percentile(times["earlier"], 0.5),
        "long_vs_short": percentile(ratios, 0.5),
        "raw": times,
    }


def report(result: dict) -> list[str]:
    return [
        "## A long conversation in Chromium",
        "",
        f"A conversation of {result['events']:,} events ({result['turns']} turns) opened beside "
        f"one of a single short turn, {result['rounds']} rounds alternating (medians):",
        "",
        "| | ms |",
        "| --- | ---: |",
        f"| short conversation: navigation -> live, last turn shown | "
        f"{result['open_short_ms']:.0f} |",
        f"| {result['events']:,} events: navigation -> live, last turn shown | "
        f"{result['open_long_ms']:.0f} |",
        f"| scrolled to the top -> the earlier turns in | {result['earlier_ms']:.0f} |",
        "",
        f"Long against short: {result['long_vs_short']:.2f}x.",
    ]

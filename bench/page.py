"""A long answer streamed into the page, in Chromium: does the page keep up?

The flood agent streams a Markdown answer (headings, paragraphs, lists, code blocks) in pieces
of 20 characters, one every 5 ms, to a conversation page open in Debian's Chromium; a short
answer the same way is the baseline, rounds alternating. For each: the animation frames the page
managed per second while the answer streamed, the share of that time its main thread was busy
(Chromium's own TaskDuration, over the DevTools protocol), its longest task, and how long after
the server stored the turn's end the page showed it (both clocks are this machine's).
"""

import asyncio
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
from playwright.async_api import async_playwright

from bench.history import ARGS, CHROMIUM, log_in

# Counts animation frames and long tasks, and notes when the turn's end is shown: installed
# before the page's own scripts (over the DevTools protocol, so the page's CSP does not apply).
WATCH = """
window.__bench = { frames: 0, longest: 0, endShownAt: null };
(function tick() { window.__bench.frames++; requestAnimationFrame(tick); })();
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    window.__bench.longest = Math.max(window.__bench.longest, entry.duration);
  }
}).observe({ type: "longtask", buffered: false });
document.addEventListener("DOMContentLoaded", () => {
  new MutationObserver(() => {
    const end = document.querySelector(".turn:last-of-type .turn-end-row:not([hidden])");
    if (end && window.__bench.endShownAt === null) window.__bench.endShownAt = Date.now();
  }).observe(document.body, { childList: true, subtree: true, attributes: true });
});
"""


async def _stream(page, cdp, http, url: str, cid: str, length: int) -> dict:
    await page.goto(f"{url}/conversations/{cid}/")
    await page.wait_for_function(
        "() => document.querySelector('#connection')?.dataset.state === 'live'", timeout=60_000
    )
    before = await _task_seconds(cdp)
    frames_before = await page.evaluate("() => window.__bench.frames")
    started = time.perf_counter()
    response = await http.post(
        f"/api/conversations/{cid}/turns/", json={"input": f"{length} markdown every 5"}
    )
    response.raise_for_status()
    turn = response.json()["turn"]
    await page.wait_for_function(
        "() => window.__bench.endShownAt !== null", timeout=300_000, polling=50
    )
    elapsed = time.perf_counter() - started
    busy = await _task_seconds(cdp) - before
    state = await page.evaluate("() => window.__bench")
    events = (await http.get(f"/api/conversations/{cid}/events/?limit=1000")).json()["events"]
    end = next(e for e in events if e["turn"] == turn and e["type"] == "turn.completed")
    stored_at = datetime.fromisoformat(end["ts"].replace("Z", "+00:00")).timestamp() * 1000
    return {
        "frames_per_s": (state["frames"] - frames_before) / elapsed,
        "main_thread_busy": busy / elapsed,
        "longest_task_ms": state["longest"],
        "end_shown_after_ms": state["endShownAt"] - stored_at,
        "seconds": elapsed,
    }


async def _task_seconds(cdp) -> float:
    metrics = (await cdp.send("Performance.getMetrics"))["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "TaskDuration")


async def run(scratch: Path, quick: bool, *, Daphne, prepare_parley, percentile) -> dict:
    env, token = prepare_parley(scratch)
    server = Daphne(
        [sys.executable, "-m", "daphne", "config.asgi:application"], env, scratch / "page.log"
    )
    url = f"http://127.0.0.1:{server.port}"
    rounds = 2 if quick else 3
    lengths = {"long": 20_000, "short": 2_000}
    results: dict[str, list[dict]] = {name: [] for name in lengths}
    try:
        async with (
            httpx.AsyncClient(
                base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60
            ) as http,
            async_playwright() as playwright,
        ):
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            await context.add_init_script(WATCH)
            page = await context.new_page()
            cdp = await context.new_cdp_session(page)
            await cdp.send("Performance.enable")
            await log_in(page, url)
            for _ in range(rounds):
                for name, length in lengths.items():
                    # A conversation of its own each time: the page holds that answer alone.
                    created = await http.post(
                        "/api/conversations/",
                        json={"workspace": "bench", "title": name, "agent": "flood"},
                    )
                    created.raise_for_status()
                    cid = created.json()["id"]
                    async with asyncio.timeout(600):
                        results[name].append(await _stream(page, cdp, http, url, cid, length))
            await browser.close()
    finally:
        server.stop()

    def middle(name: str, key: str) -> float:
        return percentile([r[key] for r in results[name]], 0.5)

    keys = ("frames_per_s", "main_thread_busy", "longest_task_ms", "end_shown_after_ms")
    return {
        "rounds": rounds,
        "lengths": lengths,
        **{name: {key: middle(name, key) for key in keys} for name in lengths},
        "raw": results,
    }


def report(result: dict) -> list[str]:
    long, short = result["long"], result["short"]
    columns = [f"{result['lengths'][name]:,} chars" for name in ("long", "short")]
    return [
        f"A Markdown answer streamed into the page in Chromium (20 characters every 5 ms), "
        f"medians of {result['rounds']} rounds:",
        f"{'':44}{columns[0]:>14}{columns[1]:>14}",
        f"{'animation frames per second while streaming':44}{long['frames_per_s']:>14.0f}"
        f"{short['frames_per_s']:>14.0f}",
        f"{'main thread busy':44}{long['main_thread_busy']:>14.0%}"
        f"{short['main_thread_busy']:>14.0%}",
        f"{'longest task, ms':44}{long['longest_task_ms']:>14.0f}{short['longest_task_ms']:>14.0f}",
        f"{'turn end stored -> shown, ms':44}{long['end_shown_after_ms']:>14.0f}"
        f"{short['end_shown_after_ms']:>14.0f}",
    ]

"""A conversation opened from the sidebar, in Chromium: how long until its page is live?

From the home page (its sidebar loaded), a click on a conversation in the sidebar, timed until
the conversation page's ``#connection`` says ``live`` (its history drawn, its socket open);
beside it, in the same run and alternating, its twins: the same conversation opened by a direct
navigation (no sidebar click), and a bare static file from the same server, loaded (the floor
of one navigation there). The conversation holds one finished turn (a short streamed answer),
among ten others in the sidebar.
"""

import asyncio
import sys
import time
from pathlib import Path

import httpx
from playwright.async_api import async_playwright

from bench.history import ARGS, CHROMIUM, log_in

LIVE = "() => document.querySelector('#connection')?.dataset.state === 'live'"


async def _from_sidebar(page, url: str, cid: str) -> float:
    await page.goto(f"{url}/")
    link = page.locator(f'#sidebar .sidebar-item[data-conversation="{cid}"] a')
    await link.wait_for(timeout=60_000)
    started = time.perf_counter()
    await link.click()
    await page.wait_for_function(LIVE, timeout=60_000, polling=10)
    return (time.perf_counter() - started) * 1000


async def _direct(page, url: str, cid: str) -> float:
    await page.goto(f"{url}/")
    await page.locator("#sidebar .sidebar-item").first.wait_for(timeout=60_000)
    started = time.perf_counter()
    await page.goto(f"{url}/conversations/{cid}/", wait_until="commit")
    await page.wait_for_function(LIVE, timeout=60_000, polling=10)
    return (time.perf_counter() - started) * 1000


async def _static(page, url: str, _cid: str) -> float:
    await page.goto(f"{url}/")
    started = time.perf_counter()
    await page.goto(f"{url}/static/parley/dom.js", wait_until="load")
    return (time.perf_counter() - started) * 1000


async def _prepare(http: httpx.AsyncClient) -> str:
    for index in range(10):
        created = await http.post(
            "/api/conversations/", json={"workspace": "bench", "title": f"Other {index}"}
        )
        created.raise_for_status()
    created = await http.post(
        "/api/conversations/", json={"workspace": "bench", "title": "Opened", "agent": "flood"}
    )
    created.raise_for_status()
    cid = created.json()["id"]
    started = await http.post(f"/api/conversations/{cid}/turns/", json={"input": "2000 markdown"})
    started.raise_for_status()
    for _ in range(600):
        if (await http.get(f"/api/conversations/{cid}/")).json()["active_turn"] is None:
            return cid
        await asyncio.sleep(0.1)
    raise TimeoutError("the flood turn did not end")


async def run(scratch: Path, quick: bool, *, Daphne, prepare_parley, percentile) -> dict:
    env, token = prepare_parley(scratch)
    server = Daphne(
        [sys.executable, "-m", "daphne", "config.asgi:application"], env, scratch / "sidebar.log"
    )
    url = f"http://127.0.0.1:{server.port}"
    opens = 8 if quick else 20
    ways = {"sidebar": _from_sidebar, "direct": _direct, "static": _static}
    times: dict[str, list[float]] = {name: [] for name in ways}
    try:
        async with (
            httpx.AsyncClient(
                base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60
            ) as http,
            async_playwright() as playwright,
        ):
            cid = await _prepare(http)
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            await log_in(page, url)
            for way in ways.values():  # once each, unmeasured: caches warm
                await way(page, url, cid)
            for _ in range(opens):
                for name, way in ways.items():
                    times[name].append(await way(page, url, cid))
            await browser.close()
    finally:
        server.stop()
    return {
        "opens": opens,
        **{
            name: {"p50_ms": percentile(values, 0.5), "p90_ms": percentile(values, 0.9)}
            for name, values in times.items()
        },
        "raw": times,
    }


def report(result: dict) -> list[str]:
    rows = (
        ("sidebar", "click in the sidebar -> page live"),
        ("direct", "direct navigation -> page live"),
        ("static", "a static file from the same server, loaded"),
    )
    lines = [
        f"A conversation opened from the sidebar in Chromium, {result['opens']} opens each, "
        "alternating:",
        f"{'':46}{'p50 ms':>10}{'p90 ms':>10}",
    ]
    for key, label in rows:
        lines.append(f"{label:46}{result[key]['p50_ms']:>10.0f}{result[key]['p90_ms']:>10.0f}")
    return lines


if __name__ == "__main__":
    import tempfile

    from bench.run import Daphne, percentile, prepare_parley

    with tempfile.TemporaryDirectory() as scratch:
        result = asyncio.run(
            run(
                Path(scratch),
                "--quick" in sys.argv,
                Daphne=Daphne,
                prepare_parley=prepare_parley,
                percentile=percentile,
            )
        )
    print("\n".join(report(result)))

"""The MCP stage of ``make bench``: an outside agent (the official ``mcp`` client) waits on a
question; the time from a person's REST answer being sent to the agent receiving the result,
beside a bare ASGI POST round trip to bench/bare_app.py in the same round (alternating)."""

import asyncio
import sys
import time
from pathlib import Path

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def _pending(http: httpx.AsyncClient, asking: asyncio.Task) -> str:
    async with asyncio.timeout(60):
        while True:
            found = (await http.get("/api/selections/", params={"status": "pending"})).json()
            if found:
                return found[0]["id"]
            if asking.done():
                raise AssertionError(f"the question was not asked: {asking.result()}")
            await asyncio.sleep(0.005)


async def run(scratch: Path, quick: bool, *, Daphne, prepare_parley, percentile) -> dict:
    # One session, one turn, every question in it.
    env, token = prepare_parley(scratch, {"PARLEY_MAX_QUESTIONS_PER_TURN": "1000"})
    python = sys.executable
    server = Daphne(
        [python, "-m", "daphne", "config.asgi:application"], env, scratch / "mcp-parley.log"
    )
    bare = Daphne(
        [python, "-m", "daphne", "bench.bare_app:application"],
        {"DJANGO_SETTINGS_MODULE": "config.settings", "PARLEY_VAR_DIR": str(scratch)},
        scratch / "mcp-bare.log",
    )
    samples = 30 if quick else 100
    headers = {"Authorization": f"Bearer {token}"}
    rest_headers = {"Authorization": f"Token {token}"}
    parley_url, bare_url = f"http://127.0.0.1:{server.port}", f"http://127.0.0.1:{bare.port}"
    answer_ms, bare_ms = [], []
    try:
        async with (
            httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as agent_http,
            httpx.AsyncClient(base_url=parley_url, headers=rest_headers, timeout=30) as rest,
            httpx.AsyncClient(base_url=bare_url, timeout=30) as bare_http,
            streamable_http_client(f"{parley_url}/mcp/", http_client=agent_http) as (r, w, _),
            ClientSession(r, w) as mcp,
        ):
            await mcp.initialize()
            for number in range(samples + 5):
                asking = asyncio.create_task(
                    mcp.call_tool("ask", {"kind": "text", "prompt": f"Question {number}?"})
                )
                selection_id = await _pending(rest, asking)
                started = time.perf_counter()
                response = await rest.post(
                    f"/api/selections/{selection_id}/reply/", json={"answer": "yes"}
                )
                response.raise_for_status()
                result = await asyncio.wait_for(asking, 60)
                took = (time.perf_counter() - started) * 1000
                assert result.structuredContent["answer"] == "yes", result
                started = time.perf_counter()
                (await bare_http.post("/", json={"answer": "yes"})).raise_for_status()
                bare_took = (time.perf_counter() - started) * 1000
                if number >= 5:  # the first few warm the process up
                    answer_ms.append(took)
                    bare_ms.append(bare_took)
    finally:
        server.stop()
        bare.stop()

    def spread(values):
        return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}

    return {
        "samples": samples,
        "answer_to_mcp_result_ms": spread(answer_ms),
        "bare_post_ms": spread(bare_ms),
        "ratio_p50": percentile(answer_ms, 0.5) / percentile(bare_ms, 0.5),
    }


def report(stage: dict) -> list[str]:
    answer, bare = stage["answer_to_mcp_result_ms"], stage["bare_post_ms"]
    return [
        f"Outside agent over MCP ({stage['samples']} samples): REST answer sent -> the mcp "
        f"client has the result: p50 {answer['p50']:.2f} ms, p99 {answer['p99']:.2f} ms; "
        f"bare POST p50 {bare['p50']:.2f} ms; answer / bare at p50: {stage['ratio_p50']:.1f}",
    ]

"""Agent plug-ins used by the tests (real agents behind the same interface, not mocks)."""

import asyncio
import json
import time
from functools import partial
from pathlib import Path

from conversations.agents import Agent


class BrokenAgent(Agent):
    """Says a little, then raises: the turn must end with turn.failed carrying the error."""

    async def run(self, ctx):
        await ctx.say("Starting, ")
        async with ctx.tool("explode", {"why": "testing"}):
            raise RuntimeError("the agent broke on purpose")


class DatabaseBrokenAgent(Agent):
    """Fails on the database mid-turn: its watchers get a short reason, never the SQL."""

    async def run(self, ctx):
        from django.db import connection

        def query():
            with connection.cursor() as cursor:
                cursor.execute("SELECT secret_column FROM parley_no_such_table")

        await ctx.say("Looking, ")
        await asyncio.to_thread(query)


class ScriptedAgent(Agent):
    """Follows the script its input holds, as JSON: a list of steps.

    ``{"ask": {...}}`` asks (the keyword arguments of ctx.ask) and says the outcome as its own
    message, ``{"status", "value", "by"}``; ``{"say": "…"}`` says something;
    ``{"sleep": seconds}`` waits; ``{"steering": true}`` says what steering has arrived;
    ``{"await_steering": seconds}`` waits (checking at each step, as an agent does) for steering
    and says it, or says an empty list when the time is up; ``{"tool": name}`` runs a tool
    with ``ctx.call_tool`` that notes each run in the workspace's ``tool-runs.log`` (with
    ``"hold": true`` its first run never ends: a test stops the process in the middle of it);
    ``{"history": true}`` says ``ctx.history``; ``{"now": true}`` says ``ctx.now()`` and
    ``{"random": n}`` says n numbers drawn from ``ctx.random()`` (with ``"in_step": true``,
    read inside a recorded ``ctx.step``).
    It can be resumed (its sleeps are skipped while it replays).
    """

    resumable = True

    async def run(self, ctx):
        for step in json.loads(ctx.input):
            if "ask" in step:
                answer = await ctx.ask(**step["ask"])
                outcome = {"status": answer.status, "value": answer.value, "by": answer.answered_by}
                await ctx.say(json.dumps(outcome))
            elif "say" in step:
                await ctx.say(step["say"])
            elif "sleep" in step:
                if not ctx.replaying:
                    await asyncio.sleep(step["sleep"])
            elif "steering" in step:
                await ctx.say(json.dumps({"steering": ctx.steering()}))
            elif "history" in step:
                await ctx.say(json.dumps({"history": ctx.history}))
            elif "now" in step or "random" in step:
                await ctx.say(json.dumps(await _time_and_chance(ctx, step)))
            elif "await_steering" in step:
                await ctx.say(json.dumps({"steering": await _next_steering(ctx, step)}))
            elif "tool" in step:
                runs = await ctx.call_tool(
                    step["tool"], {}, partial(_run_tool, ctx.files_root, step)
                )
                await ctx.say(json.dumps({"runs": runs}))
            await ctx.end_message()


class ChangedScriptedAgent(ScriptedAgent):
    """The scripted agent after a change to its code: it greets first. A turn journaled by the
    old code must not be resumed by it."""

    async def run(self, ctx):
        await ctx.say("Hello! ")
        await super().run(ctx)


async def _time_and_chance(ctx, step: dict) -> dict:
    def read():
        if "now" in step:
            return {"now": ctx.now().isoformat()}
        return {"random": [ctx.random().random() for _ in range(step["random"])]}

    if step.get("in_step"):
        return await ctx.step("time and chance", read, {"step": step})
    return read()


def _run_tool(files_root: Path, step: dict) -> int:
    """Note a run of the step's tool; hold the first run of a holding tool forever."""
    log = files_root / "tool-runs.log"
    with log.open("a") as runs:
        runs.write(step["tool"] + "\n")
    count = log.read_text().split().count(step["tool"])
    if step.get("hold") and count == 1:
        while True:
            time.sleep(1)
    return count


async def _next_steering(ctx, step) -> list[str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + step["await_steering"]
    while True:
        if (steering := ctx.steering()) or loop.time() >= deadline:
            return steering
        await asyncio.sleep(0.02)

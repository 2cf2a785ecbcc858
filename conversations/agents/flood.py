"""A load-generating agent for benchmarks and stress tests.

Input: ``<count> [events|text] [every <ms>]``. ``events`` (the default) reports ``count`` events
as ``count // 2`` tool calls (a started and a completed event each); ``text`` streams ``count``
numbered words ("w1 w2 …"), which coalesce into deltas. With ``every <ms>`` it pauses between
steps; without, it goes as fast as the event log lets it. Enable it with
``PARLEY_AGENTS='{"flood": "conversations.agents.flood.FloodAgent"}'``.
"""

import asyncio

from . import Agent


def parse_flood(text: str) -> tuple[int, str, float]:
    words = text.split()
    count = int(words[0]) if words and words[0].isdigit() else 1000
    mode = "text" if "text" in words else "events"
    pause = 0.0
    if "every" in words:
        index = words.index("every")
        if index + 1 < len(words):
            pause = float(words[index + 1]) / 1000
    return count, mode, pause


class FloodAgent(Agent):
    resumable = True

    async def run(self, ctx) -> None:
        count, mode, pause = parse_flood(ctx.input)
        if mode == "text":
            for number in range(1, count + 1):
                await ctx.say(f"w{number} ")
                if pause and not ctx.replaying:
                    await asyncio.sleep(pause)
            return
        for number in range(count // 2):
            async with ctx.tool("tick", {"n": number}) as call:
                call.result = number
            if pause and not ctx.replaying:
                await asyncio.sleep(pause)

"""A load-generating agent for benchmarks and stress tests: it emits events as fast as it can.

Input: ``<count> [events|text]``. ``events`` (the default) reports ``count`` events as tool
calls (a started and a completed event each); ``text`` streams ``count`` numbered words
("w1 w2 …") with no pause, which coalesce into deltas. Enable it with
``PARLEY_AGENTS='{"flood": "conversations.agents.flood.FloodAgent"}'``.
"""

from . import Agent


class FloodAgent(Agent):
    async def run(self, ctx) -> None:
        words = ctx.input.split()
        count = int(words[0]) if words and words[0].isdigit() else 1000
        mode = words[1] if len(words) > 1 else "events"
        if mode == "text":
            for number in range(1, count + 1):
                await ctx.say(f"w{number} ")
            return
        for number in range(count // 2):
            async with ctx.tool("tick", {"n": number}) as call:
                call.result = number

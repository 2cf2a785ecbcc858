"""Agent plug-ins used by the tests (real agents behind the same interface, not mocks)."""

import asyncio
import json

from conversations.agents import Agent


class BrokenAgent(Agent):
    """Says a little, then raises: the turn must end with turn.failed carrying the error."""

    async def run(self, ctx):
        await ctx.say("Starting, ")
        async with ctx.tool("explode", {"why": "testing"}):
            raise RuntimeError("the agent broke on purpose")


class ScriptedAgent(Agent):
    """Follows the script its input holds, as JSON: a list of steps.

    ``{"ask": {...}}`` asks (the keyword arguments of ctx.ask) and says the outcome as its own
    message, ``{"status", "value", "by"}``; ``{"say": "…"}`` says something;
    ``{"sleep": seconds}`` waits; ``{"steering": true}`` says what steering has arrived.
    """

    async def run(self, ctx):
        for step in json.loads(ctx.input):
            if "ask" in step:
                answer = await ctx.ask(**step["ask"])
                outcome = {"status": answer.status, "value": answer.value, "by": answer.answered_by}
                await ctx.say(json.dumps(outcome))
            elif "say" in step:
                await ctx.say(step["say"])
            elif "sleep" in step:
                await asyncio.sleep(step["sleep"])
            elif "steering" in step:
                await ctx.say(json.dumps({"steering": ctx.steering()}))
            await ctx.end_message()

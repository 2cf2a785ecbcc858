"""Agent plug-ins used by the tests (real agents behind the same interface, not mocks)."""

from conversations.agents import Agent


class BrokenAgent(Agent):
    """Says a little, then raises: the turn must end with turn.failed carrying the error."""

    async def run(self, ctx):
        await ctx.say("Starting, ")
        async with ctx.tool("explode", {"why": "testing"}):
            raise RuntimeError("the agent broke on purpose")

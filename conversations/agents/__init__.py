"""The agent interface, and loading agent backends by name from settings.PARLEY_AGENTS.

An agent never touches the ORM or the channel layer. It gets a TurnContext (see
conversations.runtime.context) and does everything through it:

    class EchoAgent(Agent):
        async def run(self, ctx):
            await ctx.say(f"You said: {ctx.input}")

Everything an agent does becomes an event in the conversation's log (text, tool calls,
questions and their answers), so a turn's progress can be rebuilt from what is stored.
"""

from django.conf import settings
from django.utils.module_loading import import_string

from ..shared import ApplicationError


class Agent:
    """An agent backend. Subclasses implement :meth:`run`; one instance serves one turn."""

    async def run(self, ctx) -> None:
        """Do the turn's work through ``ctx``. Raising fails the turn with the error."""
        raise NotImplementedError


def load_agent(name: str) -> Agent:
    """A new instance of the agent configured under ``name``.

    Raises ApplicationError ``unknown_agent`` if no such agent is configured.
    """
    try:
        path = settings.PARLEY_AGENTS[name]
    except KeyError:
        raise ApplicationError("unknown_agent", f"No agent named '{name}' is configured.") from None
    return import_string(path)()

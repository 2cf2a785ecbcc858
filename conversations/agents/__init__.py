"""The agent interface, and loading agent backends by name from settings.PARLEY_AGENTS.

An agent never touches the ORM or the channel layer. It gets a TurnContext (see
conversations.runtime.context) and does everything through it:

    class EchoAgent(Agent):
        async def run(self, ctx):
            await ctx.say(f"You said: {ctx.input}")

Everything an agent does becomes an event in the conversation's log (text, tool calls,
questions and their answers), and its steps are journaled, so a turn's progress can be rebuilt
from what is stored: an agent that sets ``resumable = True`` is resumed from its journal when
its process stops (see conversations.runtime.journal for what it must not do).
"""

from django.conf import settings
from django.utils.module_loading import import_string

from core.errors import ApplicationError, SaidToPeople


class AgentError(SaidToPeople):
    """Raised by an agent to fail its turn with a message meant for people, shown as it is."""


class Agent:
    """An agent backend. Subclasses implement :meth:`run`; one instance serves one turn.

    ``resumable``: whether a turn of this agent can be rebuilt by running :meth:`run` again
    against its journal. One that cannot is failed when its process stops, and stays in memory
    while it waits for an answer.

    ``releasable``: whether a turn waiting long for an answer lets go of its process's memory
    (to be resumed by whoever settles the question). By default, if it is resumable; an agent
    whose work is held in memory elsewhere anyway (an outside agent's session) sets it False.
    """

    resumable = False
    releasable: bool | None = None

    @classmethod
    def models(cls) -> list[str]:
        """The models a conversation may pick for this agent (none: it has one)."""
        return []

    async def run(self, ctx) -> None:
        """Do the turn's work through ``ctx``. Raising fails the turn with the error."""
        raise NotImplementedError


def _agent_path(name: str) -> str | None:
    return settings.PARLEY_AGENTS.get(name) or settings.PARLEY_TURN_AGENTS.get(name)


def agent_is_resumable(name: str) -> bool:
    """Whether turns of the agent configured under ``name`` can be resumed (False if none is)."""
    path = _agent_path(name)
    return path is not None and bool(getattr(import_string(path), "resumable", False))


def agent_models(name: str) -> list[str]:
    """The models the agent configured under ``name`` offers (empty if it offers no choice)."""
    path = settings.PARLEY_AGENTS.get(name)
    return list(import_string(path).models()) if path is not None else []


def load_agent(name: str) -> Agent:
    """A new instance of the agent configured under ``name`` (in PARLEY_AGENTS, or in
    PARLEY_TURN_AGENTS for one that runs single turns started from elsewhere).

    Raises ApplicationError ``unknown_agent`` if no such agent is configured.
    """
    if (path := _agent_path(name)) is None:
        raise ApplicationError("unknown_agent", f"No agent named '{name}' is configured.")
    return import_string(path)()

"""The agent interface, and the agent backends named in settings.PARLEY_AGENTS, resolved once.

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
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
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


class AgentRegistry:
    """The agent backends the settings name (PARLEY_AGENTS, and PARLEY_TURN_AGENTS for those that
    run single turns started from elsewhere), each resolved from its dotted path once: at
    start-up (ConversationsConfig.ready), and again if those settings change (tests)."""

    SETTINGS = ("PARLEY_AGENTS", "PARLEY_TURN_AGENTS")

    def __init__(self):
        self._classes: dict[str, type[Agent]] | None = None

    def load(self) -> None:
        """Resolve every configured agent. Raises ImproperlyConfigured, naming the setting and
        the agent, for a path that cannot be imported or that names no Agent."""
        classes: dict[str, type[Agent]] = {}
        for setting in self.SETTINGS:
            for name, path in getattr(settings, setting).items():
                where = f"{setting}[{name!r}]"
                try:
                    found = import_string(path)
                except ImportError as exc:
                    raise ImproperlyConfigured(f"{where}: cannot import {path!r}: {exc}") from exc
                if not (isinstance(found, type) and issubclass(found, Agent)):
                    raise ImproperlyConfigured(f"{where}: {path!r} is not an Agent class.")
                classes.setdefault(name, found)
        self._classes = classes

    def reset(self, *, setting: str, **kwargs) -> None:
        if setting in self.SETTINGS:
            self._classes = None

    def get(self, name: str) -> type[Agent] | None:
        """The agent class configured under ``name``, or None."""
        if self._classes is None:
            self.load()
        return self._classes.get(name)


agents = AgentRegistry()
setting_changed.connect(agents.reset)


def agent_is_resumable(name: str) -> bool:
    """Whether turns of the agent configured under ``name`` can be resumed (False if none is)."""
    found = agents.get(name)
    return found is not None and bool(found.resumable)


def agent_models(name: str) -> list[str]:
    """The models the agent configured under ``name`` offers (empty if it offers no choice)."""
    if name not in settings.PARLEY_AGENTS:
        return []
    return list(agents.get(name).models())


def load_agent(name: str) -> Agent:
    """A new instance of the agent configured under ``name`` (in PARLEY_AGENTS, or in
    PARLEY_TURN_AGENTS for one that runs single turns started from elsewhere).

    Raises ApplicationError ``unknown_agent`` if no such agent is configured.
    """
    if (found := agents.get(name)) is None:
        raise ApplicationError("unknown_agent", f"No agent named '{name}' is configured.")
    return found()

"""The turn context: what an agent sees of its turn, and the only way it acts (streaming text,
reporting tool calls, asking people, reading steering)."""

import asyncio
import inspect
import logging
import random
import secrets
from collections import deque
from contextlib import contextmanager
from datetime import datetime

from django.utils import timezone

from core.dbthreads import run_db
from core.errors import SaidToPeople

from .. import selectors
from ..events import EventType
from ..models import Turn
from . import failures
from .asking import Asking
from .journal import Journal, JournalMismatch, Replay, Step, digest
from .writer import EventWriter

logger = logging.getLogger(__name__)


class ToolError(SaidToPeople):
    """A tool run with ``ctx.call_tool`` raised: its message is what was recorded (and what a
    resumed turn raises again in its place)."""


class ToolCall:
    """Reports one tool call as ``tool.started`` then ``tool.completed`` (with result or error).

    Use it as ``async with ctx.tool("find", {"text": "x"}) as call: call.result = ...``.
    An exception inside the block is recorded as the call's error and raised again. Its body
    runs again when a resumed turn replays it (only the events are not repeated); for work that
    must not be done twice, use :meth:`TurnContext.call_tool`.
    """

    def __init__(self, ctx: "TurnContext", name: str, arguments: dict):
        self._ctx = ctx
        self.name = name
        self.arguments = arguments
        self.id = ""
        self.result = None
        self._said = 0
        self._recorded: Step | None = None

    async def __aenter__(self) -> "ToolCall":
        ctx = self._ctx
        await ctx.end_message()
        self._said = ctx._said
        self._recorded = ctx._replay_step("tool", self.name, self.arguments)
        self.id = ctx._next_call_id()
        if self._recorded is not None:
            self.result = self._recorded.outcome.get("result")
        else:
            ctx._tool_started(self.id, self.name, self.arguments)
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        if self._recorded is not None:
            return False
        if exc_type is None:
            outcome = {"result": self.result}
        elif issubclass(exc_type, asyncio.CancelledError):
            self._ctx._tool_interrupted(self.id, self.name)
            return False
        else:
            outcome = {"error": failures.told(exc, f"Tool {self.name}")}
        await self._ctx._tool_completed(self.id, self.name, self.arguments, self._said, outcome)
        return False


class TurnContext(Asking):
    """What an agent sees of its turn, and the only way it acts.

    Attributes: ``input`` (the person's request), ``history`` (earlier turns: input, by, reply,
    status), ``interactive`` (whether someone can answer questions), ``confirm_writes``
    (whether to ask before writing or renaming files), ``model`` (the model the conversation
    picked, '' for the agent's default), ``files_root`` (the workspace's folder on disk),
    ``started_by`` (who asked), ``replaying`` (true while a resumed turn re-runs what it had
    done: see conversations.runtime.journal), ``usage`` (tokens used, see :meth:`add_usage`).

    Make context calls one at a time (not from tasks running side by side), and decide only on
    what the context returns, never on the clock or on chance (ask :meth:`now` and
    :meth:`random`): that is what lets a resumed turn be rebuilt from its journal.
    """

    # Slots rather than a __dict__: a parked turn keeps its context, and a thousand parked turns
    # keep a thousand.
    __slots__ = (
        *("turn_id", "conversation_id", "input", "history", "interactive", "confirm_writes"),
        *("model", "usage", "files_root", "started_by", "interruption"),
        *("_created_at", "_writer", "_resumable", "_releasable", "_message", "_said"),
        *("_next_step", "_messages_ended", "_messages_stored", "_steering", "_steering_seen"),
        *("_calls", "_questions", "_workspace_id", "_background", "_live_only", "_random"),
        *("_journal", "_replay", "_diverged"),
    )

    def __init__(
        self,
        *,
        turn: Turn,
        history: list[dict],
        writer: EventWriter,
        journal: Journal | None = None,
        resumable: bool = False,
        releasable: bool | None = None,
    ):
        self.turn_id = turn.pk
        self.conversation_id = turn.conversation_id
        self.input = turn.input
        self.history = history
        self.interactive = turn.interactive
        self.confirm_writes = turn.confirm_writes
        self.model = turn.conversation.model
        self.usage: dict[str, int] = {}
        self._created_at = turn.created_at
        self.files_root = turn.conversation.workspace.files_root
        self.started_by = turn.started_by.get_username() if turn.started_by else None
        self._writer = writer
        self._resumable = resumable
        # Whether a long wait for an answer lets go of the turn (see Agent.releasable).
        self._releasable = resumable if releasable is None else releasable
        self._message: list[str] = []
        # Characters said so far, and the index of the next step (see TurnStep).
        self._said = 0
        self._next_step = 0
        # Messages ended so far, and how many of them were stored before a resume.
        self._messages_ended = 0
        self._messages_stored = journal.messages if journal is not None else 0
        self._steering: deque[tuple[int, str]] = deque()
        self._steering_seen: set[int] = set()
        self._calls = 0
        self._questions = 0
        self._workspace_id = turn.conversation.workspace_id
        self._background: set[asyncio.Task] = set()
        # Inside a step's or a tool's function (run live only: its outcome is what is recorded).
        self._live_only = 0
        self._random: random.Random | None = None
        # Why a tool call cut short was cut short (set when the process hands the turn back).
        self.interruption = "Stopped before it finished."
        self._journal = journal
        self._replay: Replay | None = None
        self._diverged: str | None = None
        if journal is not None:
            self._steering_seen |= journal.steering_taken
            for seq, text in journal.steering_waiting:
                self._receive_steering(seq, text)
            self._replay = Replay(journal)
            self._caught_up()

    # Replay ----------------------------------------------------------------------------------

    @property
    def replaying(self) -> bool:
        """True while the turn re-runs what it had done before it was resumed: an agent may
        skip what only paces it for people (sleeps), nothing else."""
        return self._replay is not None

    @property
    def diverged(self) -> str | None:
        """Why the replay no longer matched the journal, if it did not."""
        return self._diverged

    def _check(self) -> None:
        if self._diverged is not None:
            raise JournalMismatch(self._diverged)

    def _caught_up(self) -> None:
        """Go live once everything the journal records has been replayed."""
        if self._replay is not None and self._replay.finished(self._said, self._messages_ended):
            self._go_live()

    def _go_live(self) -> None:
        journal = self._journal
        self._replay = None
        self._next_step = len(journal.steps)
        # Call ids go on after every call started before, finished or not.
        self._calls = max(self._calls, journal.calls)
        logger.info("Turn %s caught up with its journal; running live", self.turn_id)

    def _matching(self, match, *args):
        try:
            return match(*args)
        except JournalMismatch as exc:
            self._diverged = str(exc)
            raise

    def _replay_step(self, kind: str, name: str, arguments) -> Step | None:
        """The recorded outcome of the step the agent takes now, or None to run it live."""
        self._check()
        if self._replay is None:
            return None
        step = self._matching(self._replay.step, kind, name, digest(arguments), self._said)
        if step is None:
            self._go_live()
        else:
            self._caught_up()
        return step

    def _new_step(self, kind: str, name: str, arguments, said: int, outcome: dict) -> dict:
        step = {
            "index": self._next_step,
            "kind": kind,
            "name": name,
            "digest": digest(arguments),
            "said": said,
            "outcome": outcome,
        }
        self._next_step += 1
        return step

    # Talking ---------------------------------------------------------------------------------

    def _next_call_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls}"

    async def say(self, text: str) -> None:
        """Stream text to everyone watching (as coalesced ``message.delta`` events)."""
        self._check()
        if not text:
            return
        self._message.append(text)
        new = text
        if self._replay is not None:
            new = self._matching(self._replay.say, text, self._said)
        self._said += len(text)
        self._caught_up()
        if new:
            self._writer.emit_delta(new)
            await self._writer.throttle()

    async def end_message(self) -> None:
        """Close the message being streamed with a ``message.completed`` carrying all its text.

        Called for the agent before a tool call, a question and the end of the turn.
        """
        self._check()
        if not self._message:
            return
        text = "".join(self._message)
        self._message = []
        self._messages_ended += 1
        if self._messages_ended <= self._messages_stored:
            self._caught_up()
            return
        self._writer.emit(EventType.MESSAGE_COMPLETED, {"text": text})
        await self._writer.throttle()

    # Tools -----------------------------------------------------------------------------------

    def tool(self, name: str, arguments: dict | None = None) -> ToolCall:
        """Report a tool call: ``async with ctx.tool(name, args) as call: call.result = ...``.
        Its body runs again when a resumed turn replays it; see :meth:`call_tool`."""
        return ToolCall(self, name, arguments or {})

    async def call_tool(self, name: str, arguments: dict | None, fn):
        """Run a tool and report it (``tool.started``, ``tool.completed``); returns its result,
        which must be JSON. ``fn`` takes no arguments: a coroutine function is awaited, a plain
        function runs in a thread. If it raises, the error is recorded and ToolError raised.

        The outcome is recorded with the turn, so a resumed turn gets it back without running
        the tool again. A tool cut short (Stop, or the process stopping) is not recorded, and
        runs again when the turn resumes: tools are at-least-once until they complete.
        """
        arguments = arguments or {}
        await self.end_message()
        said = self._said
        recorded = self._replay_step("tool", name, arguments)
        call_id = self._next_call_id()
        if recorded is not None:
            if "error" in recorded.outcome:
                raise ToolError(recorded.outcome["error"])
            return recorded.outcome["result"]
        self._tool_started(call_id, name, arguments)
        try:
            with self._running_live():
                if inspect.iscoroutinefunction(fn):
                    result = await fn()
                else:
                    result = await asyncio.to_thread(fn)
        except asyncio.CancelledError:
            self._tool_interrupted(call_id, name)
            raise
        except Exception as exc:
            error = failures.told(exc, f"Tool {name}")
            await self._tool_completed(call_id, name, arguments, said, {"error": error})
            raise ToolError(error) from exc
        await self._tool_completed(call_id, name, arguments, said, {"result": result})
        return result

    def _tool_started(self, call_id: str, name: str, arguments: dict) -> None:
        self._writer.emit(
            EventType.TOOL_STARTED, {"id": call_id, "name": name, "arguments": arguments}
        )

    def _tool_interrupted(self, call_id: str, name: str) -> None:
        self._writer.emit(
            EventType.TOOL_COMPLETED, {"id": call_id, "name": name, "error": self.interruption}
        )

    async def _tool_completed(
        self, call_id: str, name: str, arguments: dict, said: int, outcome: dict
    ) -> None:
        self._writer.emit(EventType.TOOL_COMPLETED, {"id": call_id, "name": name, **outcome})
        self._writer.emit_step(self._new_step("tool", name, arguments, said, outcome))
        await self._writer.throttle()

    async def step(self, name: str, fn, arguments: dict | None = None):
        """Do something whose outcome a resumed turn must get back rather than do again (a
        model's reply, say), and return it; it must be JSON. ``fn`` as for :meth:`call_tool`.
        Nothing is shown to people. Like a tool, it runs again if cut short."""
        arguments = arguments or {}
        said = self._said
        recorded = self._replay_step("step", name, arguments)
        if recorded is not None:
            return recorded.outcome["value"]
        with self._running_live():
            value = await fn() if inspect.iscoroutinefunction(fn) else await asyncio.to_thread(fn)
        self._writer.emit_step(self._new_step("step", name, arguments, said, {"value": value}))
        await self._writer.throttle()
        return value

    async def streamed_step(self, name: str, fn, arguments: dict | None = None):
        """A :meth:`step` that streams text to people as it goes (a model's reply): ``fn`` is a
        coroutine function given one argument, ``say`` (as :meth:`say`), and returns the
        outcome (JSON). The outcome and how much was said are recorded: a resumed turn says
        that text again (matching what is stored, so nothing is shown twice) and gets the
        outcome back without calling ``fn``. Cut short by the process stopping, the text it
        had streamed stays as it was (ended as a message), and ``fn`` runs again, live."""
        arguments = arguments or {}
        self._check()
        if self._replay is not None and (cut := self._replay.cut_short(self._said)):
            await self.say(cut)
            await self.end_message()
        said = self._said
        recorded = self._replay_step("step", name, arguments)
        if recorded is not None:
            chars = recorded.outcome["chars"]
            await self.say(self._journal.text[said : said + chars])
            return recorded.outcome["value"]
        with self._running_live():
            value = await fn(self.say)
        outcome = {"value": value, "chars": self._said - said}
        self._writer.emit_step(self._new_step("step", name, arguments, said, outcome))
        await self._writer.throttle()
        return value

    # Time and chance -------------------------------------------------------------------------

    @contextmanager
    def _running_live(self):
        self._live_only += 1
        try:
            yield
        finally:
            self._live_only -= 1

    def now(self) -> datetime:
        """The current time (aware, in UTC), the same on replay: recorded in the journal when it
        is first read, and handed back when a resumed turn reads it again (as Temporal's
        ``workflow.now()``). Inside the function of a step or a tool, which runs live only (its
        outcome is what is recorded), it is the clock's, unrecorded."""
        if self._live_only:
            return timezone.now()
        self._check()
        recorded = self._replay_step("clock", "now", {})
        if recorded is not None:
            return datetime.fromisoformat(recorded.outcome["value"])
        value = timezone.now()
        outcome = {"value": value.isoformat()}
        self._writer.emit_step(self._new_step("clock", "now", {}, self._said, outcome))
        return value

    def random(self) -> random.Random:
        """The turn's random number generator, the same on replay: its seed is recorded in the
        journal when it is first asked for, so a resumed turn that draws in the same order draws
        the same numbers (as Temporal's ``workflow.random()``). Inside the function of a step
        or a tool, a generator of its own, unrecorded."""
        if self._live_only:
            return random.Random(secrets.randbits(63))
        if self._random is None:
            self._check()
            recorded = self._replay_step("seed", "random", {})
            if recorded is not None:
                seed = recorded.outcome["value"]
            else:
                seed = secrets.randbits(63)
                outcome = {"value": seed}
                self._writer.emit_step(self._new_step("seed", "random", {}, self._said, outcome))
            self._random = random.Random(seed)
        return self._random

    # Notices and usage -----------------------------------------------------------------------

    def notice(self, kind: str, text: str) -> None:
        """Tell everyone watching something about the turn's progress that is not the agent's
        reply (a ``turn.notice`` event), e.g. that the model server is busy and is tried
        again. A resumed turn does not repeat the notices of what it replays."""
        self._check()
        if self._replay is None:
            self._writer.emit(EventType.TURN_NOTICE, {"kind": kind, "text": text})

    def add_usage(self, usage: dict | None) -> None:
        """Count tokens a model used (``prompt_tokens``, ``completion_tokens``,
        ``total_tokens``); the sum goes into the turn's terminal event."""
        for key, value in (usage or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = self.usage.get(key, 0) + value

    async def transcript(self) -> list[dict]:
        """The conversation's earlier turns as stored: for each, ``input``, ``by``, ``status``
        and ``events`` (``{"type", "data"}``: whole messages, tool calls, questions and their
        answers, steering; no text deltas), oldest first. The same on a resumed turn."""
        return await run_db(
            selectors.turn_transcripts,
            conversation_id=self.conversation_id,
            before=self._created_at,
            exclude_turn_id=self.turn_id,
        )

    # Steering --------------------------------------------------------------------------------

    def steering(self) -> list[str]:
        """Inputs people added to this turn since the last call (empty if none)."""
        self._check()
        if self._replay is not None:
            recorded = self._replay.steering(self._said, self._messages_ended)
            if recorded is not None:
                self._caught_up()
                return recorded
            self._go_live()
        taken = list(self._steering)
        self._steering.clear()
        if not taken:
            return []
        inputs = [text for _, text in taken]
        outcome = {"inputs": inputs, "seqs": [seq for seq, _ in taken]}
        self._writer.emit_step(self._new_step("steering", "", "", self._said, outcome))
        return inputs

    def _receive_steering(self, seq: int, text: str) -> bool:
        """Take steering in, each input once, whether its wake-up or a catch-up read brought it
        (or both). True if it was new."""
        if seq in self._steering_seen:
            return False
        self._steering_seen.add(seq)
        self._steering.append((seq, text))
        return True

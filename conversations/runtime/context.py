"""The turn context: what an agent sees of its turn, and the only way it acts (streaming text,
reporting tool calls, asking people, reading steering)."""

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from .. import seams, selectors
from ..dbthreads import run_db
from ..events import EventType
from ..models import Turn
from .writer import EventWriter

logger = logging.getLogger(__name__)


class ToolCall:
    """Reports one tool call as ``tool.started`` then ``tool.completed`` (with result or error).

    Use it as ``async with ctx.tool("find", {"text": "x"}) as call: call.result = ...``.
    An exception inside the block is recorded as the call's error and raised again.
    """

    def __init__(self, ctx: "TurnContext", name: str, arguments: dict):
        self._ctx = ctx
        self.name = name
        self.arguments = arguments
        self.id = ""
        self.result = None

    async def __aenter__(self) -> "ToolCall":
        if self._ctx._message:
            await self._ctx.end_message()
        self.id = self._ctx._next_call_id()
        self._ctx._writer.emit(
            EventType.TOOL_STARTED,
            {"id": self.id, "name": self.name, "arguments": self.arguments},
        )
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        data = {"id": self.id, "name": self.name}
        if exc_type is None:
            data["result"] = self.result
        elif issubclass(exc_type, asyncio.CancelledError):
            data["error"] = "Stopped before it finished."
        else:
            data["error"] = str(exc) or exc_type.__name__
        self._ctx._writer.emit(EventType.TOOL_COMPLETED, data)
        await self._ctx._writer.throttle()
        return False


@dataclass(frozen=True)
class Answer:
    """What became of a question.

    ``status`` is ``answered`` (``value`` holds the answer: a path relative to the question's
    root, an option's value or a list of them, text, true/false, or the form's fields),
    ``dismissed`` (the person closed it), ``declined`` (an explicit no), ``expired``,
    ``cancelled``, ``unavailable`` (a non-interactive turn: nobody can answer) or
    ``limit_reached`` (the turn asked as many questions as it may).
    """

    status: str
    value: Any = None
    answered_by: str | None = None
    selection_id: str | None = None

    @property
    def answered(self) -> bool:
        return self.status == "answered"


class TurnContext:
    """What an agent sees of its turn, and the only way it acts.

    Attributes: ``input`` (the person's request), ``history`` (earlier turns: input, by, reply,
    status), ``interactive`` (whether someone can answer questions), ``files_root`` (the
    workspace's folder on disk), ``started_by`` (who asked).
    """

    def __init__(self, *, turn: Turn, history: list[dict], writer: EventWriter):
        self.turn_id = turn.pk
        self.conversation_id = turn.conversation_id
        self.input = turn.input
        self.history = history
        self.interactive = turn.interactive
        self.files_root = turn.conversation.workspace.files_root
        self.started_by = turn.started_by.get_username() if turn.started_by else None
        self._writer = writer
        self._message: list[str] = []
        self._steering: deque[str] = deque()
        self._steering_seen: set[int] = set()
        self._calls = 0
        self._questions = 0
        self._workspace_id = turn.conversation.workspace_id
        self._background: set[asyncio.Task] = set()

    def _next_call_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls}"

    async def say(self, text: str) -> None:
        """Stream text to everyone watching (as coalesced ``message.delta`` events)."""
        if not text:
            return
        self._message.append(text)
        self._writer.emit_delta(text)
        await self._writer.throttle()

    async def end_message(self) -> None:
        """Close the message being streamed with a ``message.completed`` carrying all its text.

        Called for the agent before a tool call, a question and the end of the turn.
        """
        if not self._message:
            return
        text = "".join(self._message)
        self._message = []
        self._writer.emit(EventType.MESSAGE_COMPLETED, {"text": text})
        await self._writer.throttle()

    def tool(self, name: str, arguments: dict | None = None) -> ToolCall:
        """Report a tool call: ``async with ctx.tool(name, args) as call: call.result = ...``."""
        return ToolCall(self, name, arguments or {})

    def steering(self) -> list[str]:
        """Inputs people added to this turn since the last call (empty if none)."""
        inputs = list(self._steering)
        self._steering.clear()
        return inputs

    def _receive_steering(self, seq: int, text: str) -> bool:
        """Take steering in, each input once, whether its wake-up or a catch-up read brought it
        (or both). True if it was new."""
        if seq in self._steering_seen:
            return False
        self._steering_seen.add(seq)
        self._steering.append(text)
        return True

    async def ask(
        self,
        kind: str,
        prompt: str,
        *,
        options: list | None = None,
        multiple: bool = False,
        allow_freeform: bool = False,
        min_choices: int | None = None,
        max_choices: int | None = None,
        mode: str | None = None,
        root: str = "",
        schema: dict | None = None,
        addressee: str | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """Ask a person something and wait for the answer, holding no thread.

        ``kind`` is ``path`` (``mode`` file, folder or any, inside ``root``), ``choice``
        (``options`` of label, value and description; ``multiple``; ``allow_freeform``),
        ``text``, ``confirm`` or ``form`` (a flat JSON ``schema``). ``addressee`` (a username)
        lets only that person, or an owner, answer. ``timeout`` overrides the default expiry.
        Returns an Answer; only Stop interrupts the wait (by cancelling the agent).
        Raises ValueError for a malformed question.
        """
        if not self.interactive:
            return Answer(status="unavailable")
        if self._questions >= settings.PARLEY_MAX_QUESTIONS_PER_TURN:
            return Answer(status="limit_reached")
        questions = seams.questions.get()
        question = await questions.prepare(
            workspace_id=self._workspace_id,
            files_root=self.files_root,
            addressee=addressee,
            kind=kind,
            prompt=prompt,
            options=options,
            multiple=multiple,
            allow_freeform=allow_freeform,
            min_choices=min_choices,
            max_choices=max_choices,
            mode=mode,
            root=root,
            schema=schema,
        )
        # Everything said so far is stored before the question, so it reads in order.
        await self.end_message()
        await self._writer.drain()
        self._questions += 1
        outcome = await questions.ask(
            question,
            turn_id=self.turn_id,
            ordinal=self._questions,
            timeout=timeout or settings.PARLEY_SELECTION_TIMEOUT_SECONDS,
        )
        self._catch_up_on_steering()
        return Answer(
            status=outcome["status"],
            value=outcome["answer"],
            answered_by=outcome["answered_by"],
            selection_id=outcome["selection"],
        )

    def _catch_up_on_steering(self) -> None:
        """Read steering sent while the turn waited, in case a wake-up was lost on the way;
        beside the agent, which goes on at once (what is read reaches it at a later step)."""

        async def read():
            try:
                rows = await run_db(selectors.steering_after, turn_id=self.turn_id, after_seq=0)
            except Exception:
                # The runner's periodic catch-up reads it later.
                logger.warning("Could not read the steering of turn %s", self.turn_id)
                return
            for seq, text in rows:
                self._receive_steering(seq, text)

        task = asyncio.get_running_loop().create_task(read())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def select_path(self, prompt: str, *, mode: str = "file", root: str = "", **kw) -> Answer:
        """Ask for a file (or a ``folder``, or ``any``) inside ``root``."""
        return await self.ask("path", prompt, mode=mode, root=root, **kw)

    async def choose(self, prompt: str, options: list, **kw) -> Answer:
        """Ask to choose among ``options`` (``multiple=True`` for several)."""
        return await self.ask("choice", prompt, options=options, **kw)

    async def text(self, prompt: str, **kw) -> Answer:
        """Ask for a typed answer."""
        return await self.ask("text", prompt, **kw)

    async def confirm(self, prompt: str, **kw) -> Answer:
        """Ask yes or no; the answer's value is True or False."""
        return await self.ask("confirm", prompt, **kw)

    async def form(self, prompt: str, schema: dict, **kw) -> Answer:
        """Ask for a small form described by a flat JSON schema."""
        return await self.ask("form", prompt, schema=schema, **kw)

"""Turns run as tasks in the server process, independent of any client.

A TurnRunner starts each turn as an asyncio task that drives its agent through a TurnContext.
The turn has a control inbox on the channel layer (Stop, steering and wake-ups reach it from any
process), its events are written by an EventWriter in batches, and it always ends with exactly
one terminal event, also when the agent raises or is stopped.
"""

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from . import selectors, services
from .agents import load_agent
from .dbthreads import run_db
from .exceptions import ApplicationError
from .ids import new_selection_id
from .models import Turn, TurnEvent
from .process import process_id, runtime

logger = logging.getLogger(__name__)

DELTA = TurnEvent.Type.MESSAGE_DELTA
# A coalesced text delta is cut at this many characters, to keep frames small.
MAX_DELTA_CHARS = 4000
# While a batch is being written, a busy agent still yields to the loop this often.
YIELD_EVERY = 64


class EventWriter:
    """Writes one turn's events in batches, in order.

    What the agent emits while a batch commits goes into the next batch (group commit), so a
    fast agent costs one transaction per batch rather than per event. Consecutive text deltas
    merge into one event, and a delta-only batch lingers a few milliseconds to gather more, so a
    character-by-character agent does not write a row per character. Text is never dropped: a
    merged delta carries every character. An agent that runs far ahead of the database waits in
    :meth:`throttle` (backpressure) instead of growing memory without bound.
    """

    def __init__(self, *, conversation_id: str, turn_id: str):
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        self._pending: list[list] = []
        self._pending_since = 0.0
        self._only_deltas = True
        self._urgent = False
        self._accepted = 0
        self._written = 0
        self._flushing = False
        self._since_yield = 0
        # Read once: settings are a lazy object, too slow to consult for every event.
        self._backlog = settings.PARLEY_EVENT_BACKLOG
        self._linger = settings.PARLEY_DELTA_COALESCE_MS / 1000
        self._error: BaseException | None = None
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"writer-{turn_id}")

    def _add(self, type_: str, data: dict) -> None:
        if self._error is not None:
            raise self._error
        if not self._pending:
            self._pending_since = time.monotonic()
            self._only_deltas = True
        self._pending.append([type_, data])
        self._accepted += 1
        self._wakeup.set()

    def emit(self, type_: str, data: dict) -> None:
        """Queue an event; it is written promptly, in order after everything queued before it."""
        self._add(type_, data)
        self._only_deltas = False

    def emit_delta(self, text: str) -> None:
        """Queue streamed text, merged into the previous delta while that one waits."""
        if self._pending:
            last = self._pending[-1]
            if last[0] == DELTA and len(last[1]["text"]) < MAX_DELTA_CHARS:
                last[1]["text"] += text
                return
        self._add(DELTA, {"text": text})

    async def drain(self) -> None:
        """Wait until everything queued so far is committed and published."""
        target = self._accepted
        self._urgent = True
        self._wakeup.set()
        while self._written < target:
            if self._error is not None:
                raise self._error
            self._progress.clear()
            await self._progress.wait()

    async def throttle(self) -> None:
        """Called by the context after each event: keeps the agent and the database working
        side by side. An agent that never awaits anything else would otherwise starve the
        writer until the backlog filled, so production and writing took turns."""
        self._since_yield += 1
        if len(self._pending) >= self._backlog:
            # Wait for the batch being written, not for everything: the writer takes the
            # backlog the moment that batch commits, and the agent goes on meanwhile.
            self._since_yield = 0
            while len(self._pending) >= self._backlog:
                if self._error is not None:
                    raise self._error
                self._progress.clear()
                await self._progress.wait()
        elif not self._flushing or self._since_yield >= YIELD_EVERY:
            # Let the writer start a batch now, and the sockets send what was committed.
            self._since_yield = 0
            await asyncio.sleep(0)

    async def close(self) -> None:
        """Write everything still queued, then stop."""
        await self.drain()
        self._task.cancel()

    def abandon(self) -> None:
        """Stop at once (after close, or when the turn broke down)."""
        self._task.cancel()

    async def _run(self) -> None:
        linger = self._linger
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self._pending:
                continue
            if self._only_deltas and not self._urgent and linger > 0:
                wait = self._pending_since + linger - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            batch, self._pending = self._pending, []
            self._urgent = False
            self._flushing = True
            try:
                await run_db(
                    services.turn_events_append,
                    conversation_id=self.conversation_id,
                    turn_id=self.turn_id,
                    events=[tuple(item) for item in batch],
                )
            except Exception as exc:
                logger.exception("Could not write events of turn %s", self.turn_id)
                self._error = exc
                self._progress.set()
                return
            finally:
                self._flushing = False
            self._written += len(batch)
            self._progress.set()


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
            TurnEvent.Type.TOOL_STARTED,
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
        self._ctx._writer.emit(TurnEvent.Type.TOOL_COMPLETED, data)
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
        self._writer.emit(TurnEvent.Type.MESSAGE_COMPLETED, {"text": text})
        await self._writer.throttle()

    def tool(self, name: str, arguments: dict | None = None) -> ToolCall:
        """Report a tool call: ``async with ctx.tool(name, args) as call: call.result = ...``."""
        return ToolCall(self, name, arguments or {})

    def steering(self) -> list[str]:
        """Inputs people added to this turn since the last call (empty if none)."""
        inputs = list(self._steering)
        self._steering.clear()
        return inputs

    def _receive_steering(self, seq: int, text: str) -> None:
        # Each input once, whether its wake-up or a catch-up read brought it (or both).
        if seq not in self._steering_seen:
            self._steering_seen.add(seq)
            self._steering.append(text)

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
        from selection.parking import parking
        from selection.services import selection_request
        from selection.validation import clean_question

        if not self.interactive:
            return Answer(status="unavailable")
        if self._questions >= settings.PARLEY_MAX_QUESTIONS_PER_TURN:
            return Answer(status="limit_reached")
        fields = clean_question(
            kind=kind,
            prompt=prompt,
            files_root=self.files_root,
            options=options,
            multiple=multiple,
            allow_freeform=allow_freeform,
            min_choices=min_choices,
            max_choices=max_choices,
            mode=mode,
            root=root,
            schema=schema,
        )
        person = None
        if addressee is not None:
            person = await run_db(
                selectors.acting_member, workspace_id=self._workspace_id, username=addressee
            )
            if person is None:
                raise ValueError(f"{addressee!r} cannot answer questions in this workspace.")
        # Everything said so far is stored before the question, so it reads in order.
        await self.end_message()
        await self._writer.drain()
        self._questions += 1
        selection_id = new_selection_id()
        with parking.expecting(selection_id):
            selection = await run_db(
                selection_request,
                selection_id=selection_id,
                turn_id=self.turn_id,
                ordinal=self._questions,
                fields=fields,
                addressee=person,
                timeout_seconds=timeout or settings.PARLEY_SELECTION_TIMEOUT_SECONDS,
            )
            outcome = await parking.wait(selection)
        self._catch_up_on_steering()
        return Answer(
            status=outcome["status"],
            value=outcome["answer"],
            answered_by=outcome["answered_by"],
            selection_id=selection.pk,
        )

    def _catch_up_on_steering(self) -> None:
        """Read steering sent while the turn waited, in case a wake-up was lost on the way;
        beside the agent, which goes on at once (what is read reaches it at a later step)."""

        async def read():
            try:
                rows = await run_db(selectors.steering_after, turn_id=self.turn_id, after_seq=0)
            except Exception:
                logger.exception("Could not read the steering of turn %s", self.turn_id)
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


class RunningTurn:
    """A turn this process is running: its task, its agent's task and its context."""

    def __init__(self, turn_id: str):
        self.turn_id = turn_id
        self.task: asyncio.Task | None = None
        self.agent_task: asyncio.Task | None = None
        self.context: TurnContext | None = None
        self.stop_requested = False

    def stop(self) -> None:
        self.stop_requested = True
        if self.agent_task is not None:
            self.agent_task.cancel()

    def control(self, message: dict) -> None:
        """Act on a control message: a wake-up whose news is already in the database."""
        kind = message.get("type")
        if kind == "turn.cancel":
            self.stop()
        elif kind == "turn.steer" and self.context is not None:
            self.context._receive_steering(message["seq"], message["input"])
        elif kind == "selection.wake":
            from selection.parking import parking

            parking.wake(message["id"], message.get("outcome"))


class TurnRunner:
    """Starts turns in this process and keeps track of them until they end."""

    def __init__(self):
        self._running: dict[str, RunningTurn] = {}
        self._by_inbox: dict[str, RunningTurn] = {}

    def by_inbox(self, inbox: str) -> RunningTurn | None:
        """The turn running here whose control inbox this is, if any."""
        return self._by_inbox.get(inbox)

    def launch(self, turn_id: str) -> None:
        """Start running a turn on the server loop. Safe to call from any thread."""
        if not runtime.call_soon(self._start, turn_id):
            logger.error("No server loop to run turn %s; its lease will end it", turn_id)

    def local_turn_ids(self) -> list[str]:
        return list(self._running)

    def is_running(self, turn_id: str) -> bool:
        return turn_id in self._running

    def cancel_local(self, turn_id: str) -> None:
        if running := self._running.get(turn_id):
            running.stop()

    async def wait(self, turn_id: str) -> None:
        """Wait for a local turn's task to finish (nothing to wait for if it is not here)."""
        if running := self._running.get(turn_id):
            await asyncio.shield(running.task)

    def _start(self, turn_id: str) -> None:
        if turn_id in self._running:
            return
        running = RunningTurn(turn_id)
        self._running[turn_id] = running
        running.task = asyncio.get_running_loop().create_task(
            self._run(running), name=f"turn-{turn_id}"
        )
        running.task.add_done_callback(lambda _task: self._running.pop(turn_id, None))

    async def _run(self, running: RunningTurn) -> None:
        layer = get_channel_layer()
        inbox = await layer.new_channel("parley.turn.")
        self._by_inbox[inbox] = running
        running.task.add_done_callback(lambda _task: self._by_inbox.pop(inbox, None))
        try:
            turn = await run_db(
                services.turn_mark_running,
                turn_id=running.turn_id,
                inbox=inbox,
                process=process_id(),
            )
        except ApplicationError:
            return  # ended elsewhere (stopped while queued, or reaped) before it began
        reader = asyncio.get_running_loop().create_task(self._read_inbox(running, layer, inbox))
        writer = EventWriter(conversation_id=turn.conversation_id, turn_id=turn.pk)
        # Until the turn ends on its own, assume the worst: a server stopping mid-turn cancels
        # this task, and the turn is then recorded as lost rather than completed.
        outcome = (Turn.Status.FAILED, services.TURN_LOST_ERROR)
        try:
            history = await run_db(selectors.turn_history, turn=turn)
            running.context = TurnContext(turn=turn, history=history, writer=writer)
            # A workspace made in the admin has no folder yet; its agent and pickers need one.
            await asyncio.to_thread(running.context.files_root.mkdir, parents=True, exist_ok=True)
            if turn.cancel_requested_at is not None or running.stop_requested:
                result = (Turn.Status.CANCELLED, "")
            else:
                result = await self._drive(running, load_agent(turn.conversation.agent))
            await running.context.end_message()
            await writer.close()
            outcome = result
        except Exception as exc:
            logger.exception("Turn %s broke down", running.turn_id)
            outcome = (Turn.Status.FAILED, _describe(exc))
        finally:
            reader.cancel()
            writer.abandon()
            status, error = outcome
            try:
                await run_db(services.turn_finish, turn_id=turn.pk, status=status, error=error)
            except Exception:
                logger.exception("Could not end turn %s; its lease will", running.turn_id)

    async def _drive(self, running: RunningTurn, agent) -> tuple[str, str]:
        """Run the agent in a task of its own, so that Stop can cancel it and nothing else."""
        running.agent_task = asyncio.get_running_loop().create_task(agent.run(running.context))
        await asyncio.wait({running.agent_task})
        if running.agent_task.cancelled():
            return Turn.Status.CANCELLED, ""
        if exc := running.agent_task.exception():
            logger.warning("Agent of turn %s raised", running.turn_id, exc_info=exc)
            return Turn.Status.FAILED, _describe(exc)
        return Turn.Status.COMPLETED, ""

    async def _read_inbox(self, running: RunningTurn, layer, inbox: str) -> None:
        """Control messages for this turn, from any process. They are wake-ups: what they
        announce is already in the database."""
        while True:
            try:
                message = await layer.receive(inbox)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Inbox of turn %s failed; retrying", running.turn_id)
                await asyncio.sleep(0.5)
                continue
            running.control(message)


_sending: set[asyncio.Task] = set()


def send_to_inbox(inbox: str, message: dict) -> None:
    """Send a control message to a turn's inbox (on the server loop; see turn_notify). A turn
    running in this process gets it at once, without the round trip through the layer."""
    if (running := turn_runner.by_inbox(inbox)) is not None:
        running.control(message)
        return
    task = asyncio.get_running_loop().create_task(_send(inbox, message))
    _sending.add(task)
    task.add_done_callback(_sending.discard)


async def _send(inbox: str, message: dict) -> None:
    try:
        await get_channel_layer().send(inbox, message)
    except Exception:
        logger.warning("Could not reach %s; the turn will find out from the database", inbox)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


turn_runner = TurnRunner()

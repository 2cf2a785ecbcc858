"""The agent of an outside agent's turn: it does, through the turn's context, what the agent's
MCP session hands it (ask, post, look something up), so that an outside agent's work streams,
asks, is steered and is stopped like any other turn's.

An MCP session and its turn meet through a Link, in the process that holds the session: the
session hands the link commands (each a coroutine function of the TurnContext) and awaits their
results; the turn's agent runs each one beside the others (an outside agent may wait on several
questions at once) and hands back the result, with the steering people sent meanwhile. When the
session ends, the agent ends, and the turn completes. Stop cancels the agent, and with it every
command waiting.

A turn whose process stopped is resumed elsewhere without its session (sessions live in the
memory of one process): its agent then waits for the questions still open, so that the answers
people give are recorded (and delivered to the tasks they belong to: see external.tasks), and
ends.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from django.utils import timezone

from conversations.agents import Agent
from core.dbthreads import run_db

from . import tasks

logger = logging.getLogger(__name__)

Work = Callable[[object], Awaitable[dict]]


class LinkEnded(Exception):
    """The turn's agent no longer takes commands: the turn was stopped or has ended."""


class Command:
    """One thing the session asked the turn to do, and its result once done. ``ttl``: the
    command is an MCP task's, which outlives the session and is cut short after ``ttl``
    seconds; ``cut``: a coroutine function that ends the command's wait from outside (for a
    question: cancels it, so that it is settled before its tool call ends), returning False if
    there was nothing to end yet (the command's task is then cancelled)."""

    def __init__(self, work: Work, *, ttl: float | None = None, cut=None):
        self.work = work
        self.ttl = ttl
        self._cut = cut
        self._cutting = False
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task | None = None

    @property
    def is_task(self) -> bool:
        return self.ttl is not None

    async def cut(self) -> None:
        """The session gave up on it (its request was cancelled, the session ended, or the
        task's ttl ran out): end it where it is, once."""
        if self._cutting:
            return
        self._cutting = True
        if self._cut is not None and await self._cut():
            return
        if self.task is None:
            self.future.cancel()
            return
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        if self._cut is not None:
            await self._cut()  # stored meanwhile: settled all the same

    def cancel(self) -> None:
        """Stop it where it is (the turn was stopped or handed back)."""
        if self.task is not None:
            self.task.cancel()
        else:
            self.future.cancel()


SESSION_ENDED_NOTICE = (
    "The outside agent's session ended; its questions asked as tasks stay open until answered "
    "(or until their time runs out), and the turn ends with the last of them."
)


class Link:
    """An MCP session's end of its turn, in this process."""

    def __init__(self, turn_id: str):
        self.turn_id = turn_id
        self._queue: asyncio.Queue[Command | None] = asyncio.Queue()
        self.ended = asyncio.Event()
        self._notice: str | None = None
        self._session_gone = False
        self._running: dict[asyncio.Task, Command] = {}

    def submit(self, work: Work, *, ttl: float | None = None, cut=None) -> Command:
        """Hand the turn something to do; its result comes on ``command.future`` (cancelled
        if the turn is stopped or ends first). Raises LinkEnded if the turn takes no more."""
        if self.ended.is_set() or self._session_gone:
            raise LinkEnded(self.turn_id)
        command = Command(work, ttl=ttl, cut=cut)
        self._queue.put_nowait(command)
        return command

    def close(self, *, notice: str | None = None) -> None:
        """End the turn now: the agent cuts short everything still waiting, tasks included,
        and ends the turn, telling everyone watching ``notice`` if given (a link whose turn
        never started serving is forgotten here too)."""
        _links.pop(self.turn_id, None)
        if notice is not None and not self.ended.is_set():
            self._notice = notice
        self._queue.put_nowait(None)

    def session_ended(self) -> None:
        """The session ended (DELETE, idle): what is not a task is cut short; the turn goes on
        while tasks of it are still working, and ends with the last of them."""
        if self._session_gone:
            return
        self._session_gone = True
        # Left in _links: a turn whose agent has not started yet still finds its link.
        self._queue.put_nowait(_SESSION_ENDED)

    async def serve(self, ctx) -> None:
        """Run the session's commands until it ends (or Stop cancels this)."""
        try:
            while (command := await self._queue.get()) is not None:
                if command is _SESSION_ENDED:
                    for other in list(self._running.values()):
                        if not other.is_task:
                            in_background(other.cut())
                    if any(other.is_task for other in self._running.values()):
                        ctx.notice("session_ended", SESSION_ENDED_NOTICE)
                    self._end_if_idle()
                    continue
                if command.future.cancelled():
                    continue
                command.task = asyncio.create_task(self._do(ctx, command))
                self._running[command.task] = command
                command.task.add_done_callback(self._done)
        finally:
            self.ended.set()
            _links.pop(self.turn_id, None)
            running = list(self._running)
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            while not self._queue.empty():
                if isinstance(left := self._queue.get_nowait(), Command):
                    left.future.cancel()
        if self._notice is not None:
            ctx.notice("session_ended", self._notice)

    def _done(self, task: asyncio.Task) -> None:
        self._running.pop(task, None)
        self._end_if_idle()

    def _end_if_idle(self) -> None:
        """Once the session has gone, the turn ends with its last task."""
        if self._session_gone and not self._running:
            self._queue.put_nowait(None)

    async def _do(self, ctx, command: Command) -> None:
        expiry = None
        if command.is_task:
            # A task lives for its ttl: then its question is cut short (cancelled).
            expiry = asyncio.get_running_loop().call_later(
                command.ttl, lambda: in_background(command.cut())
            )
        try:
            result = await command.work(ctx)
        except asyncio.CancelledError:
            command.future.cancel()
            raise
        except Exception as exc:
            if not command.future.done():
                command.future.set_exception(exc)
            return
        finally:
            if expiry is not None:
                expiry.cancel()
        if steering := ctx.steering():
            result = {**result, "steering": steering}
        if not command.future.done():
            command.future.set_result(result)


_SESSION_ENDED = object()  # queued when the session ends (see Link.session_ended)

_background: set[asyncio.Task] = set()


def in_background(coroutine) -> asyncio.Task:
    """Run ``coroutine`` on its own, held until it ends (the loop keeps only weak references)."""
    task = asyncio.get_running_loop().create_task(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def whole(coroutine):
    """``coroutine``'s result; it runs to its end even if the request awaiting it is cancelled
    meanwhile (what it started must not be left half done)."""
    task = in_background(coroutine)
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return await asyncio.shield(task)


_links: dict[str, Link] = {}


def link_open(turn_id: str) -> Link:
    """The link for a turn this process has just started for an MCP session."""
    link = _links[turn_id] = Link(turn_id)
    return link


class ExternalAgent(Agent):
    """Runs an outside agent's turn (see the module's description)."""

    # Resumed elsewhere when its process stops (its open questions stay answerable) ...
    resumable = True
    # ... but never let go of memory while it waits: its session, which waits too, is there.
    releasable = False

    async def run(self, ctx) -> None:
        link = _links.get(ctx.turn_id)
        if link is None or ctx.replaying:
            await self._without_session(ctx)
            return
        await link.serve(ctx)

    async def _without_session(self, ctx) -> None:
        # Questions asked as tasks are cut short when their tasks' time runs out, as they
        # would have been in the process that asked them.
        expiring = asyncio.get_running_loop().create_task(_expire_tasks(ctx.turn_id))
        try:
            answers = await ctx.settle_outstanding()
        finally:
            expiring.cancel()
        logger.info(
            "Outside agent's turn %s resumed without its session; %d question(s) settled",
            ctx.turn_id,
            len(answers),
        )
        ctx.notice(
            "session_ended",
            "The outside agent's session ended when its server stopped; the answers given are "
            "kept for it.",
        )


async def _expire_tasks(turn_id: str) -> None:
    """Cancel the question of each task of the turn still working once its time runs out."""
    for selection_id, expires_at in await run_db(tasks.turn_deadlines, turn_id=turn_id):
        await asyncio.sleep(max(0.0, (expires_at - timezone.now()).total_seconds()))
        await run_db(tasks.question_cancel, selection_id=selection_id, user=None)

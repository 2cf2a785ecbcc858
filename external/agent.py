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

from conversations.agents import Agent

logger = logging.getLogger(__name__)

Work = Callable[[object], Awaitable[dict]]


class LinkEnded(Exception):
    """The turn's agent no longer takes commands: the turn was stopped or has ended."""


class Command:
    """One thing the session asked the turn to do, and its result once done."""

    def __init__(self, work: Work):
        self.work = work
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task | None = None

    def cancel(self) -> None:
        """The session gave up on it (its request was cancelled): stop it where it is."""
        if self.task is not None:
            self.task.cancel()
        else:
            self.future.cancel()


class Link:
    """An MCP session's end of its turn, in this process."""

    def __init__(self, turn_id: str):
        self.turn_id = turn_id
        self._queue: asyncio.Queue[Command | None] = asyncio.Queue()
        self.ended = asyncio.Event()
        self._notice: str | None = None

    def submit(self, work: Work) -> Command:
        """Hand the turn something to do; its result comes on ``command.future`` (cancelled
        if the turn is stopped or ends first). Raises LinkEnded if the turn takes no more."""
        if self.ended.is_set():
            raise LinkEnded(self.turn_id)
        command = Command(work)
        self._queue.put_nowait(command)
        return command

    def close(self, *, notice: str | None = None) -> None:
        """The session ended: the agent cuts short what still waits and ends the turn, telling
        everyone watching ``notice`` if given (a link whose turn never started serving is
        forgotten here too)."""
        _links.pop(self.turn_id, None)
        if notice is not None and not self.ended.is_set():
            self._notice = notice
        self._queue.put_nowait(None)

    async def serve(self, ctx) -> None:
        """Run the session's commands until it ends (or Stop cancels this)."""
        running: set[asyncio.Task] = set()
        try:
            while (command := await self._queue.get()) is not None:
                if command.future.cancelled():
                    continue
                command.task = asyncio.create_task(self._do(ctx, command))
                running.add(command.task)
                command.task.add_done_callback(running.discard)
        finally:
            self.ended.set()
            _links.pop(self.turn_id, None)
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            while not self._queue.empty():
                if (left := self._queue.get_nowait()) is not None:
                    left.future.cancel()
        if self._notice is not None:
            ctx.notice("session_ended", self._notice)

    async def _do(self, ctx, command: Command) -> None:
        try:
            result = await command.work(ctx)
        except asyncio.CancelledError:
            command.future.cancel()
            raise
        except Exception as exc:
            if not command.future.done():
                command.future.set_exception(exc)
            return
        if steering := ctx.steering():
            result = {**result, "steering": steering}
        if not command.future.done():
            command.future.set_result(result)


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
        answers = await ctx.settle_outstanding()
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

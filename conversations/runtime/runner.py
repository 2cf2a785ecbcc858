"""The turn runner: each turn runs as an asyncio task in the server process, independent of any
client, from ``queued`` to exactly one terminal event, also when its agent raises or is stopped.

A turn's agent runs in a task of its own (so Stop cancels it and nothing else) and acts through
its TurnContext; its events go through an EventWriter; its control inbox brings Stop, steering
and wake-ups from any process; the lease this process renews (see upkeep) lets others notice if
the process dies.
"""

import asyncio
import logging

from django.conf import settings

from .. import seams, selectors, services
from ..agents import load_agent
from ..dbthreads import run_db, run_db_retrying
from ..metrics import TURNS_RUNNING, WAKEUPS_RECOVERED
from ..models import Turn
from ..process import process_id, server_loop
from ..shared import ApplicationError
from .context import TurnContext
from .inbox import Inboxes
from .writer import EventWriter

logger = logging.getLogger(__name__)


class RunningTurn:
    """A turn this process is running: its task, its agent's task and its context."""

    def __init__(self, turn_id: str):
        self.turn_id = turn_id
        self.task: asyncio.Task | None = None
        self.agent_task: asyncio.Task | None = None
        self.context: TurnContext | None = None
        self.stop_requested = False
        # Set when this process learns it no longer owns the turn: it then writes nothing more.
        self.lost = False

    def stop(self) -> None:
        self.stop_requested = True
        if self.agent_task is not None:
            self.agent_task.cancel()

    def lose(self) -> None:
        """Another process ended (reaped) this turn: stop its agent and write nothing more."""
        self.lost = True
        self.stop()

    def control(self, message: dict) -> None:
        """Act on a control message: a wake-up whose news is already in the database."""
        kind = message.get("type")
        if kind == "turn.cancel":
            self.stop()
        elif kind == "turn.steer" and self.context is not None:
            self.context._receive_steering(message["seq"], message["input"])
        elif kind == "selection.wake":
            seams.questions.get().wake(message["id"], message.get("outcome"))


class TurnRunner:
    """Starts turns in this process and keeps track of them until they end. It is what services
    reach through ``seams.turns``."""

    def __init__(self):
        self._running: dict[str, RunningTurn] = {}
        self.inboxes = Inboxes()
        self._catch_up: asyncio.Task | None = None

    def launch(self, turn_id: str) -> None:
        """Start running a turn on the server loop. Safe to call from any thread."""
        if not server_loop.call_soon(self._start, turn_id):
            logger.error("No server loop to run turn %s; its lease will end it", turn_id)

    def notify(self, inbox: str, message: dict) -> None:
        """Send a control message to a turn's inbox. Safe to call from any thread."""
        server_loop.call_soon(self.inboxes.send, inbox, message)

    def local_turn_ids(self) -> list[str]:
        return list(self._running)

    def is_running(self, turn_id: str) -> bool:
        return turn_id in self._running

    def lose_local(self, turn_id: str) -> None:
        """This process no longer owns the turn (learnt at lease renewal): stop it."""
        if running := self._running.get(turn_id):
            logger.warning("Turn %s is no longer run here; stopping its agent", turn_id)
            running.lose()

    def _start(self, turn_id: str) -> None:
        if turn_id in self._running:
            return
        running = RunningTurn(turn_id)
        self._running[turn_id] = running
        TURNS_RUNNING.inc()
        loop = asyncio.get_running_loop()
        running.task = loop.create_task(self._run(running), name=f"turn-{turn_id}")
        running.task.add_done_callback(lambda _task: self._ended(turn_id))
        if self._catch_up is None or self._catch_up.done():
            self._catch_up = loop.create_task(self._catch_up_forever(), name="parley-catch-up")

    def _ended(self, turn_id: str) -> None:
        if self._running.pop(turn_id, None) is not None:
            TURNS_RUNNING.dec()

    async def _catch_up_forever(self) -> None:
        """While turns run here, read now and then the steering and Stop requests sent to them,
        so that one whose wake-up the channel layer lost (or that came before the turn's inbox
        was open) reaches its turn seconds late rather than never. One query for every turn."""
        while self._running:
            await asyncio.sleep(settings.PARLEY_SELECTION_POLL_SECONDS)
            try:
                await self.catch_up()
            except Exception:
                logger.warning("Could not read the turns' steering; trying again", exc_info=True)

    async def catch_up(self) -> None:
        running = {turn_id: r for turn_id, r in self._running.items() if r.context is not None}
        if not running:
            return
        news = await run_db(selectors.turn_control_news, turn_ids=list(running))
        for turn_id, seq, text in news.steering:
            context = running[turn_id].context
            if context._receive_steering(seq, text):
                WAKEUPS_RECOVERED.labels("steer").inc()
        for turn_id in news.stop_requested:
            if not running[turn_id].stop_requested:
                WAKEUPS_RECOVERED.labels("stop").inc()
                running[turn_id].stop()

    async def _run(self, running: RunningTurn) -> None:
        inbox = await self.inboxes.open(running.control)
        try:
            turn = await run_db_retrying(
                services.turn_mark_running,
                turn_id=running.turn_id,
                inbox=inbox.name,
                process=process_id(),
            )
        except ApplicationError:
            inbox.close()
            return  # ended elsewhere (stopped while queued, or reaped) before it began
        except Exception:
            inbox.close()
            logger.warning("Could not start turn %s; its lease will end it", running.turn_id)
            return
        writer = EventWriter(
            conversation_id=turn.conversation_id, turn_id=turn.pk, on_lost=running.lose
        )
        # Until the turn ends on its own, assume the worst: a server stopping mid-turn cancels
        # this task, and the turn is then recorded as lost rather than completed.
        outcome = (Turn.Status.FAILED, services.TURN_LOST_ERROR)
        try:
            history = await run_db_retrying(selectors.turn_history, turn=turn)
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
        except services.TurnLost:
            running.lost = True
        except Exception as exc:
            logger.exception("Turn %s broke down", running.turn_id)
            outcome = (Turn.Status.FAILED, _describe(exc))
        finally:
            writer.abandon()
            if not running.lost:
                await self._finish(running, *outcome)
            inbox.close()

    async def _finish(self, running: RunningTurn, status: str, error: str) -> None:
        """Write the turn's one terminal event, unless this process no longer owns the turn."""
        try:
            await run_db_retrying(
                services.turn_finish,
                turn_id=running.turn_id,
                status=status,
                error=error,
                process=process_id(),
            )
        except services.TurnLost:
            logger.warning("Turn %s was ended by another process", running.turn_id)
        except Exception:
            logger.exception("Could not end turn %s; its lease will", running.turn_id)

    async def _drive(self, running: RunningTurn, agent) -> tuple[str, str]:
        """Run the agent in a task of its own, so that Stop can cancel it and nothing else."""
        running.agent_task = asyncio.get_running_loop().create_task(agent.run(running.context))
        await asyncio.wait({running.agent_task})
        if running.agent_task.cancelled():
            return Turn.Status.CANCELLED, ""
        if isinstance(exc := running.agent_task.exception(), services.TurnLost):
            raise exc
        if exc:
            logger.warning("Agent of turn %s raised", running.turn_id, exc_info=exc)
            return Turn.Status.FAILED, _describe(exc)
        return Turn.Status.COMPLETED, ""


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


turn_runner = TurnRunner()

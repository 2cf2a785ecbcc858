"""The turn runner: each turn runs as an asyncio task in the server process, independent of any
client, from ``queued`` to exactly one terminal event, also when its agent raises or is stopped.

A turn's agent runs in a task of its own (so Stop cancels it and nothing else) and acts through
its TurnContext; its events go through an EventWriter; its control inbox brings Stop, steering
and wake-ups from any process; the lease this process renews (see upkeep) lets others notice if
the process dies. A turn nobody holds any more (its process died, handed it back at shutdown, or
released it from memory while it waited for an answer) is claimed by a live process and resumed
from its journal (see journal).
"""

import asyncio
import logging

from django.conf import settings

from core.dbthreads import run_db, run_db_retrying
from core.errors import ApplicationError
from core.process import process_id, server_loop

from .. import selectors, services
from ..agents import load_agent
from ..events import EventType
from ..metrics import TURNS_RESUMED, TURNS_RUNNING, WAKEUPS_RECOVERED
from ..models import Turn
from . import failures
from .context import TurnContext
from .inbox import Inboxes
from .journal import Journal
from .parking import parking
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
        # Set when this process hands the turn back (it is shutting down).
        self.leaving = False
        # A resume asked for while this turn was still unwinding here (released): start it then.
        self.resume_after: str | None = None
        self.resume_held_from: str | None = None
        # Resumed: who held the turn before, when it is held for this process already.
        self.held_from: str | None = None

    def stop(self) -> None:
        self.stop_requested = True
        if self.agent_task is not None:
            self.agent_task.cancel()

    def hand_back(self) -> None:
        """Stop the agent so that another process resumes the turn (at shutdown)."""
        self.leaving = True
        if self.context is not None:
            self.context.interruption = "Interrupted: its server restarted. It runs again."
        if self.agent_task is not None:
            self.agent_task.cancel()

    def lose(self) -> None:
        """Another process took this turn over (or ended it): stop its agent, write nothing more."""
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
            parking.wake(message["id"], message.get("outcome"))


class TurnRunner:
    """Starts turns in this process and keeps track of them until they end. It is what services
    reach through ``hooks.turns``."""

    def __init__(self):
        self._running: dict[str, RunningTurn] = {}
        self.inboxes = Inboxes()
        self._catch_up: asyncio.Task | None = None

    def launch(self, turn_id: str) -> None:
        """Start running a turn on the server loop. Safe to call from any thread."""
        if not server_loop.call_soon(self._start, turn_id):
            logger.error("No server loop to run turn %s; its lease will end it", turn_id)

    def resume(self, turn_id: str, reason: str, held_from: str | None = None) -> None:
        """Claim a turn nobody holds and resume it here from its journal (``reason`` says why
        it changed hands: see turn.resumed). Safe to call from any thread; does nothing if
        another process claims it first, or if this process is shutting down. ``held_from``:
        the turn is held for this process already (ownership.turn_wake), by whom before."""
        if not server_loop.call_soon(self._start, turn_id, reason, held_from):
            logger.warning("No server loop to resume turn %s; upkeep will", turn_id)

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

    async def hand_back_all(self, timeout: float = 15) -> None:
        """At shutdown: stop every turn's agent, write what it had queued, and let go of the
        turns, so that other processes resume them at once (no lease to wait out)."""
        for running in list(self._running.values()):
            running.hand_back()
        tasks = [running.task for running in self._running.values()]
        if tasks:
            logger.info("Handing back %d turn(s)", len(tasks))
            await asyncio.wait(tasks, timeout=timeout)

    def _start(self, turn_id: str, reason: str | None = None, held_from: str | None = None):
        if server_loop.draining and reason is not None:
            return  # another process claims it (or, held here, once its lease runs out)
        if existing := self._running.get(turn_id):
            # Only a turn let go of here is resumed while it is still here: it is unwinding.
            if reason is not None:
                existing.resume_after, existing.resume_held_from = reason, held_from
            return
        running = RunningTurn(turn_id)
        running.held_from = held_from
        self._running[turn_id] = running
        TURNS_RUNNING.inc()
        loop = asyncio.get_running_loop()
        running.task = loop.create_task(self._run(running, reason), name=f"turn-{turn_id}")
        running.task.add_done_callback(lambda _task: self._ended(running))
        if self._catch_up is None or self._catch_up.done():
            self._catch_up = loop.create_task(self._catch_up_forever(), name="parley-catch-up")

    def _ended(self, running: RunningTurn) -> None:
        if self._running.pop(running.turn_id, None) is not None:
            TURNS_RUNNING.dec()
        if running.resume_after is not None:
            self._start(running.turn_id, running.resume_after, running.resume_held_from)

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

    async def _begin(self, running: RunningTurn, inbox: str, reason: str | None):
        """Take the turn: a queued one moves to running here, one nobody holds is claimed.
        None if it is not ours to run (ended, or claimed elsewhere first)."""
        if reason is None:
            try:
                return await run_db_retrying(
                    services.turn_mark_running,
                    turn_id=running.turn_id,
                    inbox=inbox,
                    process=process_id(),
                )
            except ApplicationError:
                return None  # ended elsewhere (stopped while queued) before it began
        turn = await run_db_retrying(
            services.turn_claim,
            turn_id=running.turn_id,
            inbox=inbox,
            process=process_id(),
            any_owner=reason == "restart",
            held=running.held_from is not None,
        )
        if turn is not None and running.held_from is not None:
            turn.previous_runner = running.held_from
        return turn

    async def _run(self, running: RunningTurn, reason: str | None) -> None:
        inbox = await self.inboxes.open(running.control)
        try:
            turn = await self._begin(running, inbox.name, reason)
            agent = load_agent(turn.agent or turn.conversation.agent) if turn is not None else None
        except Exception:
            inbox.close()
            logger.warning("Could not start turn %s; upkeep will", running.turn_id, exc_info=True)
            return
        if turn is None:
            inbox.close()
            return
        if reason is not None and not agent.resumable:
            logger.warning("Turn %s cannot be resumed (agent %s)", turn.pk, type(agent).__name__)
            await self._finish(running, Turn.Status.FAILED, services.TURN_LOST_ERROR)
            inbox.close()
            return
        writer = EventWriter(
            conversation_id=turn.conversation_id,
            turn_id=turn.pk,
            on_lost=running.lose,
            batches=turn.batches_written,
        )
        # Until the turn ends on its own, assume the worst: a server stopping mid-turn cancels
        # this task, and the turn is then recorded as lost rather than completed.
        outcome = (Turn.Status.FAILED, services.TURN_LOST_ERROR)
        try:
            journal = None
            if reason is not None:
                journal = await self._resumed(turn, writer, reason)
            history = await run_db_retrying(selectors.turn_history, turn=turn)
            running.context = TurnContext(
                turn=turn,
                history=history,
                writer=writer,
                journal=journal,
                resumable=agent.resumable,
                releasable=agent.releasable,
            )
            # A workspace made in the admin has no folder yet; its agent and pickers need one.
            await asyncio.to_thread(running.context.files_root.mkdir, parents=True, exist_ok=True)
            if turn.cancel_requested_at is not None or running.stop_requested:
                result = (Turn.Status.CANCELLED, "")
            else:
                result = await self._drive(running, agent)
            if running.context.diverged is None:
                await running.context.end_message()
            await writer.close()
            outcome = result
        except services.TurnReleased:
            running.lost = True
            if running.leaving:
                await self._hand_back(running, writer)
        except services.TurnLost:
            running.lost = True
        except Exception as exc:
            logger.exception("Turn %s broke down", running.turn_id)
            outcome = (Turn.Status.FAILED, failures.reason(exc), failures.detail(exc))
        finally:
            writer.abandon()
            if not running.lost:
                usage = running.context.usage if running.context is not None else None
                await self._finish(running, *outcome, usage=usage)
            inbox.close()

    async def _resumed(self, turn: Turn, writer: EventWriter, reason: str) -> Journal | None:
        """Read the journal of a turn taken over, and tell watchers (``turn.resumed``); tool
        calls its process had started and not finished are closed as interrupted (they run
        again). None for a turn that had not begun: it starts as if new."""
        if turn.previous_status == Turn.Status.QUEUED:
            return None
        progress = await run_db_retrying(selectors.turn_progress, turn_id=turn.pk)
        journal = Journal.from_progress(progress)
        TURNS_RESUMED.labels(reason).inc()
        logger.info(
            "Resuming turn %s (%s) from %d step(s) and %d character(s)",
            turn.pk,
            reason,
            len(journal.steps),
            len(journal.text),
        )
        writer.emit(
            EventType.TURN_RESUMED,
            {"process": process_id(), "previous": turn.previous_runner, "reason": reason},
        )
        for call in journal.open_calls:
            writer.emit(
                EventType.TOOL_COMPLETED,
                {**call, "error": "Interrupted: its server stopped. It runs again."},
            )
        return journal

    async def _hand_back(self, running: RunningTurn, writer: EventWriter) -> None:
        """Write what the agent had queued, then let go of the turn."""
        try:
            await writer.close()
            await run_db_retrying(
                services.turn_hand_back, turn_id=running.turn_id, process=process_id()
            )
        except services.TurnLost:
            pass
        except Exception:
            logger.warning("Could not hand turn %s back; its lease will", running.turn_id)

    async def _finish(
        self,
        running: RunningTurn,
        status: str,
        error: str,
        detail: str = "",
        usage: dict | None = None,
    ) -> None:
        """Write the turn's one terminal event, unless this process no longer owns the turn."""
        try:
            await run_db_retrying(
                services.turn_finish,
                turn_id=running.turn_id,
                status=status,
                error=error,
                detail=detail,
                process=process_id(),
                usage=usage,
            )
        except services.TurnLost:
            logger.warning("Turn %s was ended by another process", running.turn_id)
        except Exception:
            logger.exception("Could not end turn %s; its lease will", running.turn_id)

    async def _drive(self, running: RunningTurn, agent) -> tuple[str, ...]:
        """Run the agent in a task of its own, so that Stop can cancel it and nothing else."""
        if running.leaving:
            raise services.TurnReleased(running.turn_id)
        running.agent_task = asyncio.get_running_loop().create_task(agent.run(running.context))
        await asyncio.wait({running.agent_task})
        if running.agent_task.cancelled():
            if running.leaving:
                raise services.TurnReleased(running.turn_id)
            return Turn.Status.CANCELLED, ""
        if isinstance(exc := running.agent_task.exception(), services.TurnLost):
            raise exc
        if diverged := running.context.diverged:
            logger.warning("Turn %s diverged from its journal: %s", running.turn_id, diverged)
            return Turn.Status.FAILED, (
                "This turn could not be resumed: its agent no longer does what the turn had "
                f"done ({diverged}). Nothing was done again."
            )
        if exc:
            logger.warning("Agent of turn %s raised", running.turn_id, exc_info=exc)
            return Turn.Status.FAILED, failures.reason(exc), failures.detail(exc)
        return Turn.Status.COMPLETED, ""


turn_runner = TurnRunner()

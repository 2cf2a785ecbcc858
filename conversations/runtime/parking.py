"""Turns parked on a question: each waits on an asyncio event (no thread), woken through its
inbox when the question is settled (answered, dismissed, declined, or expired by process upkeep,
which works from the database for every question, in memory or not). One poller per process
re-reads every parked question in a single query now and then, so a wake-up lost on the channel
layer delays a turn by seconds at most and a thousand parked turns cost one query, not a
thousand; a question whose row is gone is found so too, and taken as cancelled. A turn parked
for longer than PARLEY_RELEASE_PARKED_AFTER_SECONDS lets go of its process's memory altogether:
whoever settles its question resumes it from its journal.

The questions themselves are the selection app's: they are stored and read through
``conversations.hooks.questions``."""

import asyncio
import logging
from contextlib import contextmanager

from django.conf import settings

from core.dbthreads import run_db, run_db_retrying
from core.process import process_id

from .. import hooks
from ..metrics import QUESTIONS_PARKED, TURNS_RELEASED, WAKEUPS_RECOVERED
from ..services import TurnReleased, turn_release

logger = logging.getLogger(__name__)


class _Spot:
    """Where one turn waits for one question: the event that wakes it, the outcome the
    wake-up brought (None when a wake-up says only "look in the database"), and whether the
    question is stored (its wait began): only then may the poller look for it."""

    __slots__ = ("event", "outcome", "stored")

    def __init__(self):
        self.event = asyncio.Event()
        self.outcome: dict | None = None
        self.stored = False


class Parking:
    """The turns of this process parked on a question."""

    def __init__(self):
        self._waiting: dict[str, _Spot] = {}
        self._poller: asyncio.Task | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def wake(self, selection_id: str, outcome: dict | None = None) -> None:
        """Wake the turn waiting on this question. ``outcome`` is the settled question's
        outcome as committed (see Selection.outcome), which spares the turn a read."""
        if spot := self._waiting.get(selection_id):
            spot.outcome = spot.outcome or outcome
            spot.event.set()

    @contextmanager
    def expecting(self, selection_id: str):
        """Be ready for the question's wake-up from before it is stored: a person (or a bot)
        may answer the moment ``selection.requested`` is published."""
        self._waiting[selection_id] = _Spot()
        QUESTIONS_PARKED.inc()
        try:
            yield
        finally:
            if self._waiting.pop(selection_id, None) is not None:
                QUESTIONS_PARKED.dec()

    async def wait(self, selection_id: str, *, turn_id: str, releasable: bool) -> dict:
        """The question's outcome (see Selection.outcome) once it is no longer pending:
        answered, dismissed, declined, cancelled or expired (or gone: taken as cancelled).
        Call it inside ``expecting(selection_id)``, once the question is stored. If
        ``releasable`` (the turn can be resumed from its journal), a wait longer than
        PARLEY_RELEASE_PARKED_AFTER_SECONDS releases the turn: this raises TurnReleased, and
        the agent's task ends without writing anything."""
        spot = self._waiting[selection_id]
        spot.stored = True
        self._ensure_poller()
        release_after = settings.PARLEY_RELEASE_PARKED_AFTER_SECONDS if releasable else None
        while True:
            try:
                async with asyncio.timeout(release_after):
                    await spot.event.wait()
            except TimeoutError:
                if await run_db_retrying(turn_release, turn_id=turn_id, process=process_id()):
                    TURNS_RELEASED.inc()
                    raise TurnReleased(turn_id) from None
                continue  # settled meanwhile: its wake-up is on the way, or the poller's
            spot.event.clear()
            if spot.outcome is not None:
                return spot.outcome
            outcome = await run_db_retrying(hooks.questions.get().outcome, selection_id)
            if outcome is not None:
                return outcome

    async def wait_again(self, selection_id: str, *, turn_id: str, releasable: bool) -> dict:
        """For a resumed turn: the outcome of a question it had asked (as :meth:`ask` returns
        it), waiting for it if it is still pending."""
        with self.expecting(selection_id):
            outcome = await run_db_retrying(hooks.questions.get().outcome, selection_id)
            if outcome is None:
                outcome = await self.wait(selection_id, turn_id=turn_id, releasable=releasable)
        return {"selection": selection_id, **outcome}

    def _ensure_poller(self) -> None:
        loop = asyncio.get_running_loop()
        if self._poller is None or self._poller.done() or self._poller.get_loop() is not loop:
            self._poller = loop.create_task(self._poll(), name="parley-parking")

    async def _poll(self) -> None:
        while self._waiting:
            await asyncio.sleep(settings.PARLEY_SELECTION_POLL_SECONDS)
            # Before it is stored, a question is missing only because its row is not committed.
            stored = [selection_id for selection_id, spot in self._waiting.items() if spot.stored]
            try:
                settled = await run_db(hooks.questions.get().settled, stored)
            except Exception:
                # The database is away (a restart): the turns wait on, and so does the poller.
                logger.warning("Could not read the parked questions; trying again", exc_info=True)
                continue
            for selection_id in settled:
                spot = self._waiting.get(selection_id)
                if spot is not None and not spot.event.is_set():
                    WAKEUPS_RECOVERED.labels("answer").inc()
                self.wake(selection_id)


parking = Parking()

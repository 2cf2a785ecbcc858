"""The event writer: one turn's events written in batches, in order (group commit)."""

import asyncio
import logging
import time

from django.conf import settings

from core.dbthreads import run_db_retrying
from core.process import process_id

from .. import services
from ..events import EventType
from ..metrics import EVENT_COMMIT_SECONDS, EVENTS_WRITTEN

logger = logging.getLogger(__name__)

DELTA = EventType.MESSAGE_DELTA.value
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

    def __init__(self, *, conversation_id: str, turn_id: str, on_lost=None, batches: int = 0):
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        # Called once if a write finds that this process no longer owns the turn (fencing).
        self._on_lost = on_lost
        self._pending: list[list] = []
        # Journal steps (see TurnStep), written in the same transaction as the events beside them.
        self._steps: list[dict] = []
        self._pending_since = 0.0
        self._only_deltas = True
        self._urgent = False
        self._accepted = 0
        self._written = 0
        # Batches written so far (by this writer, and before it by the turn's earlier runners).
        self._batches = batches
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

    def emit_step(self, step: dict) -> None:
        """Queue a journal step; it is committed with the events queued before it."""
        if self._error is not None:
            raise self._error
        self._steps.append(step)
        self._accepted += 1
        self._only_deltas = False
        self._wakeup.set()

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
            if not self._pending and not self._steps:
                continue
            if self._only_deltas and not self._urgent and linger > 0:
                wait = self._pending_since + linger - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            batch, self._pending = self._pending, []
            steps, self._steps = self._steps, []
            self._urgent = False
            self._flushing = True
            started = time.perf_counter()
            try:
                # A batch is one transaction, numbered: retried while the database is away, it
                # is written once, even when a commit's acknowledgement was lost.
                await run_db_retrying(
                    services.turn_events_append,
                    conversation_id=self.conversation_id,
                    turn_id=self.turn_id,
                    process=process_id(),
                    events=[tuple(item) for item in batch],
                    steps=steps,
                    batch=self._batches + 1,
                )
            except services.TurnLost as exc:
                logger.warning("Turn %s is no longer run here; its writes stop", self.turn_id)
                self._fail(exc)
                if self._on_lost is not None:
                    self._on_lost()
                return
            except Exception as exc:
                logger.exception("Could not write events of turn %s", self.turn_id)
                self._fail(exc)
                return
            finally:
                self._flushing = False
            self._batches += 1
            EVENT_COMMIT_SECONDS.observe(time.perf_counter() - started)
            EVENTS_WRITTEN.inc(len(batch))
            self._written += len(batch) + len(steps)
            self._progress.set()

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._progress.set()

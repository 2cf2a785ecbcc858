"""Turns parked on a question: each waits on an asyncio event (no thread), woken through its
inbox when the question is settled, or by its own timer when it expires. One poller per process
re-reads every parked question in a single query now and then, so a wake-up lost on the channel
layer delays a turn by seconds at most and a thousand parked turns cost one query, not a
thousand."""

import asyncio

from django.conf import settings
from django.utils import timezone

from conversations.dbthreads import run_db

from . import selectors, services
from .models import Selection


class Parking:
    def __init__(self):
        self._waiting: dict[str, asyncio.Event] = {}
        self._poller: asyncio.Task | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def wake(self, selection_id: str) -> None:
        if event := self._waiting.get(selection_id):
            event.set()

    async def wait(self, selection: Selection) -> None:
        """Return once the question is no longer pending: answered, dismissed, declined,
        cancelled, or expired (which this does itself when the time comes)."""
        event = self._waiting[selection.pk] = asyncio.Event()
        self._ensure_poller()
        try:
            while True:
                remaining = (selection.expires_at - timezone.now()).total_seconds()
                if remaining <= 0:
                    await run_db(services.selection_expire, selection=selection)
                    return
                try:
                    async with asyncio.timeout(remaining):
                        await event.wait()
                except TimeoutError:
                    continue
                event.clear()
                if await run_db(selectors.selection_is_settled, selection_id=selection.pk):
                    return
        finally:
            self._waiting.pop(selection.pk, None)

    def _ensure_poller(self) -> None:
        loop = asyncio.get_running_loop()
        if self._poller is None or self._poller.done() or self._poller.get_loop() is not loop:
            self._poller = loop.create_task(self._poll(), name="parley-parking")

    async def _poll(self) -> None:
        while self._waiting:
            await asyncio.sleep(settings.PARLEY_SELECTION_POLL_SECONDS)
            settled = await run_db(selectors.settled_selection_ids, ids=list(self._waiting))
            for selection_id in settled:
                self.wake(selection_id)


parking = Parking()

"""A conversation's events after a given seq, replayed from the database and then followed live,
in order, with no gap and no duplicate: the one join used by the WebSocket and by SSE tails.

The join is race-free the way Centrifugo does it: subscribe first, then read history, and merge
by seq. Live frames at or below the last seq sent are duplicates and dropped; a frame beyond the
next seq means a hole (the layer is at-most-once), which is filled from the database, where every
published event already is. A wake-up lost outright is caught by the hub's poll (see
broadcast.py), which sends the feed to the database: it delays a watcher by seconds at most.
"""

import asyncio

from core.dbthreads import run_db_retrying

from . import selectors
from .broadcast import Subscription, hub
from .events import Frame


class ConversationFeed:
    # A replay's first page is small, so that its first events are on their way after a short
    # read; the pages after it are large, so that a long replay costs few queries and writes,
    # but of about PAGE_CHARS at most: a page of large events is as many fewer (a watcher that
    # waits for its client holds one page).
    FIRST_PAGE = 100
    PAGE = 1000
    PAGE_CHARS = 2**20

    __slots__ = (
        "_page",
        "_primed",
        "_replay",
        "_subscription",
        "conversation_id",
        "interrupted",
        "last_seq",
    )

    def __init__(self, conversation_id: str, after_seq: int):
        self.conversation_id = conversation_id
        self.last_seq = after_seq
        self._replay = True
        self._page = self.FIRST_PAGE
        self._primed: list[Frame] = []
        self._subscription: Subscription | None = None
        self.interrupted = False

    async def __aenter__(self) -> "ConversationFeed":
        self._subscription = await hub.subscribe(self.conversation_id)
        return self

    async def __aexit__(self, *exc_info) -> None:
        if self._subscription is not None:
            subscription, self._subscription = self._subscription, None
            await hub.unsubscribe(subscription)

    def on_presence(self, callback) -> None:
        """Have ``callback`` (async, given the frame's text) called whenever who is watching
        the conversation changes."""
        self._subscription.on_presence = callback

    def interrupt(self) -> None:
        """End the feed: a waiting ``next_batch`` returns at once, and every later one with
        nothing."""
        self.interrupted = True
        if self._subscription is not None:
            self._subscription.put([])

    def read_first_page(self) -> list[Frame]:
        """The replay's first page, read now (sync, in a database thread): a socket reads it
        with the conversation's state, in one trip, and ``prime`` hands it to the feed."""
        return selectors.event_frames_after(
            conversation_id=self.conversation_id, after_seq=self.last_seq, limit=self._page
        )

    def prime(self, frames: list[Frame], *, read_before_subscribing: bool = False) -> None:
        """Take ``frames`` (from :meth:`read_first_page`) as the replay's first page: the next
        ``next_batch`` returns them, and the replay goes on after them if the page was full, or
        if it was read before the feed subscribed (events committed in between are read then)."""
        self._primed = frames
        self._replay = read_before_subscribing or len(frames) == self._page
        self._page = self._page_after(frames) if self._replay else self.FIRST_PAGE
        if frames:
            self.last_seq = frames[-1].seq
        if not self._replay:
            hub.seen(self.conversation_id, self.last_seq)

    def rewind(self, after_seq: int) -> None:
        """Send everything after ``after_seq`` again (a client that saw a hole asks for this)."""
        self.last_seq = after_seq
        self._replay = True
        self._page = self.FIRST_PAGE

    async def next_batch(self, timeout: float | None = None) -> list[Frame]:
        """The next frames in seq order; an empty list when ``timeout`` seconds pass without one."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        if self._primed:
            frames, self._primed = self._primed, []
            return frames
        while True:
            if self.interrupted:
                return []
            if self._replay:
                # Retried while the database is away: the watcher waits, then catches up.
                frames = await run_db_retrying(
                    selectors.event_frames_after,
                    conversation_id=self.conversation_id,
                    after_seq=self.last_seq,
                    limit=self._page,
                )
                if len(frames) < self._page:
                    self._replay = False
                    self._page = self.FIRST_PAGE
                    hub.seen(self.conversation_id, frames[-1].seq if frames else self.last_seq)
                else:
                    self._page = self._page_after(frames)
                if frames:
                    self.last_seq = frames[-1].seq
                    return frames
            if self._subscription.overflowed:
                self._subscription.overflowed = False
                self._replay = True
                continue
            wait = None if deadline is None else deadline - loop.time()
            if wait is not None and wait <= 0:
                return []
            live = await self._subscription.get(wait)
            if live is None:
                return []  # the timeout passed
            frames = self._merge(live)
            if frames:
                return frames

    def _page_after(self, frames: list[Frame]) -> int:
        """How many events the next page reads: PAGE, or as many as about PAGE_CHARS hold if
        events the size of these would weigh more."""
        size = sum(len(frame.text) for frame in frames)
        if size <= self.PAGE_CHARS * len(frames) // self.PAGE:
            return self.PAGE
        return max(1, len(frames) * self.PAGE_CHARS // size)

    def _merge(self, live: list[Frame]) -> list[Frame]:
        frames = []
        for frame in live:
            if frame.seq <= self.last_seq:
                continue
            if frame.seq != self.last_seq + 1:
                # A hole: everything published is committed, so the database has the rest.
                self._replay = True
                break
            frames.append(frame)
            self.last_seq = frame.seq
        return frames

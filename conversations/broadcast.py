"""Fan-out of committed events to everyone watching.

Each event is encoded once per process. Frames go straight to the watchers in this process (no
channel-layer hop, no per-socket dispatch), and to other processes as one channel-layer message
per batch, sent to the conversation's group where each process has a single channel. The layer is
at-most-once: watchers treat it as a wake-up and fill any hole from the database (see feed.py).
A wake-up lost outright (the last events of a turn, with nothing after them to show the hole) is
caught by the hub's poll: every ``PARLEY_FEED_POLL_SECONDS`` it reads the latest seq of every
conversation watched here, in one query, and sends the watchers of any that moved on unheard to
the database.
"""

import asyncio
import logging

from channels.layers import get_channel_layer
from django.conf import settings

from core.dbthreads import run_db
from core.metrics import LAYER_ERRORS
from core.process import layer_is_shared, process_id, receive_forever, server_loop
from core.wakeup import Wakeup

from . import selectors
from .events import Frame, encode

logger = logging.getLogger(__name__)

# Frames split into messages of at most this many, to keep each layer message small.
LAYER_BATCH = 200
# Comings and goings this close together are read from the database once.
PRESENCE_SETTLE_SECONDS = 0.05


# Every process's hub channel is in this group: news that someone's access was lowered.
ACCESS_GROUP = "parley.access"


def conversation_group_name(conversation_id: str) -> str:
    return f"parley.conversation.{conversation_id}"


class Subscription:
    """One watcher's queue of live frames for one conversation.

    The queue is bounded (in frames, and in characters: a few large events weigh as much as
    many small ones): a watcher that falls too far behind loses its queued frames and is told so
    (``overflowed``), and reads them back from the database instead.
    """

    MAX_BACKLOG = 10_000
    MAX_BACKLOG_CHARS = 4 * 2**20

    __slots__ = (
        "_frames",
        "_size",
        "_wakeup",
        "conversation_id",
        "on_presence",
        "overflowed",
        "presence_sent",
    )

    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        self.overflowed = False
        # A list, not a deque: a deque's first block is 600 bytes, for each of thousands of
        # mostly idle sockets.
        self._frames: list[Frame] = []
        self._size = 0
        self._wakeup = Wakeup()
        # Who is watching: an async callable given each new ``presence`` frame, if wanted.
        self.on_presence = None
        self.presence_sent: str | None = None

    def put(self, frames: list[Frame], size: int = 0) -> None:
        """Queue ``frames`` (``size``: their texts' length in all)."""
        if (
            len(self._frames) + len(frames) > self.MAX_BACKLOG
            or self._size + size > self.MAX_BACKLOG_CHARS
        ):
            self._frames = []
            self._size = 0
            self.overflowed = True
        else:
            self._frames.extend(frames)
            self._size += size
        self._wakeup.set()

    def nudge(self) -> None:
        """Send the watcher to the database: events were committed that it was not given."""
        self.overflowed = True
        self._wakeup.set()

    async def get(self, timeout: float | None) -> list[Frame] | None:
        """Every frame queued so far, waiting up to ``timeout`` seconds (None: for as long as it
        takes) for one; None if none came."""
        if not self._frames and not self.overflowed:
            self._wakeup.clear()
            try:
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
            except TimeoutError:
                return None
        frames, self._frames = self._frames, []
        self._size = 0
        return frames


class Hub:
    """The per-process registry of watchers, and the publisher of committed events."""

    def __init__(self):
        self._subscriptions: dict[str, set[Subscription]] = {}
        self._channel: str | None = None
        self._listener: asyncio.Task | None = None
        self._outbox: asyncio.Queue | None = None
        self._forwarder: asyncio.Task | None = None
        self._membership = asyncio.Lock()
        self._presence_due: dict[str, asyncio.Task] = {}
        # Called (on the loop) when another process says someone's access was lowered.
        self.on_access_changed: list = []
        self._sending: set[asyncio.Task] = set()
        # The latest seq the watchers here were given or read, per conversation.
        self._seen: dict[str, int] = {}
        self._poller: asyncio.Task | None = None

    async def subscribe(self, conversation_id: str) -> Subscription:
        server_loop.bind()
        subscription = Subscription(conversation_id)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll_forever())
        watchers = self._subscriptions.setdefault(conversation_id, set())
        first = not watchers
        watchers.add(subscription)
        if first and layer_is_shared():
            async with self._membership:
                layer = get_channel_layer()
                await self._ensure_listener(layer)
                try:
                    await layer.group_add(conversation_group_name(conversation_id), self._channel)
                except Exception as exc:
                    # The watcher still gets every event, from the database, seconds late.
                    LAYER_ERRORS.labels("group_add").inc()
                    logger.warning("Could not join %s's group: %r", conversation_id, exc)
        return subscription

    async def unsubscribe(self, subscription: Subscription) -> None:
        conversation_id = subscription.conversation_id
        watchers = self._subscriptions.get(conversation_id)
        if watchers is None:
            return
        watchers.discard(subscription)
        if watchers:
            return
        del self._subscriptions[conversation_id]
        self._seen.pop(conversation_id, None)
        if layer_is_shared() and self._channel is not None:
            async with self._membership:
                if conversation_id not in self._subscriptions:
                    await get_channel_layer().group_discard(
                        conversation_group_name(conversation_id), self._channel
                    )

    def publish(self, conversation_id: str, frames: list[Frame]) -> None:
        """Hand committed frames to every watcher, here and in other processes.

        Safe to call from any thread (services call it from on_commit in request threads and
        database threads); the work itself happens on the server loop.
        """
        if frames:
            server_loop.call_soon(self._publish_on_loop, conversation_id, frames)

    def _publish_on_loop(self, conversation_id: str, frames: list[Frame]) -> None:
        self._deliver(conversation_id, frames)
        self._send_to_others(conversation_id, frames)

    def presence_changed(self, conversation_id: str) -> None:
        """Someone came to or left a conversation: watchers here and in other processes that
        asked for presence get the new list. Safe to call from any thread."""
        server_loop.call_soon(self._presence_changed, conversation_id, True)

    def _presence_changed(self, conversation_id: str, forward: bool) -> None:
        wanted = any(s.on_presence for s in self._subscriptions.get(conversation_id, ()))
        if wanted and conversation_id not in self._presence_due:
            self._presence_due[conversation_id] = asyncio.get_running_loop().create_task(
                self._refresh_presence(conversation_id)
            )
        if forward:
            self._send_to_others(conversation_id, None)

    async def _refresh_presence(self, conversation_id: str) -> None:
        try:
            await asyncio.sleep(PRESENCE_SETTLE_SECONDS)
            del self._presence_due[conversation_id]
            people = await run_db(selectors.people_watching, conversation_id=conversation_id)
        except Exception:
            logger.exception("Could not read who watches %s", conversation_id)
            return
        text = encode({"type": "presence", "conversation": conversation_id, "people": people})
        for subscription in tuple(self._subscriptions.get(conversation_id, ())):
            if subscription.on_presence is not None and subscription.presence_sent != text:
                subscription.presence_sent = text
                await subscription.on_presence(text)

    def _send_to_others(self, conversation_id: str, frames: list[Frame] | None) -> None:
        """Queue frames (or, with None, a change of presence) for the other processes."""
        if not layer_is_shared():
            return
        if self._outbox is None:
            self._outbox = asyncio.Queue()
            self._forwarder = asyncio.get_running_loop().create_task(self._forward())
        self._outbox.put_nowait((conversation_id, frames))

    def _deliver(self, conversation_id: str, frames: list[Frame]) -> None:
        watchers = self._subscriptions.get(conversation_id)
        if not watchers:
            return
        if frames:
            self.seen(conversation_id, frames[-1].seq)
        size = sum(len(frame.text) for frame in frames)
        for subscription in tuple(watchers):
            subscription.put(frames, size)

    def seen(self, conversation_id: str, seq: int) -> None:
        """The watchers of a conversation have been given (or have read) every event up to
        ``seq``: the poll need not send them to the database for those."""
        if conversation_id in self._subscriptions and seq > self._seen.get(conversation_id, 0):
            self._seen[conversation_id] = seq

    async def _poll_forever(self) -> None:
        """The backstop for lost wake-ups: one query per interval for every conversation
        watched in this process, however many sockets watch them."""
        while True:
            await asyncio.sleep(settings.PARLEY_FEED_POLL_SECONDS)
            watched = list(self._subscriptions)
            if not watched:
                continue
            try:
                latest = await run_db(selectors.latest_seqs, conversation_ids=watched)
            except Exception as exc:
                # The watchers wait for the next wake-up, or the next poll.
                logger.warning("Could not poll the latest events: %r", exc)
                continue
            for conversation_id, seq in latest.items():
                if seq > self._seen.get(conversation_id, 0):
                    self._seen[conversation_id] = seq
                    for subscription in tuple(self._subscriptions.get(conversation_id, ())):
                        subscription.nudge()

    async def _forward(self) -> None:
        """Send batches to other processes in the order they were committed here."""
        layer = get_channel_layer()
        while True:
            conversation_id, frames = await self._outbox.get()
            if frames is None:
                message = {
                    "type": "parley.presence",
                    "origin": process_id(),
                    "conversation": conversation_id,
                }
                try:
                    await layer.group_send(conversation_group_name(conversation_id), message)
                except Exception as exc:
                    LAYER_ERRORS.labels("group_send").inc()
                    logger.warning("Could not forward presence in %s: %r", conversation_id, exc)
                continue
            for start in range(0, len(frames), LAYER_BATCH):
                chunk = frames[start : start + LAYER_BATCH]
                message = {
                    "type": "parley.events",
                    "origin": process_id(),
                    "conversation": conversation_id,
                    "frames": [[f.seq, f.type, f.turn_id, f.text] for f in chunk],
                }
                try:
                    await layer.group_send(conversation_group_name(conversation_id), message)
                except Exception as exc:
                    # Watchers elsewhere notice the hole, or the quiet, and read the database.
                    LAYER_ERRORS.labels("group_send").inc()
                    logger.warning("Could not forward events of %s: %r", conversation_id, exc)

    async def _ensure_listener(self, layer) -> None:
        if self._listener is not None and not self._listener.done():
            return
        self._channel = await layer.new_channel("parley.hub.")
        self._listener = asyncio.get_running_loop().create_task(
            receive_forever(layer, self._channel, self._heard)
        )
        try:
            await layer.group_add(ACCESS_GROUP, self._channel)
        except Exception as exc:
            # Access lost elsewhere is then noticed at this process's next upkeep.
            LAYER_ERRORS.labels("group_add").inc()
            logger.warning("Could not join %s: %r", ACCESS_GROUP, exc)

    def access_changed(self) -> None:
        """Someone's access was lowered in this process: tell the others, which check theirs at
        once rather than at their next upkeep. Call on the loop."""
        if not layer_is_shared():
            return
        task = asyncio.get_running_loop().create_task(self._send_access_changed())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send_access_changed(self) -> None:
        message = {"type": "parley.access", "origin": process_id()}
        try:
            await get_channel_layer().group_send(ACCESS_GROUP, message)
        except Exception as exc:
            LAYER_ERRORS.labels("group_send").inc()
            logger.warning("Could not tell other processes of an access change: %r", exc)

    def _heard(self, message: dict) -> None:
        """A batch of frames, a change of presence or of someone's access, from another
        process."""
        if message.get("origin") == process_id():
            return
        if message.get("type") == "parley.presence":
            self._presence_changed(message["conversation"], forward=False)
            return
        if message.get("type") == "parley.access":
            for listener in self.on_access_changed:
                listener()
            return
        frames = [Frame(*item) for item in message.get("frames", ())]
        self._deliver(message["conversation"], frames)


hub = Hub()

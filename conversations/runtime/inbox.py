"""Control inboxes: how Stop, steering and wake-ups reach a running turn from any process.

Each running turn has a channel of its own on the channel layer (its inbox, recorded on the
turn). A message for a turn running in this process is handed over directly, skipping the
layer's round trip; any other goes through the layer. Messages are wake-ups only: what they
announce is already in the database, and a turn that misses one finds out from there.
"""

import asyncio
import logging
from collections.abc import Callable

from channels.layers import get_channel_layer

from core.metrics import LAYER_ERRORS
from core.process import receive_forever

logger = logging.getLogger(__name__)

Handler = Callable[[dict], None]


class Inbox:
    """One turn's inbox, open until :meth:`close`: its messages go to ``handler``."""

    def __init__(self, inboxes: "Inboxes", name: str, handler: Handler, layer):
        self.name = name
        self._inboxes = inboxes
        self._reader = asyncio.get_running_loop().create_task(
            receive_forever(layer, name, handler), name=f"inbox-{name}"
        )

    def close(self) -> None:
        self._reader.cancel()
        self._inboxes._local.pop(self.name, None)


class Inboxes:
    """The inboxes of the turns running in this process, and sending to any turn's inbox."""

    def __init__(self):
        self._local: dict[str, Handler] = {}
        self._sending: set[asyncio.Task] = set()

    async def open(self, handler: Handler) -> Inbox:
        """A new inbox on the channel layer whose messages go to ``handler``."""
        layer = get_channel_layer()
        name = await layer.new_channel("parley.turn.")
        self._local[name] = handler
        return Inbox(self, name, handler, layer)

    def send(self, inbox: str, message: dict) -> None:
        """Deliver a control message (on the server loop). A turn running in this process gets
        it at once; any other through the layer."""
        if (handler := self._local.get(inbox)) is not None:
            handler(message)
            return
        task = asyncio.get_running_loop().create_task(self._send(inbox, message))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, inbox: str, message: dict) -> None:
        try:
            await get_channel_layer().send(inbox, message)
        except Exception as exc:
            LAYER_ERRORS.labels("send").inc()
            logger.warning("Could not reach %s (%r); the turn reads the database", inbox, exc)

"""A streamed HTTP response's write buffer under Daphne, bounded as a socket's is (see
core.sockets' ``Flow``): ``ResponseFlow`` says when the client has stopped taking what it is
sent, so that a stream waits instead of piling up in the server's memory; and what such buffers
hold in this process (``parley_tail_unsent_bytes``).

Daphne's ``send`` never waits for the network: whatever is written to a response whose client
does not read stays in the process, a whole stream for each such client. Under Daphne each HTTP
request's scope carries a factory of these (``scope["parley.response_flow"]``, see config.asgi);
a streaming view makes one when its stream starts, on the server loop.
"""

import asyncio
import weakref

from django.conf import settings
from prometheus_client import Gauge
from twisted.internet.abstract import FileDescriptor
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from core.wakeup import Wakeup

_open: "weakref.WeakSet[ResponseFlow]" = weakref.WeakSet()


@implementer(IPushProducer)
class Producer:
    """Whether a connection's client keeps up: the producer Twisted tells when the connection's
    write buffer passes ``PARLEY_SOCKET_BUFFER_BYTES`` (pause) and when it has drained
    (resume). A socket's (core.sockets' ``Flow``) and a streamed response's (``ResponseFlow``)."""

    def __init__(self):
        self._drained = Wakeup(is_set=True)

    @property
    def full(self) -> bool:
        return not self._drained.is_set()

    async def drained(self, timeout: float) -> bool:
        """Wait until the buffer has drained: False if it is still full after ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                await self._drained.wait()
        except TimeoutError:
            return False
        return True

    # IPushProducer, called by Twisted (the connection, or the HTTP channel for it).

    def pauseProducing(self):
        self._drained.clear()

    def resumeProducing(self):
        self._drained.set()

    def stopProducing(self):
        # The connection is gone: nothing may wait for it any more.
        self._drained.set()


class ResponseFlow(Producer):
    """A streamed response's ``Producer``, registered on Daphne's request (``request``) until
    ``release()``, which must come before the response ends."""

    def __init__(self, request):
        super().__init__()
        self.request = request
        self.transport = request.channel.transport
        self._dropping: asyncio.TimerHandle | None = None
        self.transport.bufferSize = settings.PARLEY_SOCKET_BUFFER_BYTES
        request.registerProducer(self, True)
        _open.add(self)

    def unsent(self) -> int:
        """Bytes written to the response that the process still holds for the client."""
        transport = self.transport
        while not isinstance(transport, FileDescriptor):
            # Under TLS, the connection the TLS layer writes to.
            transport = getattr(transport, "transport", None)
            if transport is None:
                return 0
        if not transport.connected:
            return 0
        return len(transport.dataBuffer) - transport.offset + transport._tempDataLen

    def release(self) -> None:
        """Stop being told about the buffer (idempotent); before the response ends, as Twisted
        asks of a request's producer. (What it holds is still counted until it is collected,
        or dropped: see drop_unless_read.)"""
        request = self.request
        if request.producer is self and getattr(request, "channel", None) is not None:
            request.unregisterProducer()
        self._drained.set()

    def drop_unless_read(self, seconds: float) -> None:
        """A response ended because its client stopped reading: give the client ``seconds`` to
        read what it has, then drop the connection if it has not (else the process would hold
        that buffer for as long as the connection stays open)."""
        self._dropping = asyncio.get_running_loop().call_later(seconds, self._drop)

    def _drop(self) -> None:
        _open.discard(self)
        if self.transport.connected and self.unsent():
            self.transport.abortConnection()


def _unsent_in_tails() -> float:
    return float(sum(flow.unsent() for flow in list(_open)))


UNSENT_BYTES = Gauge(
    "parley_tail_unsent_bytes",
    "Bytes this process holds for streamed responses (tails) that their clients have not read",
)
UNSENT_BYTES.set_function(_unsent_in_tails)

"""``Wakeup``: asyncio.Event's set, clear and wait for what every open socket keeps (its live
frames' queue, its write buffer's flow), without the deque of waiters each Event holds."""

import asyncio


class Wakeup:
    """Like ``asyncio.Event`` (not thread-safe either: used on the loop), but lighter: an Event
    holds a deque for its waiters from the start (about 850 bytes with the Event, two for each
    of thousands of sockets that mostly wait for nothing); a ``Wakeup`` keeps its waiters'
    futures only while they wait."""

    __slots__ = ("_set", "_waiters")

    def __init__(self, is_set: bool = False):
        self._set = is_set
        self._waiters: list[asyncio.Future] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(True)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> bool:
        """Wait until set (at once if it is); cancelled as any await is (``asyncio.timeout``)."""
        if self._set:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = [waiter]
        else:
            self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)
                if not self._waiters:
                    self._waiters = None
        return True

"""SQLite for a server with many threads: write transactions take turns in the order they
asked, in the process, instead of racing in SQLite's busy handler.

The busy handler retries a locked database after sleeping 1, 2, 5, 10 … 100 ms. The thread
that just committed is never asleep, so it takes the lock again at once: one busy writer (an
admin action settling 500 questions, a flood of requests) kept the turns' writers asleep for
seconds while the database was free between its transactions. Here a writer that finds the
lock taken queues, and the lock is handed to the longest-waiting one when it is released.
Across processes (several servers on one SQLite file) SQLite's own locking still applies;
PostgreSQL is the choice for that.
"""

import threading
from collections import deque

from django.db import OperationalError
from django.db.backends.sqlite3 import base


class _FairLock:
    """A lock handed to its waiters in the order they came."""

    def __init__(self):
        self._mutex = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False

    def acquire(self, timeout: float) -> bool:
        with self._mutex:
            if not self._held:
                self._held = True
                return True
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        if waiter.acquire(timeout=timeout):
            return True  # handed over by release()
        with self._mutex:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return False
        return True  # handed over just as the wait ran out

    def release(self) -> None:
        with self._mutex:
            if self._waiters:
                self._waiters.popleft().release()  # still held: now by that waiter
            else:
                self._held = False


_writer = _FairLock()


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_writer = False

    def _start_transaction_under_autocommit(self):
        if not _writer.acquire(timeout=self.settings_dict["OPTIONS"].get("timeout", 5)):
            raise OperationalError("database is locked")
        self._holds_writer = True
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_writer()
            raise

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_writer()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_writer()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._release_writer()

    def _release_writer(self):
        if self._holds_writer:
            self._holds_writer = False
            _writer.release()

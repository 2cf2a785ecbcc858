"""Long-lived database threads for the hot paths (a turn's writes, a feed's reads).

Django's advice under ASGI is not to keep connections per request thread; these threads live as
long as the process, so their connections are opened once and reused for every batch.
"""

import asyncio
import functools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

THREADS = 4
_executor = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="parley-db")


def _call(fn, args, kwargs):
    try:
        return fn(*args, **kwargs)
    except DatabaseError:
        # A broken connection is replaced on the next call instead of failing every call after.
        connection.close()
        raise


async def run_db(fn, /, *args, **kwargs):
    """Run ``fn`` (sync code that uses the ORM) in a database thread and return its result."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, functools.partial(_call, fn, args, kwargs))


def is_transient(exc: BaseException) -> bool:
    """Whether a retry can cure a database error: the connection dropped (a database restart),
    a deadlock or lock timeout chose this transaction, or PostgreSQL ended a session left idle in
    a transaction (this process stalled). Not integrity or programming errors."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return getattr(exc.__cause__, "sqlstate", None) == IDLE_IN_TRANSACTION_TIMEOUT


IDLE_IN_TRANSACTION_TIMEOUT = "25P03"  # PostgreSQL's SQLSTATE, raised as an InternalError


async def run_db_retrying(fn, /, *args, **kwargs):
    """Like :func:`run_db`, trying again with backoff while the database is away (for up to
    ``PARLEY_DB_RETRY_SECONDS``). For the turn runtime's writes: each is one transaction, so a
    failed attempt left nothing behind and a retry duplicates nothing."""
    deadline = time.monotonic() + settings.PARLEY_DB_RETRY_SECONDS
    delay, attempts = 0.05, 0
    while True:
        try:
            result = await run_db(fn, *args, **kwargs)
        except DatabaseError as exc:
            attempts += 1
            if not is_transient(exc) or time.monotonic() + delay > deadline:
                raise
            # Once per outage and caller, not once per attempt: a thousand watchers wait too.
            log = logger.warning if attempts == 1 else logger.debug
            log("%s failed (%s); trying again with backoff", fn.__name__, str(exc).strip())
        else:
            if attempts:
                logger.info("%s succeeded after %d retries", fn.__name__, attempts)
            return result
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


def close_connections() -> None:
    """Close every database thread's connection (before a test database is dropped).

    A connection can only be closed by its own thread, so each thread runs one closing task;
    the barrier keeps any thread from taking two.
    """
    barrier = threading.Barrier(THREADS)

    def close():
        connection.close()
        barrier.wait(timeout=10)

    for future in [_executor.submit(close) for _ in range(THREADS)]:
        future.result()

"""Long-lived database threads for the hot paths (a turn's writes, a feed's reads).

Django's advice under ASGI is not to keep connections per request thread; these threads live as
long as the process, so their connections are opened once and reused for every batch.
"""

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor

from django.db import DatabaseError, connection

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

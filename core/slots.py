"""How many connections of a kind (sockets, tails, MCP sessions) one person holds open at once,
over every process: each open connection holds a ``Slot``, taken when it opens and given back
however it ends; past the person's limit none is given and the connection is refused.

Without Redis each process counts its own, in memory. With Redis (``PARLEY_REDIS_URL``, or
through Sentinel: see core.redis_clients) the count is shared: each person's slots of a kind
are a sorted set, each member scored by when its lease lapses. A slot is taken in one script
that drops lapsed members, counts and adds (so two processes cannot both take the last one);
the process renews its slots' leases every third of ``PARLEY_TURN_LEASE_SECONDS``, so the
slots of a process that dies lapse within a lease, and a slot is removed the moment its
connection ends. A slot whose holder is dropped without giving it back (a response never
started) is forgotten when it is collected, and lapses on Redis.

Should Redis be away, connections are let through uncounted (and it is logged): the limit is a
guard, not a reason to refuse everyone.
"""

import asyncio
import itertools
import logging
import threading
import weakref

from django.conf import settings

from core import redis_clients
from core.metrics import LIMIT_REFUSALS
from core.process import process_id, server_loop

logger = logging.getLogger(__name__)

SOCKETS = "sockets"
TAILS = "tails"
MCP_SESSIONS = "mcp_sessions"
# The setting holding each kind's limit.
LIMITS = {
    SOCKETS: "PARLEY_MAX_SOCKETS_PER_PERSON",
    TAILS: "PARLEY_MAX_TAILS_PER_PERSON",
    MCP_SESSIONS: "PARLEY_MAX_MCP_SESSIONS_PER_PERSON",
}
# What a refused client is told to wait before trying again: a slot is free as soon as one of
# its person's connections ends, which nobody can foresee.
RETRY_AFTER_SECONDS = 5

_ids = itertools.count(1)
_lock = threading.Lock()
# This process's slots: each slot's id → its (kind, person), and each (kind, person) → ids.
_held: dict[str, tuple[str, int]] = {}
_by_person: dict[tuple[str, int], set[str]] = {}


def limit(kind: str) -> int:
    return getattr(settings, LIMITS[kind])


class Slot:
    """One connection's place among its person's connections of a kind. ``release()`` it when
    the connection ends (any number of times); one never released is forgotten when it is
    collected."""

    __slots__ = ("__weakref__", "_finalizer", "id", "kind", "user_id")

    def __init__(self, kind: str, user_id: int, slot_id: str):
        self.kind, self.user_id, self.id = kind, user_id, slot_id
        self._finalizer = weakref.finalize(self, _forget, slot_id, True)
        self._finalizer.atexit = False

    async def release(self) -> None:
        """Give the slot back (on the server loop; a no-op once given back)."""
        if self._finalizer.detach() is None:
            return
        _forget(self.id, False)
        if _redis_url():
            await _redis.remove(self.kind, self.user_id, self.id)


def _forget(slot_id: str, collected: bool) -> None:
    with _lock:
        key = _held.pop(slot_id, None)
        if key is None:
            return
        ids = _by_person[key]
        ids.discard(slot_id)
        if not ids:
            del _by_person[key]
    if collected and _redis_url():
        # Dropped without being given back: removed on Redis soon (it lapses anyway).
        server_loop.call_soon(_remove_later, key, slot_id)


def _remove_later(key: tuple[str, int], slot_id: str) -> None:
    task = asyncio.get_running_loop().create_task(_redis.remove(*key, slot_id))
    _redis.background.add(task)
    task.add_done_callback(_redis.background.discard)


def _redis_url():
    """Where the shared count is (``PARLEY_REDIS_URL``, or the sentinels'); empty: nowhere."""
    return redis_clients.target()


def _register(kind: str, user_id: int, *, most: int | None) -> Slot | None:
    """Note a new slot of this process's, unless the person holds ``most`` here already."""
    slot_id = f"{process_id()}:{next(_ids)}"
    with _lock:
        ids = _by_person.setdefault((kind, user_id), set())
        if most is not None and len(ids) >= most:
            if not ids:
                del _by_person[(kind, user_id)]
            return None
        # Counted and taken under the lock: two connections cannot both take the last slot.
        ids.add(slot_id)
        _held[slot_id] = (kind, user_id)
    return Slot(kind, user_id, slot_id)


async def acquire(kind: str, user_id: int) -> Slot | None:
    """A slot of ``kind`` for the person, or None if they hold as many as they may (counted
    over every process on Redis). On the server loop."""
    if not _redis_url():
        slot = _register(kind, user_id, most=limit(kind))
    else:
        slot = _register(kind, user_id, most=None)
        if not await _redis.take(kind, user_id, slot.id, limit(kind)):
            _forget(slot.id, False)
            slot._finalizer.detach()
            slot = None
    if slot is None:
        LIMIT_REFUSALS.labels(kind).inc()
    return slot


def acquire_blocking(kind: str, user_id: int) -> Slot | None:
    """``acquire`` from a thread other than the server loop's (a request's, a database
    thread)."""
    if not _redis_url():
        slot = _register(kind, user_id, most=limit(kind))
        if slot is None:
            LIMIT_REFUSALS.labels(kind).inc()
        return slot
    loop = server_loop.loop
    if loop is None or loop.is_closed():
        raise RuntimeError("Slots on Redis are taken on the server loop, which is not running.")
    return asyncio.run_coroutine_threadsafe(acquire(kind, user_id), loop).result(timeout=10)


# Redis -------------------------------------------------------------------------------------

# KEYS[1] the person's set; ARGV: the limit, the lease in ms, the slot's id. Redis's own clock,
# so that processes whose clocks differ agree on what has lapsed.
_TAKE = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
# KEYS[1] the person's set; ARGV: the lease in ms, the slot's id. Only a slot still there is
# renewed: one removed meanwhile (its connection ended) is not brought back.
_RENEW = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZADD', KEYS[1], 'XX', ms + tonumber(ARGV[1]), ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 1
"""


class _Redis:
    """The shared count, on the server loop: a client, its scripts, and the renewer."""

    def __init__(self):
        self._client = None
        self._loop = None
        self._take = self._renew = None
        self._renewer: asyncio.Task | None = None
        self._away = False
        self.background: set[asyncio.Task] = set()

    def _ready(self):
        """The client, for the running loop and the configured Redis."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop != (loop, _redis_url()):
            self._client = redis_clients.async_client(socket_timeout=5, socket_connect_timeout=5)
            self._loop = (loop, _redis_url())
            self._take = self._client.register_script(_TAKE)
            self._renew = self._client.register_script(_RENEW)
        return self._client

    def _renewing(self) -> None:
        """Renew this process's slots from now on (once one was taken on Redis)."""
        loop = asyncio.get_running_loop()
        if self._renewer is None or self._renewer.done() or self._renewer.get_loop() is not loop:
            self._renewer = loop.create_task(self._renew_forever(), name="parley-slots")

    @staticmethod
    def key(kind: str, user_id: int) -> str:
        return f"{settings.PARLEY_REDIS_PREFIX}:slots:{kind}:{user_id}"

    @staticmethod
    def lease_ms() -> int:
        return int(settings.PARLEY_TURN_LEASE_SECONDS * 1000)

    async def take(self, kind: str, user_id: int, slot_id: str, most: int) -> bool:
        self._ready()
        try:
            taken = await self._take(
                keys=[self.key(kind, user_id)], args=[most, self.lease_ms(), slot_id]
            )
        except Exception as exc:
            self._went_away(exc)
            return True
        self._back()
        self._renewing()
        return bool(taken)

    async def remove(self, kind: str, user_id: int, slot_id: str) -> None:
        client = self._ready()
        try:
            await client.zrem(self.key(kind, user_id), slot_id)
        except Exception as exc:
            # It lapses within a lease.
            self._went_away(exc)

    async def renew(self) -> None:
        """Renew every slot this process holds, in one round trip."""
        with _lock:
            held = list(_held.items())
        if not held:
            return
        self._ready()
        lease = self.lease_ms()
        async with self._client.pipeline(transaction=False) as pipe:
            for slot_id, (kind, user_id) in held:
                await self._renew(
                    keys=[self.key(kind, user_id)], args=[lease, slot_id], client=pipe
                )
            await pipe.execute()

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(settings.PARLEY_TURN_LEASE_SECONDS / 3)
            try:
                await self.renew()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._went_away(exc)
            else:
                self._back()

    def _went_away(self, exc: Exception) -> None:
        if not self._away:
            self._away = True
            logger.warning("Redis is away (%r): people's open connections are not counted", exc)

    def _back(self) -> None:
        if self._away:
            self._away = False
            logger.info("Redis is back: people's open connections are counted again")


_redis = _Redis()

"""Redis clients that follow the primary: one Redis at ``PARLEY_REDIS_URL``, or whichever one the
sentinels of ``PARLEY_REDIS_SENTINELS`` name as the primary now (see config/settings.py).

Through Sentinel a client asks the sentinels for the primary's address when it connects, and
connects again (asking again) when a connection fails, so after a failover it reaches the
promoted replica. The channel layer does the same itself (channels_redis' ``create_pool``); the
slots (core.slots), the readiness check (core.health) and Django's cache use these.
"""

from django.conf import settings
from django.core.cache.backends.redis import RedisCache, RedisCacheClient


def target():
    """Where Parley's Redis is, comparable and hashable (a client made for one is not used for
    another); empty when there is none."""
    if settings.PARLEY_REDIS_SENTINELS:
        return (
            tuple(settings.PARLEY_REDIS_SENTINELS),
            settings.PARLEY_REDIS_SENTINEL_MASTER,
            settings.PARLEY_REDIS_DB,
        )
    return settings.PARLEY_REDIS_URL


def _own_host():
    """Parley's Redis as a channel-layer host entry: a URL, or the sentinels' dict."""
    layer = settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("hosts", [])
    if settings.PARLEY_REDIS_SENTINELS:
        return next(host for host in layer if isinstance(host, dict) and "sentinels" in host)
    return settings.PARLEY_REDIS_URL


def async_client(host=None, **options):
    """A ``redis.asyncio`` client for ``host`` (a channel-layer host entry: a URL, or a dict of
    connection arguments with an ``address``, or with ``sentinels`` and ``master_name``), by
    default Parley's own Redis; ``options`` are more connection arguments (timeouts)."""
    from redis import asyncio as aioredis

    host = _own_host() if host is None else host
    if isinstance(host, str):
        return aioredis.Redis.from_url(host, **options)
    host = {**host, **options}
    if "address" in host:
        return aioredis.Redis.from_url(host.pop("address"), **host)
    if "master_name" in host:
        sentinels, name = host.pop("sentinels"), host.pop("master_name")
        sentinel = aioredis.Sentinel(sentinels, sentinel_kwargs=host.pop("sentinel_kwargs", None))
        return sentinel.master_for(name, **host)
    return aioredis.Redis(**host)


class SentinelCacheClient(RedisCacheClient):
    """Django's Redis cache client, on the primary the sentinels name (OPTIONS: ``sentinels``,
    ``master_name``, ``sentinel_kwargs`` and connection arguments). Every operation, reads
    included, goes to the primary."""

    def __init__(self, servers, *, sentinels, master_name, sentinel_kwargs=None, **options):
        super().__init__(servers, **options)
        self._sentinel = (sentinels, master_name, sentinel_kwargs)

    def _get_connection_pool(self, write):
        if 0 not in self._pools:
            sentinels, name, sentinel_kwargs = self._sentinel
            sentinel = self._lib.sentinel.Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs)
            self._pools[0] = self._lib.sentinel.SentinelConnectionPool(
                name, sentinel, **self._pool_options
            )
        return self._pools[0]


class SentinelRedisCache(RedisCache):
    """``django.core.cache.backends.redis.RedisCache`` through Sentinel (Django's own has no
    Sentinel support)."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SentinelCacheClient

"""Parley's settings for Redis through Sentinel build clients that follow the primary: the channel
layer, Django's cache, the slots (core.slots) and /readyz's ping (core.health) each reach the
primary the sentinels name, before a failover and after it (real Redis and sentinels from
Debian's redis-server, started by ops.servers.RedisSentinels)."""

import asyncio
import runpy
import uuid
from pathlib import Path

import pytest
import redis
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from core import health, redis_clients, slots
from ops.sentinels import SENTINEL_TEMPLATE, RedisSentinels

pytestmark = pytest.mark.once

SETTINGS = "config/settings.py"


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory):
    servers = RedisSentinels(tmp_path_factory.mktemp("sentinels")).start()
    yield servers
    servers.stop()


def sentinel_settings(monkeypatch, sentinels, **extra) -> dict:
    """config/settings.py's values with the environment an operator would set."""
    for name in ("REDIS_URL", "CHANNEL_LAYER_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PARLEY_REDIS_SENTINELS", ",".join(sentinels.sentinels))
    monkeypatch.setenv("PARLEY_REDIS_SENTINEL_MASTER", sentinels.master_name)
    for name, value in extra.items():
        monkeypatch.setenv(name, value)
    values = runpy.run_path(SETTINGS)
    return {
        name: values[name]
        for name in (
            "CHANNEL_LAYERS",
            "CACHES",
            "PARLEY_REDIS_URL",
            "PARLEY_REDIS_SENTINELS",
            "PARLEY_REDIS_SENTINEL_MASTER",
            "PARLEY_REDIS_DB",
            "PARLEY_REDIS_PASSWORD",
        )
    }


def test_the_settings_name_the_sentinels_for_every_client(monkeypatch, sentinels):
    built = sentinel_settings(monkeypatch, sentinels, PARLEY_REDIS_DB="3")
    ports = [int(address.rpartition(":")[2]) for address in sentinels.sentinels]
    assert built["PARLEY_REDIS_SENTINELS"] == [("127.0.0.1", port) for port in ports]
    assert built["PARLEY_REDIS_URL"] == ""
    layer = built["CHANNEL_LAYERS"]["default"]
    assert layer["BACKEND"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    (host,) = layer["CONFIG"]["hosts"]
    assert host["sentinels"] == built["PARLEY_REDIS_SENTINELS"]
    assert (host["master_name"], host["db"], host["password"]) == ("parley", 3, None)
    cache = built["CACHES"]["default"]
    assert cache["BACKEND"] == "core.redis_clients.SentinelRedisCache"
    assert cache["OPTIONS"]["master_name"] == "parley" and cache["OPTIONS"]["db"] == 3
    password = sentinel_settings(monkeypatch, sentinels, PARLEY_REDIS_PASSWORD="s3cret")
    assert password["CACHES"]["default"]["OPTIONS"]["password"] == "s3cret"
    assert password["CHANNEL_LAYERS"]["default"]["CONFIG"]["hosts"][0]["password"] == "s3cret"


def test_one_redis_or_the_sentinels_not_both(monkeypatch, sentinels):
    with pytest.raises(ImproperlyConfigured, match="not both"):
        sentinel_settings(monkeypatch, sentinels, REDIS_URL="redis://127.0.0.1:6379/0")


async def test_every_client_follows_the_primary_through_a_failover(monkeypatch, sentinels):
    built = sentinel_settings(monkeypatch, sentinels)
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    with override_settings(**built, PARLEY_REDIS_PREFIX=prefix, PARLEY_MAX_SOCKETS_PER_PERSON=1):
        caches.close_all()
        await _each_client_on(sentinels.primary.port, built, prefix, round=1)
        old = await asyncio.to_thread(sentinels.kill_primary)
        new = await asyncio.to_thread(sentinels.wait_for_failover, 60)
        assert new.port != old.port
        # Until they reconnect, the clients may fail (the primary they knew is gone).
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            try:
                await _each_client_on(new.port, built, prefix, round=2)
                break
            except (AssertionError, redis.RedisError):
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.5)
        caches.close_all()


async def _each_client_on(port: int, built: dict, prefix: str, round: int) -> None:
    """Each client, as the settings build it, writes where only the primary on ``port`` has it."""
    primary = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    # The cache (Django's, through SentinelRedisCache).
    key = f"{prefix}-failover"
    await asyncio.to_thread(caches["default"].set, key, round)
    assert await asyncio.to_thread(caches["default"].get, key) == round
    assert len(primary.keys(f"*:{key}")) == 1
    # The slots: one socket for person 7, counted on the primary; a second refused.
    person = 7000 + round
    held = await slots.acquire(slots.SOCKETS, person)
    assert held is not None
    assert primary.zcard(f"{prefix}:slots:{slots.SOCKETS}:{person}") == 1
    assert await slots.acquire(slots.SOCKETS, person) is None
    await held.release()
    # /readyz's ping, and the client it is made with.
    (host,) = built["CHANNEL_LAYERS"]["default"]["CONFIG"]["hosts"]
    await health._ping(host)
    client = redis_clients.async_client(host)
    try:
        assert (await client.connection_pool.get_master_address())[1] == port
    finally:
        await client.aclose()
    # The channel layer: a message from one layer to another, over the primary.
    sender, receiver = (RedisPubSubChannelLayer(hosts=[host]) for _ in range(2))
    try:
        channel = await receiver.new_channel()
        await receiver.group_add("failover", channel)
        assert any("failover" in name for name in primary.pubsub_channels())
        await sender.group_send("failover", {"type": "x", "round": round})
        assert (await asyncio.wait_for(receiver.receive(channel), 10))["round"] == round
    finally:
        await sender.flush()
        await receiver.flush()
    primary.close()


def test_the_readme_shows_the_sentinel_configuration_the_tests_use():
    """README's *Redis Sentinel* shows ops/deploy/sentinel.conf's settings, line for line."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text().split("### Redis Sentinel", 1)[1]
    shown = readme.split("```\nport ", 1)[1].split("\n```", 1)[0].splitlines()
    shown[0] = "port " + shown[0]
    used = [
        line
        for line in (root / "ops" / "deploy" / "sentinel.conf").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert [line for line in shown if not line.startswith("#")] == used
    assert SENTINEL_TEMPLATE == root / "ops" / "deploy" / "sentinel.conf"

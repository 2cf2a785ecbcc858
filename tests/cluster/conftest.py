"""Several real Daphne processes sharing PostgreSQL and a Redis channel layer, as the README's
"Scaling out" recommends. These tests run in `make test`'s PostgreSQL pass, where ops.servers
started both servers for the run (PARLEY_TEST_REDIS_URL, PARLEY_TEST_PGDATA)."""

import os
from pathlib import Path

import pytest
from django.db import connection

from ops.sentinels import RedisSentinels
from ops.servers import Postgres, Redis
from tests.conftest import LiveServer

# Short enough that a dead process's turns are reaped within a test, long enough that a loaded
# machine does not miss a renewal (upkeep renews every third of it).
LEASE_SECONDS = 6


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Every test in this folder is a cluster test (deselected from the SQLite pass), whether or
    not its module says so."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(autouse=True)
def _on_postgresql():
    assert connection.vendor == "postgresql", "the cluster tests run in the PostgreSQL pass"


@pytest.fixture
def redis_url() -> str:
    return os.environ["PARLEY_TEST_REDIS_URL"]


@pytest.fixture
def own_redis(tmp_path) -> Redis:
    """A Redis of this test's own, which it may stop and start again."""
    redis = Redis(tmp_path / "redis").start()
    yield redis
    redis.stop()


@pytest.fixture
def sentinels(tmp_path) -> RedisSentinels:
    """A Redis primary, its replica and three sentinels of this test's own."""
    servers = RedisSentinels(tmp_path / "sentinels").start()
    yield servers
    servers.stop()


@pytest.fixture
def postgres(transactional_db) -> Postgres:
    """The run's PostgreSQL (the test database lives there), which a test may restart."""
    data, port = Path(os.environ["PARLEY_TEST_PGDATA"]), int(os.environ["PARLEY_TEST_PGPORT"])
    yield Postgres(data, port, durable=False)  # as ops.servers started it
    # This test's own connection died with a restart: the next query opens a new one.
    connection.close()


def cluster_env(redis_url: str, **extra) -> dict:
    return {
        "REDIS_URL": redis_url,
        "PARLEY_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
        "PARLEY_SELECTION_POLL_SECONDS": "1",
        "PARLEY_FEED_POLL_SECONDS": "1",
        **extra,
    }


@pytest.fixture
def make_node(make_server, redis_url):
    """Start one more Daphne of the cluster (on the run's Redis unless told otherwise)."""

    def start(*, redis: str | None = None, **extra) -> LiveServer:
        return make_server(**cluster_env(redis or redis_url, **extra))

    return start


@pytest.fixture
def nodes(make_node) -> tuple[LiveServer, LiveServer]:
    """Two processes, A and B."""
    return make_node(), make_node()

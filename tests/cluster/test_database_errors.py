"""Which PostgreSQL errors the turn runtime retries (core.dbthreads.is_transient), seen
on the real server rather than constructed."""

import time
from contextlib import contextmanager

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from conversations.models import Workspace
from core.dbthreads import is_transient
from tests.pgbouncer import behind_pgbouncer, direct_database

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def test_a_session_ended_for_idling_in_a_transaction_is_retried(people):
    """A process that stalls inside a transaction has its session ended by PostgreSQL (see
    settings); when it resumes, the error it meets must count as one a retry cures."""
    try:
        with pytest.raises(DatabaseError) as ended, transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL idle_in_transaction_session_timeout = '50ms'")
                # Inside the transaction: behind PgBouncer each transaction may have a session
                # (a server connection) of its own.
                cursor.execute("SELECT pg_backend_pid()")
                pid = cursor.fetchone()[0]
            deadline = time.monotonic() + 30
            while _session_alive(pid):
                assert time.monotonic() < deadline, "PostgreSQL did not end the idle session"
                time.sleep(0.05)
            Workspace.objects.count()
        assert is_transient(ended.value), repr(ended.value)
    finally:
        connection.close()


def test_after_a_restart_the_pool_hands_out_a_working_connection(postgres):
    """A restart breaks every idle connection in the pool. The first one found broken has the
    pool check all the others (config.postgresql), so the next query gets a fresh connection;
    psycopg alone would meet the ten broken ones one by one, with a growing sleep between, and
    give up at the pool's timeout. The pool here connects to PostgreSQL itself: behind PgBouncer
    (the pass's own connection) a restart breaks none of it (tests/cluster/test_pgbouncer.py)."""
    with _straight_to_postgresql() as direct:
        pool = direct.pool
        idle = [pool.getconn() for _ in range(10)]
        for conn in idle:
            pool.putconn(conn)
        assert pool.get_stats()["pool_available"] >= 10
        postgres.restart()
        with direct.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
        # All ten were found broken in one check, not one request at a time.
        assert pool.get_stats()["connections_lost"] >= 9


@contextmanager
def _straight_to_postgresql():
    if behind_pgbouncer():
        with direct_database() as direct:
            yield direct
    else:
        connection.close()
        yield connection


def test_an_integrity_error_is_not_retried(people):
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        Workspace.objects.create(slug=people.workspace.slug, name="Twice")
    assert not is_transient(refused.value)


def _session_alive(pid: int) -> bool:
    from psycopg import connect

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with connect(**{k: v for k, v in params.items() if k != "prepare_threshold"}) as other:
        row = other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row is not None

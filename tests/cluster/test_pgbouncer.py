"""PgBouncer in transaction mode (ops/deploy/pgbouncer.ini), which the whole PostgreSQL pass runs
behind (ops.servers): that it really does, and that each setting PARLEY_DB_PGBOUNCER changes is
needed there. In transaction mode each transaction may run on another server connection, so
what a session keeps (a prepared statement, a cursor) is met by the next transaction only when
PgBouncer happens to hand it the same connection: the tests here take every other server
connection away first, so that it never does."""

import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from conversations.models import Workspace
from core.dbthreads import is_transient
from ops.servers import PgBouncer
from tests.conftest import events_until_terminal, receive_json, wait_for_turn_end
from tests.helpers import ask, assert_contiguous, create_conversation, reply, start, wait_pending
from tests.pgbouncer import admin, behind_pgbouncer

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _behind_pgbouncer():
    assert behind_pgbouncer(), "the PostgreSQL pass runs behind PgBouncer (ops.servers)"
    # Each test starts with no connection of its own held.
    connection.close()
    yield
    connection.close()


def test_the_pass_runs_through_pgbouncer_in_transaction_mode():
    config = {row["key"]: row["value"] for row in admin("SHOW CONFIG")}
    assert config["pool_mode"] == "transaction"
    with connection.cursor() as cursor:
        cursor.execute("SELECT inet_server_port()")
        server_port = cursor.fetchone()[0]
    # Django talks to PgBouncer's port; the session it gets is on PostgreSQL's.
    assert int(connection.settings_dict["PORT"]) == int(config["listen_port"])
    assert server_port == int(os.environ["PARLEY_TEST_PGPORT"]) != int(config["listen_port"])
    pools = [row for row in admin("SHOW POOLS") if row["database"] == _database()]
    assert [pool["pool_mode"] for pool in pools] == ["transaction"]


def test_the_settings_pgbouncer_needs_whatever_the_url_asks():
    """PARLEY_DB_PGBOUNCER wins over what a DATABASE_URL asks for."""
    url = "postgres://u:p@127.0.0.1:6432/parley?server_side_binding=true&prepare_threshold=1"
    database = _settings_database({"DATABASE_URL": url, "PARLEY_DB_PGBOUNCER": "1"})
    assert database["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert database["OPTIONS"]["server_side_binding"] is False
    assert database["OPTIONS"]["prepare_threshold"] is None
    assert "options" not in database["OPTIONS"]
    # Straight to PostgreSQL, Parley keeps its startup option (the idle-in-transaction limit).
    direct = _settings_database({"DATABASE_URL": url, "PARLEY_DB_PGBOUNCER": "0"})
    assert "idle_in_transaction_session_timeout" in direct["OPTIONS"]["options"]
    assert not direct.get("DISABLE_SERVER_SIDE_CURSORS")


def test_prepared_statements_break_behind_pgbouncer_and_parley_makes_none():
    """psycopg prepares a statement it runs often (here at once) and later runs it by name: on
    another server connection that name does not exist. Parley's connections prepare nothing."""
    query = "SELECT count(*) FROM conversations_workspace WHERE slug <> %s"
    params = connection.get_connection_params()
    preparing = {**params, "prepare_threshold": 0, "cursor_factory": psycopg.Cursor}
    with psycopg.connect(**preparing, autocommit=True) as client:
        client.execute(query, ["x"])
        with _other_server_connections_taken():
            with pytest.raises(psycopg.errors.InvalidSqlStatementName, match="does not exist"):
                client.execute(query, ["x"])
    with psycopg.connect(**params, autocommit=True) as client:
        for _ in range(5):
            client.execute(query, ["x"])
        with _other_server_connections_taken():
            assert client.execute(query, ["x"]).fetchone() == (0,)


def test_iterator_reads_a_large_queryset_across_server_connections(settings):
    Workspace.objects.bulk_create(
        Workspace(slug=f"w{n}", name=f"Workspace {n}") for n in range(1000)
    )
    everything = Workspace.objects.order_by("pk").values_list("slug", flat=True)
    rows = everything.iterator(chunk_size=100)
    first = [next(rows) for _ in range(100)]
    with _other_server_connections_taken():
        rest = list(rows)
    assert first + rest == [f"w{n}" for n in range(1000)]
    connection.close()

    # A server-side cursor (Django's default) lives in the session that declared it.
    connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = False
    try:
        rows = everything.iterator(chunk_size=100)
        first = [next(rows) for _ in range(100)]
        with _other_server_connections_taken():
            # Django's error, or psycopg's when closing the cursor that is not there either.
            with pytest.raises((DatabaseError, psycopg.errors.InvalidCursorName), match="does not"):
                list(rows)
    finally:
        connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True


def test_a_session_idle_in_a_transaction_is_ended_by_pgbouncer():
    """PostgreSQL's own limit cannot be passed through PgBouncer (settings): PgBouncer's
    idle_transaction_timeout ends the session instead, releasing its locks, and what the process
    meets when it resumes is an error a retry cures."""
    try:
        with pytest.raises(DatabaseError) as ended, transaction.atomic():
            Workspace.objects.create(slug="held", name="Held")
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid = cursor.fetchone()[0]
            deadline = time.monotonic() + 60
            while _session_alive(pid):
                assert time.monotonic() < deadline, "the session idle in a transaction lived on"
                time.sleep(0.1)
            Workspace.objects.count()
        assert is_transient(ended.value), repr(ended.value)
    finally:
        connection.close()
    assert not Workspace.objects.filter(slug="held").exists()


def test_a_postgresql_restart_breaks_no_connection_of_the_pool(postgres):
    """Behind PgBouncer, Parley's pooled connections are to PgBouncer, which outlives the restart
    and opens new server connections."""
    pool = connection.pool
    idle = [pool.getconn() for _ in range(5)]
    for conn in idle:
        pool.putconn(conn)
    lost = pool.get_stats().get("connections_lost", 0)
    postgres.restart()
    for _ in range(5):
        assert Workspace.objects.count() >= 0
        connection.close()
    assert pool.get_stats().get("connections_lost", 0) == lost


async def test_a_daphne_behind_pgbouncer_streams_a_turn_and_takes_an_answer(make_node, people):
    # PgBouncer's address, as an operator writes it (the admin console's, another database).
    pgbouncer = os.environ["PARLEY_TEST_PGBOUNCER_ADMIN_URL"].rsplit("/", 1)[0]
    server = make_node(DATABASE_URL=f"{pgbouncer}/{_database()}", PARLEY_DB_PGBOUNCER="1")
    client = server.client(people.alice)
    cid = await asyncio.to_thread(create_conversation, client)
    async with server.connect(cid, people.alice) as ws:
        assert (await receive_json(ws))["type"] == "ws.ready"
        turn = await asyncio.to_thread(
            start, client, cid, [{"say": "Before"}, ask(kind="text"), {"say": "After"}]
        )
        pending = await asyncio.to_thread(wait_pending, client, cid, 60)
        answered = await asyncio.to_thread(reply, client, pending["id"], answer="through")
        assert answered.status_code == 200, answered.text
        watched = await events_until_terminal(ws, turn, timeout=60)
    await asyncio.to_thread(wait_for_turn_end, client, cid, 60)
    client.close()
    assert watched[-1]["type"] == "turn.completed"
    assert_contiguous(watched, watched[0]["seq"], watched[-1]["seq"])
    assert "through" in json.dumps(watched)


def test_the_readme_shows_the_configuration_the_tests_run():
    """The lines the README gives operators are lines of ops/deploy/pgbouncer.ini, which
    ops.servers starts PgBouncer with."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### PgBouncer (transaction mode)", 1)[1]
    shown = section.split("```ini\n", 1)[1].split("```", 1)[0].splitlines()
    used = PgBouncer.TEMPLATE.read_text().splitlines()
    assert shown and [line for line in shown if line not in used] == []
    written = Path(os.environ["PARLEY_TEST_PGDATA"]).parent / "pgbouncer" / "pgbouncer.ini"
    assert "pool_mode = transaction" in written.read_text().splitlines()


@contextmanager
def _other_server_connections_taken():
    """Every idle server connection of the test database's pool, each held in a transaction by
    another client: the next transaction gets a server connection of its own."""
    params = connection.get_connection_params()
    params.pop("context", None)
    holders = []
    try:
        for _ in range(150):
            pool = next(p for p in admin("SHOW POOLS") if p["database"] == _database())
            if pool["sv_idle"] + pool["sv_used"] == 0:
                break
            holder = psycopg.connect(**params)  # not autocommit: BEGIN with the first query
            holder.execute("SELECT 1")
            holders.append(holder)
        else:
            raise AssertionError("PgBouncer kept handing out idle server connections")
        yield
    finally:
        for holder in holders:
            holder.close()


def _database() -> str:
    return connection.settings_dict["NAME"]


def _session_alive(pid: int) -> bool:
    with psycopg.connect(os.environ["PARLEY_TEST_PG_DIRECT_URL"], autocommit=True) as direct:
        row = direct.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row is not None


def _settings_database(env: dict) -> dict:
    program = (
        "import json, django; django.setup(); from django.conf import settings; "
        "print(json.dumps(settings.DATABASES['default'], default=str))"
    )
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    done = subprocess.run(
        [sys.executable, "-c", program], env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])

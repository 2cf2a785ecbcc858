"""PgBouncer as the PostgreSQL pass runs behind it (ops.servers): its admin console, and a
Django connection to PostgreSQL itself for what must bypass it."""

import os
from contextlib import contextmanager
from urllib.parse import urlsplit

import psycopg
from django.db import connection
from django.db.utils import load_backend


def behind_pgbouncer() -> bool:
    return bool(os.environ.get("PARLEY_TEST_PGBOUNCER_ADMIN_URL"))


def admin(command: str) -> list[dict]:
    """Run a command on PgBouncer's admin console (SHOW POOLS, SHOW CONFIG, KILL db...)."""
    url = os.environ["PARLEY_TEST_PGBOUNCER_ADMIN_URL"]
    # The console speaks the simple query protocol only.
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as console:
        cursor = psycopg.ClientCursor(console)
        cursor.execute(command)
        if cursor.description is None:
            return []
        names = [column.name for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def release_database(name: str) -> None:
    """Close PgBouncer's server connections to ``name`` so that the database can be dropped."""
    admin(f"KILL {name}")
    admin(f"RESUME {name}")


@contextmanager
def direct_database(**settings):
    """A Django connection (Parley's engine, its own pool) to the test database on PostgreSQL
    itself, past PgBouncer, with Parley's settings for a direct connection."""
    direct = urlsplit(os.environ["PARLEY_TEST_PG_DIRECT_URL"])
    settings_dict = {
        **connection.settings_dict,
        "HOST": direct.hostname,
        "PORT": direct.port,
        "PASSWORD": direct.password or "",
        "DISABLE_SERVER_SIDE_CURSORS": False,
        "OPTIONS": {
            key: value
            for key, value in connection.settings_dict["OPTIONS"].items()
            if key not in ("server_side_binding", "prepare_threshold")
        },
        **settings,
    }
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias="direct")
    if wrapper.pool is not None:
        wrapper.pool.open()
    try:
        yield wrapper
    finally:
        wrapper.close()
        if wrapper.pool is not None:
            wrapper.close_pool()

"""PostgreSQL whose connection pool recovers from a restart at once.

psycopg_pool checks a connection as it hands it out (Django asks it to with CONN_HEALTH_CHECKS)
and, finding it broken, sleeps with backoff (1, 2, 4, 8 s...) before trying the next one. A
PostgreSQL restart breaks every idle connection in the pool, so a request met them one by one
and waited out the whole backoff, past the pool's timeout with eight or more of them. Here the
backend checks the connection itself, and the first broken one found has the pool check all its
idle ones at once: the request then waits only for a fresh connection.
"""

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        # Rarely, a connection broken by the same restart is put back while the pool is checked.
        for _ in range(3):
            if self.pool is None or _works(connection):
                break
            self.pool.putconn(connection)  # discarded, as it is broken
            self.pool.check()
            connection = super().get_new_connection(conn_params)
        return connection


def _works(connection) -> bool:
    try:
        ConnectionPool.check_connection(connection)
    except psycopg.Error:
        return False
    return True

"""A run's connections: one for its own statements, and one per handler running at once."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from ..db import Connection, connect
from ..errors import DatabaseUnavailable, describe

log = logging.getLogger("fairqueue.connections")

# The waits between tries to reach the database again while it cannot be reached (a restart
# takes a few seconds): 7.75 s in all, inside the 15 s a Lambda run keeps back from its time.
RETRY_DELAYS_S = (0.25, 0.5, 1.0, 2.0, 4.0)


def another_connection(dsn: str | None) -> Connection:
    """A fresh autocommit connection as the application role to the run's database.

    ``None`` is a run that was handed its connection with no database named (no DSN, no
    DATABASE_URL): it has no other to open, and says so (DatabaseUnavailable). It never falls
    back to the embedded Postgres as ``connect()`` does, which would be another database."""
    if dsn is None:
        raise DatabaseUnavailable(
            "the run was handed its connection and no database is named (no DSN, no"
            " DATABASE_URL): it cannot open another"
        )
    return connect(dsn, autocommit=True, as_app_role=True)


def connect_retrying(dsn: str | None) -> Connection:
    """another_connection, tried again after each of RETRY_DELAYS_S while the database cannot
    be reached; DatabaseUnavailable naming the last problem when it never could be (at once
    when there is no DSN at all)."""
    if dsn is None:  # nothing to try again: refused at once, not after every delay
        return another_connection(dsn)
    problem = ""
    for delay in (0.0, *RETRY_DELAYS_S):
        time.sleep(delay)
        try:
            return another_connection(dsn)
        except (psycopg.Error, DatabaseUnavailable) as exc:
            problem = describe(exc)
            log.warning("cannot reach the database: %s", problem)
    raise DatabaseUnavailable(
        f"the database could not be reached in {len(RETRY_DELAYS_S) + 1} tries: {problem}"
    )


class RunConnections:
    """The run's connections.

    One autocommit connection for the loop, shared with the handler threads for the few
    statements they make (spending quota), one user at a time; and a connection per handler
    running at once, in which each handler runs inside its job's tenant transaction.
    """

    def __init__(self, conn: Connection, dsn: str | None) -> None:
        self.conn = conn
        self.dsn = dsn
        self._lock = threading.Lock()
        self._spare: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        self._opened: list[Connection] = []

    @contextmanager
    def use(self) -> Iterator[Connection]:
        with self._lock:
            yield self.conn

    @contextmanager
    def handler_connection(self) -> Iterator[Connection]:
        try:
            conn = self._spare.get_nowait()
        except queue.Empty:
            conn = another_connection(self.dsn)
            with self._lock:
                self._opened.append(conn)
        try:
            yield conn
        finally:
            if not (conn.closed or conn.broken):
                self._spare.put(conn)

    @property
    def broken(self) -> bool:
        """Whether the run's own connection is known to be lost."""
        return self.conn.closed or self.conn.broken

    def reconnect(self) -> None:
        """Replace the run's lost connection with a fresh one (connect_retrying), closed with
        the handlers' at the end of the run."""
        fresh = connect_retrying(self.dsn)
        with self._lock:
            self.conn = fresh
            self._opened.append(fresh)

    def close_handler_connections(self) -> None:
        with self._lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()

"""A run's connections: one for its own statements, and one per handler running at once."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .db import Connection, connect


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
            conn = connect(self.dsn, autocommit=True, as_app_role=True)
            with self._lock:
                self._opened.append(conn)
        try:
            yield conn
        finally:
            if not (conn.closed or conn.broken):
                self._spare.put(conn)

    def close_handler_connections(self) -> None:
        with self._lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()

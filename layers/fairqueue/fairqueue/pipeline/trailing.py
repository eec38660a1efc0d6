"""The trailing completion: a batch's completion recorded on a connection of its own, on a thread
of the run's, while the run's own connection claims the next batch.

The loop is serial: the client waits for the server and the server for the client, so with one
worker no more than one of the machine's cores works at once. Recording batch N's completion
while batch N+1 is claimed lets the two statements run side by side (docs/design/runs.md, "A batch's
completion trails the next claim"). Only a completion that makes nothing claimable trails: a
batch's successes with no follow-up parked and no lane to free; anything else is recorded in
order, on the run's connection, as before.

At most one completion is in flight: handing over the next one waits for it first, and what it
found (how many jobs were still the run's) is counted then, on the run's thread: the trailing
thread never writes the run's tally. An error recording it (but a lost connection, which is
tried once more on a fresh one) reaches the run at its next hand-over or at its end, so the run
closes with it. When no second connection can be opened (no DSN to open it from, the server's
connections all taken), the completion is recorded on the run's own connection instead, as it
would have been without trailing, and so are the run's later ones.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack

import psycopg

from ..db import Connection
from ..errors import DatabaseUnavailable, describe
from .connections import another_connection

log = logging.getLogger("fairqueue.trailing")

# Records a completion and answers how many of its jobs were still the run's.
Record = Callable[[Connection], int]
# Counts that answer into the run's tally, on the run's thread.
Settle = Callable[[int], None]


class TrailingCompletion:
    """One run's trailing completions, recorded one at a time on one thread and connection."""

    def __init__(
        self,
        dsn: str | None,
        locked_by: str,
        run_connection: Callable[[], AbstractContextManager[Connection]],
    ) -> None:
        self.dsn = dsn
        self.locked_by = locked_by
        # The run's own connection, taken in turn with the run's thread (RunConnections.use):
        # where a completion is recorded when no connection of its own can be opened.
        self.run_connection = run_connection
        self._no_connection_of_its_own = False
        self._changed = threading.Condition()
        self._pending: tuple[Record, Settle, ExitStack] | None = None
        self._busy = False
        self._recorded: tuple[Settle, int] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None

    def hand_over(self, record: Record, settle: Settle, held: ExitStack) -> None:
        """Record a batch's completion on the trailing thread; ``held`` (the batch's leases) is
        closed once it is recorded, or could not be, and ``settle`` is given its answer at the
        next ``wait``. Waits for the one before it first; when that one failed, ``held`` is
        closed here and its error raised."""
        try:
            self.wait()
        except BaseException:
            held.close()
            raise
        with self._changed:
            if self._closed:
                raise RuntimeError("the run's trailing completion is closed")
            self._pending = (record, settle, held)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._records, name=f"fq-trailing-{self.locked_by}", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    @property
    def in_flight(self) -> bool:
        """Whether a completion is waiting to be recorded or being recorded."""
        with self._changed:
            return self._pending is not None or self._busy

    def wait(self) -> None:
        """Until no completion is in flight; counts the one recorded (its ``settle``), or raises
        the error of one that failed."""
        with self._changed:
            while self._pending is not None or self._busy:
                self._changed.wait()
            error, self._error = self._error, None
            recorded, self._recorded = self._recorded, None
        if recorded is not None:
            settle, done = recorded
            settle(done)
        if error is not None:
            raise error

    def close(self) -> None:
        """Record what is in flight, end the thread and close the connection. An error of the
        last completion is logged, not raised: the run's ``wait`` is where it is reported."""
        try:
            self.wait()
        except Exception:
            log.exception("the last trailing completion of %s failed", self.locked_by)
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        if self._conn is not None:
            self._conn.close()

    def _records(self) -> None:
        with self._changed:
            while True:
                while self._pending is None and not self._closed:
                    self._changed.wait()
                if self._pending is None:
                    return
                (record, settle, held), self._pending = self._pending, None
                self._busy = True
                self._changed.release()
                try:
                    outcome = self._record(record, held)
                finally:
                    self._changed.acquire()
                self._busy = False
                if isinstance(outcome, int):
                    self._recorded = (settle, outcome)
                else:
                    self._error = outcome
                self._changed.notify_all()

    def _record(self, record: Record, held: ExitStack) -> int | BaseException:
        """How many of the completion's jobs were still the run's, or what kept it from being
        recorded."""
        with held:
            try:
                return self._connected(record)
            except psycopg.OperationalError as exc:
                if self._conn is None or not (self._conn.closed or self._conn.broken):
                    return exc
                # Its own connection lost: once more on a fresh one. The completion changes
                # only jobs this run still holds, so one cut short is safe to make again.
                log.warning("%s lost its trailing connection: %s", self.locked_by, describe(exc))
                self._conn.close()
                self._conn = None
                try:
                    return self._connected(record)
                except Exception as again:
                    return again
            except Exception as exc:
                return exc

    def _connected(self, record: Record) -> int:
        if self._conn is None and not self._no_connection_of_its_own:
            try:
                self._conn = another_connection(self.dsn)
            except (psycopg.OperationalError, DatabaseUnavailable) as exc:
                log.warning(
                    "%s records its completions on its own connection: no second one could be"
                    " opened (%s)",
                    self.locked_by,
                    describe(exc),
                )
                self._no_connection_of_its_own = True
        if self._conn is None:
            with self.run_connection() as conn:
                return record(conn)
        return record(self._conn)

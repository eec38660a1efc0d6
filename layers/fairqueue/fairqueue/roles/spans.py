"""The run rows of a long-running doorbell worker: one row for a span of its work.

A Lambda invocation is one run row. A worker that runs for days and starts each doorbell's job
the moment it arrives would, row per batch, write a row for every doorbell; instead a row (a
span) opens with the first doorbell after an idle spell and stays open while work comes, until
it is ``span_s`` old (a minute by default) or no doorbell came for ``idle_s``. Then it is
retired: the next doorbell opens a new one, and the retired row closes once its batches in
flight have ended. So an active worker writes about one row a minute, an idle one none, and a
job never waits for a row to close.

Each span runs on a connection of its own (a run's connection is used by its batches' threads
one statement at a time), taken from those the retired spans gave back, so a worker at work
holds one, or two while one span winds down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack

from ..db import Connection
from ..errors import DatabaseUnavailable, describe
from ..pipeline.connections import connect_retrying
from ..pipeline.run import Run, invocation
from ..stage import Stage

# How long one run row covers at most, and how long without a doorbell retires it.
SPAN_S = 60.0
IDLE_S = 5.0


class Span:
    """One run row held open across doorbells, with its batches in flight."""

    def __init__(
        self, conn: Connection, dsn: str, stages: Sequence[Stage], stop: threading.Event
    ) -> None:
        self.conn = conn
        self._exit = ExitStack()
        self.run: Run = self._exit.enter_context(
            invocation(dsn, stages, trigger="doorbell", conn=conn, stop=stop)
        )
        self.opened = self.last_claim = time.monotonic()
        self.batches = 0
        self.retired = False

    def failed(self, error: BaseException) -> None:
        """A batch stopped on an error: the row closes with it."""
        if self.run.error is None:
            self.run.stop_reason, self.run.error = "error", describe(error)

    def close(self) -> None:
        self._exit.close()


class Spans:
    """The worker's open span, the retired ones still running batches, and spare connections.
    Thread-safe: the dispatcher opens and retires spans, batch threads end their batches."""

    def __init__(
        self,
        dsn: str,
        stages: Sequence[Stage],
        stop: threading.Event,
        *,
        span_s: float = SPAN_S,
        idle_s: float = IDLE_S,
    ) -> None:
        self.dsn = dsn
        self.stages = list(stages)
        self.stop = stop
        self.span_s = span_s
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._open: Span | None = None
        self._spare: list[Connection] = []

    def for_claim(self) -> Span:
        """The open span, opened now if there is none; its claim's time is noted."""
        with self._lock:
            if self._open is None:
                self._open = self._opened()
            span = self._open
            span.last_claim = time.monotonic()
            return span

    def _opened(self) -> Span:
        """A span on a spare connection, or on a new one when there is none or the spare was
        lost (a restart of the server while the worker idled): tried again while the database
        cannot be reached (connect_retrying)."""
        if self._spare:
            conn = self._spare.pop()
            try:
                return Span(conn, self.dsn, self.stages, self.stop)
            except DatabaseUnavailable:
                conn.close()
        return Span(connect_retrying(self.dsn), self.dsn, self.stages, self.stop)

    def batch_started(self, span: Span) -> None:
        with self._lock:
            span.batches += 1

    def batch_ended(self, span: Span, error: BaseException | None) -> None:
        with self._lock:
            span.batches -= 1
            if error is not None:
                span.failed(error)
            done = span.retired and span.batches == 0
        if done:
            self._close(span)

    def retire_due(self) -> None:
        """Retire the open span once it is ``span_s`` old or idle for ``idle_s``."""
        now = time.monotonic()
        with self._lock:
            span = self._open
            if span is None:
                return
            if now - span.opened < self.span_s and now - span.last_claim < self.idle_s:
                return
        self.retire()

    def retire(self, only: Span | None = None) -> None:
        """No more claims for the open span (only if it is ``only``, when given); it closes
        once its batches have ended."""
        with self._lock:
            span = self._open
            if span is None or (only is not None and span is not only):
                return
            self._open = None
            span.retired = True
            if self.stop.is_set() and span.run.error is None:
                # As every run a stop request ends: out of time, and saying why.
                span.run.stop_reason = "time_budget"
                span.run.tally.interrupted = "stop requested"
            done = span.batches == 0
        if done:
            self._close(span)

    def close(self) -> None:
        """Retire the open span (every batch has ended by now) and close the spare connections."""
        self.retire()
        with self._lock:
            spare, self._spare = self._spare, []
        for conn in spare:
            conn.close()

    def _close(self, span: Span) -> None:
        span.close()
        if span.run.db.conn is span.conn and not (span.conn.closed or span.conn.broken):
            with self._lock:
                self._spare.append(span.conn)
        else:
            span.conn.close()

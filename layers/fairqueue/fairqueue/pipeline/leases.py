"""The lease keeper: while a batch's handlers run, its jobs' leases are set again, so a handler
slower than its lease in a live process is not taken by another run.

Every third of the stage's lease from the batch's start, on a thread of the run's own, the
keeper sets the lease of every job of the batch that the run still holds to the full lease from
now: the jobs whose handlers run, those that wait their turn, and those that returned and wait
for the batch's completion. A job whose handler has run longer than the stage's
``job_timeout_s`` is left out: its lease runs out and another run takes it as its next attempt
(or the sweep fails it, on its last), and whatever its handler writes later rolls back with its
lost completion. A failure to reach the database is logged and tried again at the next beat;
the lease set at the claim still holds until then.

One thread serves every batch of a run, started with the first and ended with the run: a batch
that ends before a third of its lease costs a lock and a list entry, not a thread's start and
join (0.16 ms of the client's CPU a batch, measured).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from uuid import UUID

import psycopg

from ..errors import FairqueueError, describe
from ..stage import Stage
from . import claim
from .connections import RunConnections

log = logging.getLogger("fairqueue.leases")

# The fraction of a lease between two beats: two beats may fail before the lease runs out.
BEATS_PER_LEASE = 3


@dataclass
class _Kept:
    """A batch whose leases are kept, and when its next beat is due (time.monotonic)."""

    stage: Stage
    batch: Sequence[claim.ClaimedJob]
    started_at: Callable[[UUID], float | None]
    due: float


class LeaseKeeper:
    """The leases of a run's batches, kept by one thread for the run."""

    def __init__(self, db: RunConnections, locked_by: str) -> None:
        self.db = db
        self.locked_by = locked_by
        self._changed = threading.Condition()
        self._kept: list[_Kept] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextmanager
    def kept(
        self,
        stage: Stage,
        batch: Sequence[claim.ClaimedJob],
        started_at: Callable[[UUID], float | None],
    ) -> Iterator[None]:
        """Keep the batch's leases while the block runs. ``started_at`` gives when a job's
        handler started (``time.monotonic``), or None when it has not yet."""
        entry = _Kept(stage, batch, started_at, time.monotonic() + stage.lease_s / BEATS_PER_LEASE)
        with self._changed:
            if self._closed:
                raise RuntimeError("the run's lease keeper is closed")
            self._kept.append(entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._beats, name=f"fq-leases-{self.locked_by}", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._kept.remove(entry)

    def close(self) -> None:
        """End the keeper's thread, after a beat in progress."""
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _beats(self) -> None:
        with self._changed:
            while not self._closed:
                now = time.monotonic()
                due = [entry for entry in self._kept if entry.due <= now]
                if not due:
                    nearest = min((entry.due for entry in self._kept), default=None)
                    self._changed.wait(None if nearest is None else nearest - now)
                    continue
                for entry in due:
                    entry.due = now + entry.stage.lease_s / BEATS_PER_LEASE
                # The database is reached without the lock: a batch may end meanwhile, and the
                # statement then extends only what the run still holds.
                self._changed.release()
                try:
                    for entry in due:
                        self._beat(entry)
                finally:
                    self._changed.acquire()

    def _beat(self, entry: _Kept) -> None:
        try:
            with self.db.use() as conn:
                claim.extend_leases(conn, _owned(entry), self.locked_by, entry.stage.lease_s)
        except (psycopg.Error, FairqueueError) as exc:
            log.warning("could not keep the leases of %s: %s", self.locked_by, describe(exc))
        except Exception:
            # The thread serves the run's later batches too: whatever went wrong with this beat
            # is logged, and the next one is tried as usual.
            log.exception("keeping the leases of %s failed", self.locked_by)


def _owned(entry: _Kept) -> list[tuple[str | None, UUID]]:
    """The batch's jobs whose leases are kept: all but those past the stage's job timeout."""
    now = time.monotonic()
    timeout = entry.stage.job_timeout_s
    owned: list[tuple[str | None, UUID]] = []
    for job in entry.batch:
        started = entry.started_at(job.id)
        if timeout is not None and started is not None and now - started > timeout:
            continue
        owned.append((job.tenant_id, job.id))
    return owned

"""The lease keeper: while a batch's handlers run, its jobs' leases are set again, so a handler
slower than its lease in a live process is not taken by another run.

Every third of the stage's lease, on a thread of its own, the keeper sets the lease of every job
of the batch that the run still holds to the full lease from now: the jobs whose handlers run,
those that wait their turn, and those that returned and wait for the batch's completion. A job
whose handler has run longer than the stage's ``job_timeout_s`` is left out: its lease runs out
and another run takes it as its next attempt (or the sweep fails it, on its last), and whatever
its handler writes later rolls back with its lost completion. A batch that ends before a third
of its lease costs nothing. A failure to reach the database is logged and tried again at the
next beat; the lease set at the claim still holds until then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from uuid import UUID

import psycopg

from . import claim
from .connections import RunConnections
from .errors import FairqueueError, describe
from .stage import Stage

log = logging.getLogger("fairqueue.leases")

# The fraction of a lease between two beats: two beats may fail before the lease runs out.
BEATS_PER_LEASE = 3


@contextmanager
def leases_kept(
    db: RunConnections,
    locked_by: str,
    stage: Stage,
    batch: Sequence[claim.ClaimedJob],
    started_at: Callable[[UUID], float | None],
) -> Iterator[None]:
    """Keep the batch's leases while the block runs. ``started_at`` gives when a job's handler
    started (``time.monotonic``), or None when it has not yet."""
    done = threading.Event()

    def kept() -> list[tuple[str | None, UUID]]:
        now = time.monotonic()
        owned: list[tuple[str | None, UUID]] = []
        for job in batch:
            started = started_at(job.id)
            if (
                stage.job_timeout_s is not None
                and started is not None
                and now - started > stage.job_timeout_s
            ):
                continue
            owned.append((job.tenant_id, job.id))
        return owned

    def beat() -> None:
        while not done.wait(stage.lease_s / BEATS_PER_LEASE):
            try:
                with db.use() as conn:
                    claim.extend_leases(conn, kept(), locked_by, stage.lease_s)
            except (psycopg.Error, FairqueueError) as exc:
                log.warning("could not keep the leases of %s: %s", locked_by, describe(exc))

    keeper = threading.Thread(target=beat, name=f"fq-leases-{stage.name}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join()

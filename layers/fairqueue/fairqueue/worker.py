"""The doorbell worker: claim one job by id under its tenant, run it, finalize it.

A doorbell is only a hint. The claim is one UPDATE that only a pending, due job of the
doorbell's tenant satisfies, so a duplicate, a late doorbell for a finished job, or one whose
tenant does not match the row claims zero rows and is dropped; the handler never runs twice
for one claim. Retries of a job that fails are the table's business (its run_after), not the
queue's: the message is done either way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from . import claim
from .db import Connection
from .doorbells import Doorbell
from .pipeline import Pipeline, RunResult, invocation
from .queries import query
from .stage import Stage
from .tenancy import tenant_transaction

log = logging.getLogger("fairqueue.worker")

Outcome = Literal["ran", "dropped"]


class DoorbellRun:
    """One worker invocation: any number of doorbells, one runs row."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.stages = {s.name: s for s in pipeline.stages if s.delivery == "doorbell"}
        if not self.stages:
            raise ValueError("a doorbell worker needs at least one Stage with delivery='doorbell'")

    def ring(self, doorbell: Doorbell) -> Outcome:
        """Claim the doorbell's job and run it, or drop the doorbell."""
        pipeline = self.pipeline
        with pipeline.db.use() as conn, tenant_transaction(conn, doorbell.tenant_id):
            row = conn.execute(
                query("claim_by_id"),
                {
                    "id": doorbell.job_id,
                    "types": list(self.stages),
                    "leases": [s.lease_s for s in self.stages.values()],
                    "locked_by": pipeline.locked_by,
                    "run_id": pipeline.run_id,
                },
            ).fetchone()
        if row is None:
            pipeline.tally.count("doorbells_dropped")
            log.info("dropped doorbell %s: nothing of that tenant to claim", doorbell.to_json())
            return "dropped"
        job = claim.ClaimedJob.from_row(row)
        pipeline.tally.count("doorbells_ran")
        pipeline.run_batch(self.stages[job.type], [job])
        return "ran"


@contextmanager
def doorbell_run(
    dsn: str | None,
    stages: Sequence[Stage],
    *,
    conn: Connection | None = None,
    trigger: str = "doorbell",
) -> Iterator[DoorbellRun]:
    """A worker invocation; its run row closes with ``no_work`` when the block ends."""
    with invocation(dsn, stages, trigger=trigger, conn=conn) as pipeline:
        yield DoorbellRun(pipeline)


def ring_all(
    dsn: str | None,
    stages: Sequence[Stage],
    doorbells: Sequence[Doorbell],
    *,
    conn: Connection | None = None,
) -> RunResult:
    """Run a list of doorbells in one invocation (process mode, tests)."""
    with doorbell_run(dsn, stages, conn=conn) as run:
        for doorbell in doorbells:
            run.ring(doorbell)
    return run.pipeline.result()

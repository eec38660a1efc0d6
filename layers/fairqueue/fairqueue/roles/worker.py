"""The doorbell worker on Lambda: each doorbell of an SQS batch claims its job by id under its
tenant, runs it, finalizes it (the long-running worker is fairqueue.roles.dispatcher; both claim
with ``claim_doorbells``).

A doorbell is only a hint. The claim is one UPDATE that only a pending, due job of the
doorbell's tenant satisfies, so a duplicate, a late doorbell for a finished job, or one whose
tenant does not match the row claims zero rows and is dropped; the handler never runs twice
for one claim. Retries of a job that fails are the table's business (its run_after), not the
queue's: the message is done either way.

A message fails (and its queue delivers it again) when it is not a doorbell, when its job
could not be claimed at all, or when the invocation has no time left to start it: the worker
never starts a job it cannot expect to finish before the function's deadline. Each failed
message is logged with its id and the reason, and counted on the run row.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from psycopg.rows import args_row

from ..db import Connection
from ..doorbells import Doorbell
from ..errors import ConfigurationError, describe
from ..pipeline import claim
from ..pipeline.run import LambdaContextLike, Run, RunResult, budget_seconds, invocation
from ..plans import PLANS, Plans
from ..queries import query
from ..stage import Stage

log = logging.getLogger("fairqueue.worker")

Outcome = Literal["ran", "dropped"]

# Kept back from a Lambda's remaining time: the run row closes and the batch answer goes out.
WORKER_MARGIN_S = 10.0
# Reasons of failed messages the run row keeps, beside their count.
FAILED_MESSAGES_KEPT = 20


class OutOfTime(Exception):
    """The invocation's deadline leaves no room to start the doorbell's job."""


class DoorbellRun:
    """One worker invocation: any number of doorbells, one runs row."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.stages = {s.name: s for s in run.stages if s.delivery == "doorbell"}
        if not self.stages:
            raise ConfigurationError(
                "a doorbell worker needs at least one Stage with delivery='doorbell'"
            )

    def ring_message(self, message_id: str, body: str) -> Outcome:
        """Read one queue message and ring it; a message that fails is logged with its id and
        reason and counted on the run row, and the error goes on up to the batch processor."""
        try:
            return self.ring(Doorbell.parse(body))
        except Exception as exc:
            reason = describe(exc)
            tally = self.run.tally
            tally.count("doorbells_failed")
            if len(tally.failed_messages) < FAILED_MESSAGES_KEPT:
                tally.failed_messages.append({"message_id": message_id, "reason": reason})
            log.warning(
                "doorbell message %s failed: %s",
                message_id,
                reason,
                extra={"message_id": message_id, "reason": reason},
            )
            raise

    def ring(self, doorbell: Doorbell) -> Outcome:
        """Claim the doorbell's job and run it, or drop the doorbell."""
        run = self.run
        if run.seconds_left() <= 0:
            raise OutOfTime("no time left in this invocation to start a job")
        with run.db.use() as conn:
            claimed = claim_doorbells(conn, run, [doorbell], list(self.stages.values()))
        if not claimed:
            run.tally.count("doorbells_dropped")
            log.info("dropped doorbell %s: nothing of that tenant to claim", doorbell.to_json())
            return "dropped"
        [job] = claimed
        stage = self.stages[job.type]
        # The stage knows its job's type only now: checked after the claim, given back if late.
        needed = run.seconds_needed(stage, 1)
        left = run.seconds_left()
        if needed > left:
            run.outcomes.give_back([job], run.tally.stage(stage.name))
            raise OutOfTime(
                f"job {job.id} of {stage.name} may take {needed:.1f} s and this invocation "
                f"has {max(left, 0.0):.1f} s left; it is back to pending"
            )
        run.tally.count("doorbells_ran")
        run.run_batch(stage, [job])
        return "ran"


@contextmanager
def doorbell_run(
    dsn: str | None,
    stages: Sequence[Stage],
    *,
    conn: Connection | None = None,
    trigger: str = "doorbell",
    context: LambdaContextLike | None = None,
    margin_s: float = WORKER_MARGIN_S,
    plans: Plans = PLANS,
) -> Iterator[DoorbellRun]:
    """A worker invocation; its run row closes with ``no_work`` when the block ends. ``plans``
    gives each tenant's cap of running jobs (``Plan.max_running``) the doorbells keep to.

    With a Lambda ``context``, no job starts unless it can finish ``margin_s`` before the
    function's deadline; a message refused for that fails and is delivered again.
    """
    deadline = float("inf")
    if context is not None:
        deadline = time.monotonic() + budget_seconds(float("inf"), context, margin_s)
    with invocation(dsn, stages, trigger=trigger, conn=conn, deadline=deadline, plans=plans) as run:
        yield DoorbellRun(run)


def claim_doorbells(
    conn: Connection, run: Run, doorbells: Sequence[Doorbell], stages: Sequence[Stage]
) -> list[claim.ClaimedJob]:
    """The jobs of ``doorbells`` that one statement could claim for ``run``, of ``stages``' types:
    each only a pending, due job of the doorbell's tenant (sql/functions/doorbells.sql), so a
    duplicate, late or foreign doorbell claims nothing, nor one whose tenant is at its plan's
    cap of running jobs (``Plan.max_running``; the job stays pending for the cron). On an
    autocommit connection the statement is its own transaction, which commits without waiting
    for the disk when it took a job."""
    cursor = conn.cursor(row_factory=args_row(claim.ClaimedJob))
    return cursor.execute(
        query("claim_by_ids"),
        {
            "ids": [d.job_id for d in doorbells],
            # Named as well as checked against any clamp: a superuser login is not held by one.
            "tenant_ids": [d.tenant_id for d in doorbells],
            "types": [s.name for s in stages],
            "leases": [s.lease_s for s in stages],
            "locked_by": run.locked_by,
            "run_id": run.run_id,
            "plan_names": [p.name for p in run.plans.plans],
            **run.plans.cap_params(),
            # A stage fair by cost counts each job its cost from its claim on, as the cron's.
            "cost_types": [s.name for s in stages if s.fair_by == "cost"],
        },
    ).fetchall()


def ring_all(
    dsn: str | None,
    stages: Sequence[Stage],
    doorbells: Sequence[Doorbell],
    *,
    conn: Connection | None = None,
    plans: Plans = PLANS,
) -> RunResult:
    """Run a list of doorbells in one invocation (process mode, tests)."""
    with doorbell_run(dsn, stages, conn=conn, plans=plans) as doorbell_invocation:
        for doorbell in doorbells:
            doorbell_invocation.ring(doorbell)
    return doorbell_invocation.run.result()

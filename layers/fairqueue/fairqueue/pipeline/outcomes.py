"""Every state change of a claimed job after its claim, in one place: done (with its follow-ups),
retried, deferred, failed for good (with its refund and its give-up hook), given back unstarted,
and the lanes those free. Each change names the claimer, so a run that lost a job to a rescue
changes nothing; the worker and the sweeper go through here as the loop does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from .. import jobs, lanes
from ..db import Connection
from ..doorbells import Doorbell, ringing
from ..errors import describe
from ..runs import RunTally, StageTally
from ..stage import Defer, Job, Stage
from ..tenancy import clamp_callers_transaction, tenant_transaction, tenants_transaction
from ..validation import problems
from . import claim, give_ups
from .connections import RunConnections
from .executor import FollowUps, JobLost, ReleaseFailed
from .spent import SpentUnits, settle

log = logging.getLogger("fairqueue.outcomes")


class Outcomes:
    def __init__(
        self,
        db: RunConnections,
        *,
        run_id: UUID,
        locked_by: str,
        tally: RunTally,
        follow_ups: FollowUps,
        spent: SpentUnits,
        by_type: dict[str, Stage],
        job_for: Callable[[Stage, claim.ClaimedJob, Callable[[], Connection] | None], Job],
    ) -> None:
        self.db = db
        self.run_id = run_id
        self.locked_by = locked_by
        self.tally = tally
        self.follow_ups = follow_ups
        self.spent = spent
        self.by_type = by_type
        self.job_for = job_for

    def complete_batch(
        self,
        succeeded: list[claim.ClaimedJob],
        outputs: dict[UUID, dict[str, Any] | None],
        tally: StageTally,
    ) -> None:
        """Mark a batch's successes done in one transaction, with their follow-ups, on the run's
        connection; then free their lanes.

        One commit per batch rather than per job; a run that dies before it leaves those jobs
        running, and they run again after their lease, as any job of a dead run does.
        """
        if not succeeded:
            return
        with self.db.use() as conn:
            done = self.record_completion(conn, succeeded, outputs)
        self.count_completion(succeeded, tally, done)
        self.free_lanes(succeeded)

    def record_completion(
        self,
        conn: Connection,
        succeeded: list[claim.ClaimedJob],
        outputs: dict[UUID, dict[str, Any] | None],
    ) -> int:
        """Mark a batch's successes done on ``conn``, with their follow-ups, and ring the
        follow-ups' doorbells; how many were still the run's. The run's thread records it
        (complete_batch), or, for a batch that can_trail, the trailing one
        (fairqueue.pipeline.trailing), whose answer the run's thread counts (count_completion)."""
        # Still parked until the completion is recorded: a step cut short by a lost connection is
        # taken again whole, and its follow-ups with it.
        follow_ups = self.follow_ups.parked_for(job.id for job in succeeded)
        owned = [(job.tenant_id, job.id) for job in succeeded]
        # What jobs fair by cost spent, settled first; kept until the completion is recorded.
        settle(conn, owned, self.spent.peek(job.id for job in succeeded), self.locked_by)
        if not follow_ups:
            # Nothing to insert after the completions: one statement, no transaction.
            done = claim.count_completed(conn, owned, self.locked_by, outputs)
        else:
            bells: list[Doorbell] = []
            with tenants_transaction(conn) as clamp:
                held = claim.complete_claimed(conn, owned, self.locked_by, outputs)
                # Follow-ups only of jobs whose completion held, each under its tenant's clamp.
                owed = claim.by_tenant(
                    (job.tenant_id, job.id)
                    for job in succeeded
                    if job.id in held and job.id in follow_ups
                )
                for tenant_id, job_ids in owed.items():
                    clamp(tenant_id)
                    for job_id in job_ids:
                        bells.extend(self.insert_follow_ups(conn, follow_ups[job_id]))
            done = len(held)
            ringing.ring(conn, bells)
        self.follow_ups.drop(job.id for job in succeeded)
        self.spent.take(job.id for job in succeeded)
        return done

    def count_completion(
        self, succeeded: list[claim.ClaimedJob], tally: StageTally, done: int
    ) -> None:
        """Count a completion of these jobs that found ``done`` of them still the run's."""
        tally.done += done
        self.count_lost(tally, len(succeeded) - done)

    def can_trail(self, succeeded: list[claim.ClaimedJob]) -> bool:
        """Whether the batch's completion can be recorded behind the next claim (fairqueue
        .trailing): it makes nothing claimable. A follow-up must be there for the next pass,
        which starts again at the top of the stages (and a run must not stop for want of work
        while its own follow-ups are landing), and a lane's next job waits for its completion."""
        return not any(job.holds_a_lane for job in succeeded) and not self.follow_ups.any_parked(
            job.id for job in succeeded
        )

    def complete_with_writes(
        self, conn: Connection, job: claim.ClaimedJob, output: dict[str, Any] | None
    ) -> list[Doorbell]:
        """Mark a job done inside its handler's open transaction, with its follow-ups, so that
        both commit with the handler's writes or none of them does. Raises JobLost when the run
        no longer holds the job: the caller's transaction then rolls back. The doorbells of the
        follow-ups, to ring once committed."""
        owned = [(job.tenant_id, job.id)]
        settle(conn, owned, self.spent.take([job.id]), self.locked_by)
        held = claim.complete_claimed(conn, owned, self.locked_by, {job.id: output})
        if not held:
            self.follow_ups.take(job.id)
            raise JobLost(
                f"job {job.id} was no longer held by run {self.run_id} when its handler"
                " returned; the handler's writes were rolled back"
            )
        follow_ups = self.follow_ups.take(job.id)
        if not follow_ups:
            return []
        # The completion ends unclamped; the follow-ups go in under the job's tenant.
        clamp_callers_transaction(conn, job.tenant_id)
        return self.insert_follow_ups(conn, follow_ups)

    def completed_with_writes(
        self, finished: list[claim.ClaimedJob], bells: list[Doorbell], tally: StageTally
    ) -> None:
        """Count the jobs done in their handlers' committed transactions, ring their follow-ups
        and free their lanes."""
        if not finished:
            return
        if bells:
            with self.db.use() as conn:
                ringing.ring(conn, bells)
        self.free_lanes(finished)
        # Counted last: a step cut short by a lost connection is taken again whole.
        tally.done += len(finished)

    def give_back(self, not_started: list[claim.ClaimedJob], tally: StageTally) -> None:
        """Give back what a stop request kept from starting, attempt undone."""
        grouped = claim.by_tenant((job.tenant_id, job.id) for job in not_started)
        for tenant_id, job_ids in grouped.items():
            with self.db.use() as conn, tenant_transaction(conn, tenant_id):
                given_back = claim.give_back(conn, job_ids, self.locked_by, tenant_id=tenant_id)
            tally.given_back += given_back
            self.count_lost(tally, len(job_ids) - given_back)

    def insert_follow_ups(
        self, conn: Connection, follow_ups: list[jobs.PreparedJob]
    ) -> list[Doorbell]:
        """Insert a job's follow-ups; the doorbells to ring once they are committed."""
        bells: list[Doorbell] = []
        for prepared in follow_ups:
            bell = jobs.doorbell_for(prepared, jobs.insert(conn, prepared))
            if bell is not None:
                bells.append(bell)
        return bells

    def free_lanes(self, finished: list[claim.ClaimedJob]) -> None:
        """A lane whose first-pass job finished starts its next queued job at once."""
        lanes_done = {(job.tenant_id, job.lane) for job in finished if job.holds_a_lane}
        for tenant_id, lane in sorted(lanes_done, key=str):
            assert lane is not None
            with self.db.use() as conn:
                lanes.promote_next(conn, tenant_id, lane)

    def count_lost(self, tally: StageTally, lost: int) -> None:
        if lost:
            # A rescue took these jobs after our lease ran out; they are that claimer's now.
            tally.lost += lost
            log.warning("%d job(s) were no longer held by run %s", lost, self.run_id)

    def finalize_failure(
        self,
        stage: Stage,
        job: claim.ClaimedJob,
        error: BaseException,
        tally: StageTally,
    ) -> None:
        self.follow_ups.take(job.id)  # follow-ups land only with a completion
        self.spent.take([job.id])  # spent units are settled only by a completion
        if isinstance(error, JobLost):
            # Another run holds the job now; its outcome is that run's to record.
            self.count_lost(tally, 1)
            return
        with self.db.use() as conn, tenant_transaction(conn, job.tenant_id):
            # Failed for good: the job's credits come back in the same transaction.
            if isinstance(error, Defer):
                held = claim.defer(
                    conn, job.id, self.locked_by, error.until, tenant_id=job.tenant_id
                )
                outcome = "deferred"
            elif isinstance(error, ReleaseFailed):
                status = claim.release_failed(conn, stage, job, self.locked_by, str(error))
                held = status is not None
                outcome = "failed" if status == "failed" else "release_retried"
            elif isinstance(error, ValidationError):
                reason = f"payload no longer fits the stage's model: {problems(error)}"
                held = claim.fail_now(conn, job.id, self.locked_by, reason, tenant_id=job.tenant_id)
                outcome = "failed"
            else:
                retried = claim.retry_or_fail(
                    conn,
                    job.id,
                    self.locked_by,
                    describe(error),
                    tenant_id=job.tenant_id,
                    backoff_unit_s=stage.backoff_unit_s,
                )
                held = retried is not None
                outcome = "failed" if retried is None or retried.status == "failed" else "retried"
            if held and outcome == "failed":
                lanes.refund(conn, job.tenant_id, job.id, "failed for good")
        if not held:
            self.count_lost(tally, 1)
            return
        if outcome == "deferred":
            tally.deferred += 1
        elif outcome == "release_retried":
            tally.release_retries += 1
        elif outcome == "retried":
            tally.retried += 1
        else:
            tally.failed += 1
            self.give_up(stage, job, describe(error))
            self.free_lanes([job])

    def give_up(self, stage: Stage, job: claim.ClaimedJob, error: str) -> bool:
        """Run the stage's give-up hook for a job whose failure is committed, in a tenant
        transaction that locks the job and clears the hook it owes: the hook's writes through
        ``job.conn`` and its follow-ups commit with that, or, when it raises, roll back and leave
        the hook owed for the sweeper. A stage without a hook only clears it. False when nothing
        was owed here (fired already, or being fired elsewhere) or the hook raised."""
        bells: list[Doorbell] = []
        try:
            with self.db.handler_connection() as conn:
                with tenant_transaction(conn, job.tenant_id):
                    if not give_ups.lock_owed(conn, job.tenant_id, job.id):
                        self.follow_ups.take(job.id)
                        return False
                    if stage.on_give_up is not None:
                        stage.on_give_up(self.job_for(stage, job, lambda: conn), error)
                        bells = self.insert_follow_ups(conn, self.follow_ups.take(job.id))
                    give_ups.mark_fired(conn, job.tenant_id, job.id)
                ringing.ring(conn, bells)
        except Exception as exc:
            self.follow_ups.take(job.id)
            log.exception("give-up hook of %s failed for job %s", stage.name, job.id)
            self.tally.hook_errors.append(f"{stage.name} {job.id}: {describe(exc)}")
            return False
        return True

    def fire_owed_give_ups(self, grace_s: float = give_ups.OWED_GRACE_S) -> int:
        """Run the give-up hooks of this run's stages still owed ``grace_s`` after their jobs
        failed: their process died before the hook ran to its end, or the hook raised. How many
        ran."""
        with self.db.use() as conn:
            owed = give_ups.due(conn, list(self.by_type), grace_s)
            errors = {item.id: item.error for item in owed}
            found = claim.read_jobs_of_tenants(conn, ((i.tenant_id, i.id) for i in owed))
        return sum(self.give_up(self.by_type[job.type], job, errors[job.id]) for job in found)

    def fail_abandoned(self) -> None:
        """Fail this run's stages' jobs that died on their last attempt, and run their hooks.

        Only the run's own types: a run that cannot call a stage's give-up hook leaves its jobs
        to a run that can.
        """
        with self.db.use() as conn:
            abandoned = claim.fail_abandoned(conn, list(self.by_type))
            errors = {item.id: item.error for item in abandoned}
            found = claim.read_jobs_of_tenants(conn, ((i.tenant_id, i.id) for i in abandoned))
        for job in found:
            self.tally.abandoned_failed += 1
            with self.db.use() as conn, tenant_transaction(conn, job.tenant_id):
                lanes.refund(conn, job.tenant_id, job.id, "died on its last attempt")
            self.give_up(self.by_type[job.type], job, errors[job.id])
        self.free_lanes(found)

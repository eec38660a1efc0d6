"""One invocation: claim a batch from the first stage that can work, run it, start again at the top.

A stage whose quota is at its reserve or empty is passed over, and the stages after it go on.
The loop stops on the first of: no stage has work (``no_work``), the time budget cannot fit the
next batch (``time_budget``), every stage with work is held by its quota (``quota_reserve``,
``quota_exhausted``, the first such stage's). An error of the pipeline itself closes the run
with ``error``. Handler errors are job failures, never run errors.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

import psycopg
from pydantic import ValidationError

from . import claim, jobs, lanes, quotas, ringing, upstream
from .db import Connection, connect
from .doorbells import Doorbell
from .errors import ConfigurationError, DatabaseUnavailable, TenantMismatch
from .plans import PLANS, Plans
from .results import check_body
from .runs import RunTally, StageTally, StopReason, close_run, open_run
from .stage import Defer, Job, Stage
from .tenancy import tenant_transaction, tenants_transaction

log = logging.getLogger("fairqueue.pipeline")

DEFAULT_TIME_BUDGET_S = 220.0
# Kept back from a Lambda's remaining time so the run row is written before the platform stops.
DEFAULT_MARGIN_S = 15.0


class NotStarted(Exception):
    """A claimed job whose handler a stop request kept from starting."""


class ReleaseFailed(Exception):
    """A claimed job's held upstream work could not be started; its handler did not run."""


class LambdaContextLike(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(frozen=True)
class RunResult:
    run_id: UUID
    stop_reason: StopReason
    jobs_done: int
    jobs_failed: int
    jobs_deferred: int
    units: int
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)


def budget_seconds(
    time_budget_s: float, context: LambdaContextLike | None, margin_s: float = DEFAULT_MARGIN_S
) -> float:
    """The run's budget: the configured one, never past a Lambda's remaining time less a margin."""
    budget = time_budget_s
    if context is not None:
        remaining = context.get_remaining_time_in_millis() / 1000.0 - margin_s
        budget = min(budget, remaining)
    return max(budget, 0.0)


class _Db:
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


class Pipeline:
    def __init__(
        self,
        db: _Db,
        stages: Sequence[Stage],
        *,
        run_id: UUID,
        deadline: float,
        plans: Plans,
        stop: threading.Event | None,
    ) -> None:
        self.db = db
        self.stages = list(stages)
        self.by_type = {s.name: s for s in self.stages}
        self.run_id = run_id
        self.locked_by = f"run:{run_id}"
        self.deadline = deadline
        self.plans = plans
        self.stop = stop
        self.tally = RunTally()
        self.stop_reason: StopReason = "no_work"
        self.error: str | None = None
        self.longest_batch: dict[str, float] = {}
        self.follow_ups: dict[UUID, list[jobs.PreparedJob]] = {}

    def result(self) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            stop_reason=self.stop_reason,
            jobs_done=self.tally.done,
            jobs_failed=self.tally.failed,
            jobs_deferred=self.tally.deferred,
            units=self.tally.units,
            error=self.error,
            summary=self.tally.summary(),
        )

    def loop(self) -> StopReason:
        self.fail_abandoned()
        while True:
            if self.stop is not None and self.stop.is_set():
                self.tally.interrupted = "stop requested"
                return "time_budget"
            reason = self.one_pass()
            if reason is not None:
                return reason

    def one_pass(self) -> StopReason | None:
        """Claim and run one batch from the first stage that can work now; a reason to stop, or
        None to start again at the top.

        A stage whose quota is at its reserve or empty is passed over for this pass (its hold
        and the quota's reset time go into the summary), so stages that spend something else
        keep working. The run stops on a quota only when every stage with claimable work is
        held by one, naming the first such stage's reason.
        """
        held: StopReason | None = None
        for stage in self.stages:
            fits = self.batch_fits(stage)
            if stage.quota is not None or not fits:
                # A stop that concerns this stage counts only if it has work to stop.
                with self.db.use() as conn:
                    if not claim.has_claimable(conn, stage.name):
                        continue
                    state = quotas.read_quota(conn, stage.quota) if stage.quota else None
                quota_stop = state.stop_reason() if state else None
                if state is not None and quota_stop is not None:
                    self.tally.stage(stage.name).hold(quota_stop, state.name, state.resets_at)
                    held = held or quota_stop
                    continue
                if not fits:
                    return "time_budget"
            with self.db.use() as conn:
                claimed = claim.claim_batch(
                    conn,
                    stage.name,
                    batch=stage.batch,
                    lease_s=stage.lease_s,
                    locked_by=self.locked_by,
                    run_id=self.run_id,
                    plans=self.plans,
                )
            if claimed:
                self.run_batch(stage, claimed)
                return None
        return held or "no_work"

    def batch_fits(self, stage: Stage) -> bool:
        """Never start a batch that cannot finish inside the budget."""
        remaining = self.deadline - time.monotonic()
        needed = stage.batch_seconds() or self.longest_batch.get(stage.name, 0.0)
        return remaining > 0 and needed <= remaining

    def run_batch(self, stage: Stage, batch: list[claim.ClaimedJob]) -> None:
        tally = self.tally.stage(stage.name)
        tally.batches += 1
        tally.claimed += len(batch)
        started = time.monotonic()
        succeeded: list[claim.ClaimedJob] = []
        outputs: dict[UUID, dict[str, Any] | None] = {}
        not_started: list[claim.ClaimedJob] = []
        for job, output, error in self.run_handlers(stage, batch):
            if error is None:
                succeeded.append(job)
                outputs[job.id] = output
            elif isinstance(error, NotStarted):
                not_started.append(job)
            else:
                self.finalize_failure(stage, job, error, tally)
        self.complete_batch(succeeded, outputs, tally)
        self.release(not_started, tally)
        elapsed = time.monotonic() - started
        tally.seconds += elapsed
        self.longest_batch[stage.name] = max(self.longest_batch.get(stage.name, 0.0), elapsed)

    def run_handlers(
        self, stage: Stage, batch: list[claim.ClaimedJob]
    ) -> Iterator[tuple[claim.ClaimedJob, dict[str, Any] | None, BaseException | None]]:
        """Each job of the batch with its handler's output or error, as the handlers finish.

        A stage that runs one handler at a time runs them on this thread: a pool of one thread
        only added a hand-over per job (a drain of no-op jobs ran about 10% faster without it).
        """
        workers = min(stage.concurrency, len(batch))
        if workers == 1:
            for job in batch:
                try:
                    output = self.call_handler(stage, job)
                except Exception as exc:
                    yield job, None, exc
                else:
                    yield job, output, None
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"fq-{stage.name}") as pool:
            futures: dict[Future[dict[str, Any] | None], claim.ClaimedJob] = {
                pool.submit(self.call_handler, stage, job): job for job in batch
            }
            for future in as_completed(futures):
                error = future.exception()
                yield futures[future], None if error is not None else future.result(), error

    def call_handler(self, stage: Stage, claimed: claim.ClaimedJob) -> dict[str, Any] | None:
        if self.stop is not None and self.stop.is_set():
            raise NotStarted
        if stage.payload_model is not None:
            stage.payload_model.model_validate(claimed.payload)
        if claimed.awaits_release:
            self.release_upstream(stage, claimed)
        # The handler reads and writes application data under its job's tenant clamp; what it
        # writes commits when it returns, and rolls back when it raises. The transaction is
        # opened only if the handler asks for job.conn.
        with self.db.handler_connection() as conn, ExitStack() as transaction:
            opened: list[Connection] = []

            def open_conn() -> Connection:
                if not opened:
                    opened.append(
                        transaction.enter_context(tenant_transaction(conn, claimed.tenant_id))
                    )
                return opened[0]

            output = stage.handler(self.job_for(stage, claimed, open_conn))
            # Checked inside the transaction: an output that cannot be stored is a failure.
            return None if output is None else check_body(output, f"{stage.name}'s output")

    def release_upstream(self, stage: Stage, claimed: claim.ClaimedJob) -> None:
        """Start the job's held upstream work, recorded in a commit of its own before the
        handler runs; a failure is the job's ReleaseFailed, not one of its attempts."""
        assert claimed.upstream_id is not None
        if stage.upstream is None:
            raise ReleaseFailed(f"stage {stage.name} has no upstream to release held work with")
        try:
            stage.upstream.release(claimed.upstream_id)
        except Exception as exc:
            raise ReleaseFailed(describe(exc)) from exc
        with (
            self.db.handler_connection() as conn,
            tenant_transaction(conn, claimed.tenant_id),
        ):
            upstream.mark_released(conn, claimed.id, tenant_id=claimed.tenant_id)

    def job_for(
        self,
        stage: Stage,
        claimed: claim.ClaimedJob,
        open_conn: Callable[[], Connection] | None = None,
    ) -> Job:
        tally = self.tally.stage(stage.name)

        def spend(quota: str, units: int) -> None:
            # Quotas are not tenant data: spent on the run's shared connection, committed at
            # once, whatever becomes of the handler's own transaction.
            with self.db.use() as shared:
                quotas.spend(shared, quota, units)
                tally.units += units

        def follow_up(job_type: str, payload: dict[str, Any], **options: Any) -> None:
            if options.get("tenant_id") != claimed.tenant_id:
                raise TenantMismatch(
                    f"job {claimed.id} works for tenant {claimed.tenant_id!r}; it cannot "
                    f"enqueue for {options.get('tenant_id')!r}"
                )
            prepared = jobs.prepare(job_type, payload, **options)
            with self.db.use():
                self.follow_ups.setdefault(claimed.id, []).append(prepared)

        return Job(
            id=claimed.id,
            type=claimed.type,
            payload=claimed.payload,
            tenant_id=claimed.tenant_id,
            group_id=claimed.group_id,
            attempts=claimed.attempts,
            max_attempts=claimed.max_attempts,
            _open_conn=open_conn,
            _spend=spend,
            _follow_up=follow_up,
        )

    def complete_batch(
        self,
        succeeded: list[claim.ClaimedJob],
        outputs: dict[UUID, dict[str, Any] | None],
        tally: StageTally,
    ) -> None:
        """Mark a batch's successes done in one transaction, with their follow-ups.

        One commit per batch rather than per job; a run that dies before it leaves those jobs
        running, and they run again after their lease, as any job of a dead run does.
        """
        if not succeeded:
            return
        follow_ups = {job.id: self.follow_ups.pop(job.id, []) for job in succeeded}
        owned = [(job.tenant_id, job.id) for job in succeeded]
        with self.db.use() as conn:
            if not any(follow_ups.values()):
                # Nothing to insert after the completions: one statement, no transaction.
                done = len(claim.complete_claimed(conn, owned, self.locked_by, outputs))
            else:
                bells: list[Doorbell] = []
                with tenants_transaction(conn) as clamp:
                    held = claim.complete_claimed(conn, owned, self.locked_by, outputs)
                    # Follow-ups only of jobs whose completion held, each under its tenant's clamp.
                    owed = claim.by_tenant(
                        (job.tenant_id, job.id)
                        for job in succeeded
                        if job.id in held and follow_ups[job.id]
                    )
                    for tenant_id, job_ids in owed.items():
                        clamp(tenant_id)
                        for job_id in job_ids:
                            bells.extend(self.insert_follow_ups(conn, follow_ups[job_id]))
                done = len(held)
                ringing.ring(conn, bells)
        tally.done += done
        self.count_lost(tally, len(succeeded) - done)
        self.free_lanes(succeeded)

    def release(self, not_started: list[claim.ClaimedJob], tally: StageTally) -> None:
        """Give back what a stop request kept from starting, attempt undone."""
        grouped = claim.by_tenant((job.tenant_id, job.id) for job in not_started)
        for tenant_id, job_ids in grouped.items():
            with self.db.use() as conn, tenant_transaction(conn, tenant_id):
                released = claim.release(conn, job_ids, self.locked_by, tenant_id=tenant_id)
            tally.released += released
            self.count_lost(tally, len(job_ids) - released)

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
        self.follow_ups.pop(job.id, None)  # follow-ups land only with a completion
        with self.db.use() as conn, tenant_transaction(conn, job.tenant_id):
            # Failed for good: the job's credits come back in the same transaction.
            if isinstance(error, Defer):
                held = claim.defer(
                    conn, job.id, self.locked_by, error.until, tenant_id=job.tenant_id
                )
                outcome = "deferred"
            elif isinstance(error, ReleaseFailed):
                status = upstream.release_failed(conn, stage, job, self.locked_by, str(error))
                held = status is not None
                outcome = "failed" if status == "failed" else "release_retried"
            elif isinstance(error, ValidationError):
                reason = f"payload no longer fits the stage's model: {error}"
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

    def give_up(self, stage: Stage, job: claim.ClaimedJob, error: str) -> None:
        if stage.on_give_up is None:
            return
        try:
            stage.on_give_up(self.job_for(stage, job), error)
            follow_ups = self.follow_ups.pop(job.id, [])
            if follow_ups:
                with self.db.use() as conn:
                    with tenant_transaction(conn, job.tenant_id):
                        bells = self.insert_follow_ups(conn, follow_ups)
                    ringing.ring(conn, bells)
        except Exception as exc:
            self.follow_ups.pop(job.id, None)
            log.exception("give-up hook of %s failed for job %s", stage.name, job.id)
            self.tally.hook_errors.append(f"{stage.name} {job.id}: {describe(exc)}")

    def fail_abandoned(self) -> None:
        """Fail this run's stages' jobs that died on their last attempt, and run their hooks.

        Only the run's own types: a run that cannot call a stage's give-up hook leaves its jobs
        to a run that can.
        """
        with self.db.use() as conn:
            abandoned = claim.fail_abandoned(conn, list(self.by_type))
            errors = {item.id: item.error for item in abandoned}
            grouped = claim.by_tenant((item.tenant_id, item.id) for item in abandoned)
            found = [
                job
                for tenant_id, job_ids in grouped.items()
                for job in claim.read_jobs(conn, tenant_id, job_ids)
            ]
        for job in found:
            self.tally.abandoned_failed += 1
            with self.db.use() as conn, tenant_transaction(conn, job.tenant_id):
                lanes.refund(conn, job.tenant_id, job.id, "died on its last attempt")
            self.give_up(self.by_type[job.type], job, errors[job.id])
        self.free_lanes(found)


def describe(error: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return text[:4000]


@contextmanager
def invocation(
    dsn: str | None,
    stages: Sequence[Stage],
    *,
    trigger: str,
    conn: Connection | None = None,
    deadline: float = float("inf"),
    stop: threading.Event | None = None,
    plans: Plans = PLANS,
    opening_summary: Mapping[str, Any] | None = None,
) -> Iterator[Pipeline]:
    """One invocation and its one ``runs`` row: opened first, closed whatever happens.

    The pipeline's ``stop_reason`` and ``error`` are what the row is closed with; an exception
    out of the block closes it with ``error`` and goes on up. ``conn`` reuses an open
    autocommit connection (a Lambda keeps one across invocations) and is left open; otherwise
    one is opened from ``dsn`` (or ``DATABASE_URL``) and closed.
    """
    if not stages:
        raise ConfigurationError("an invocation needs at least one Stage")
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"stage names must be unique, got {names}")
    owned = conn is None
    active = conn if conn is not None else connect(dsn, autocommit=True, as_app_role=True)
    try:
        if not active.autocommit:
            raise ConfigurationError("an invocation needs an autocommit connection")
        try:
            run_id = open_run(active, trigger, {**(opening_summary or {}), "host": _host()})
        except psycopg.Error as exc:
            raise DatabaseUnavailable(f"cannot open a run row: {exc}") from exc
        db = _Db(active, dsn)
        pipeline = Pipeline(db, stages, run_id=run_id, deadline=deadline, plans=plans, stop=stop)
        try:
            yield pipeline
        except Exception as exc:
            log.exception("run %s stopped on an error", run_id)
            pipeline.stop_reason, pipeline.error = "error", describe(exc)
            raise
        finally:
            db.close_handler_connections()
            _close(active, dsn, run_id, pipeline.stop_reason, pipeline.tally, pipeline.error)
    finally:
        if owned:
            active.close()


def run_pipeline(
    dsn: str | None,
    stages: Sequence[Stage],
    *,
    time_budget_s: float = DEFAULT_TIME_BUDGET_S,
    trigger: str = "manual",
    context: LambdaContextLike | None = None,
    conn: Connection | None = None,
    stop: threading.Event | None = None,
    plans: Plans = PLANS,
    margin_s: float = DEFAULT_MARGIN_S,
    summary: Mapping[str, Any] | None = None,
) -> RunResult:
    """Run one invocation of the cron pipeline and write its one ``runs`` row.

    ``summary`` is recorded on the row as it opens (the cron function records the tick that
    started it there).
    """
    budget = budget_seconds(time_budget_s, context, margin_s)
    with invocation(
        dsn,
        stages,
        trigger=trigger,
        conn=conn,
        deadline=time.monotonic() + budget,
        stop=stop,
        plans=plans,
        opening_summary={**(summary or {}), "budget_s": round(budget, 3)},
    ) as pipeline:
        try:
            pipeline.stop_reason = pipeline.loop()
        except Exception as exc:
            log.exception("run %s stopped on an error", pipeline.run_id)
            pipeline.stop_reason, pipeline.error = "error", describe(exc)
    return pipeline.result()


def _close(
    conn: Connection,
    dsn: str | None,
    run_id: UUID,
    reason: StopReason,
    tally: RunTally,
    error: str | None,
) -> None:
    """Close the run row, on a fresh connection if the error broke the one we had."""
    if not (conn.closed or conn.broken):
        try:
            close_run(conn, run_id, reason, tally, error=error)
            return
        except psycopg.Error:
            log.exception("closing run %s failed; retrying on a new connection", run_id)
    with connect(dsn, autocommit=True, as_app_role=True) as fresh:
        close_run(fresh, run_id, reason, tally, error=error)


def _host() -> str:
    return os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or socket.gethostname()

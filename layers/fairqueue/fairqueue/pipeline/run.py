"""One invocation and its one ``runs`` row: the run's state (its connections, its tally, the
executor and the outcomes), opened first and closed whatever happens.

The loop (fairqueue.pipeline), the doorbell worker and the sweeper each work inside one run.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol
from uuid import UUID

import psycopg

from ..db import Connection, connect, resolve_dsn
from ..doorbells import Doorbell
from ..errors import ConfigurationError, ConnectionLost, DatabaseUnavailable, describe
from ..plans import PLANS, Plans
from ..runs import RunTally, StopReason, close_run, open_run
from ..settings import settings
from ..stage import Stage
from . import claim
from .connections import RunConnections, connect_retrying
from .executor import Executor, FollowUps, NotStarted
from .leases import LeaseKeeper
from .outcomes import Outcomes
from .spent import SpentUnits
from .trailing import TrailingCompletion

log = logging.getLogger("fairqueue.run")

# Kept back from a Lambda's remaining time so the run row is written before the platform stops.
DEFAULT_MARGIN_S = 15.0
ABORTED = (
    "aborted: a second stop request did not wait for the work in flight; the jobs whose"
    " handlers had started are left to their leases, the rest of the batch was given back"
)


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


class Run:
    """One invocation's state, from its row's opening to its closing."""

    def __init__(
        self,
        db: RunConnections,
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
        # Why the run's row could not be closed, if it could not.
        self.close_error: str | None = None
        # What broke the run's own connection, if it broke: the run then stops after the batch.
        self.connection_fault: str | None = None
        self.longest_batch: dict[str, float] = {}
        follow_ups = FollowUps()
        spent = SpentUnits()
        self.outcomes = Outcomes(
            db,
            run_id=run_id,
            locked_by=self.locked_by,
            tally=self.tally,
            follow_ups=follow_ups,
            spent=spent,
            by_type=self.by_type,
            job_for=lambda stage, job, open_conn: self.executor.job_for(stage, job, open_conn),
        )
        self.executor = Executor(
            db,
            self.tally,
            follow_ups,
            stop,
            record_with_writes=self.outcomes.complete_with_writes,
            spent=spent,
        )
        self.leases = LeaseKeeper(db, self.locked_by)
        # Whether a batch's completion may trail the next claim (the loop's batches; a
        # worker's one job has no next claim to overlap).
        self.completions_trail = False
        self.trailing = TrailingCompletion(db.dsn, self.locked_by, db.use)

    def result(self) -> RunResult:
        summary = self.tally.summary()
        if self.close_error is not None:
            summary["run_row_left_open"] = self.close_error
        return RunResult(
            run_id=self.run_id,
            stop_reason=self.stop_reason,
            jobs_done=self.tally.done,
            jobs_failed=self.tally.failed,
            jobs_deferred=self.tally.deferred,
            units=self.tally.units,
            error=self.error,
            summary=summary,
        )

    def seconds_left(self) -> float:
        """What is left of the run's time budget (negative once it is spent)."""
        return self.deadline - time.monotonic()

    def seconds_needed(self, stage: Stage, jobs: int) -> float:
        """How long ``jobs`` jobs of the stage may take: bounded by its ``job_timeout_s``, else
        the longest batch of it this run has seen."""
        bound = stage.batch_seconds(jobs)
        return bound if bound is not None else self.longest_batch.get(stage.name, 0.0)

    def run_batch(
        self,
        stage: Stage,
        batch: list[claim.ClaimedJob],
        *,
        concurrency: int | None = None,
        handlers_done: Callable[[], None] | None = None,
    ) -> None:
        """Run a batch's handlers, then record each outcome. Should the run's connection be
        lost, no further handler starts; each outcome is recorded on a new connection, and the
        run then stops with ConnectionLost, so no handler that finished has to run again.
        ``concurrency``: the most handlers at once, when less than the stage's (a worker whose
        other batches of the stage hold the rest); ``handlers_done`` is called once the last
        handler has returned, before the outcomes are recorded."""
        tally = self.tally.stage(stage.name)
        tally.batches += 1
        tally.claimed += len(batch)
        started = time.monotonic()
        succeeded: list[claim.ClaimedJob] = []
        outputs: dict[UUID, dict[str, Any] | None] = {}
        recorded: list[claim.ClaimedJob] = []
        bells: list[Doorbell] = []
        failures: list[tuple[claim.ClaimedJob, BaseException]] = []
        not_started: list[claim.ClaimedJob] = []
        handlers = self.executor.run_handlers(stage, batch, concurrency or stage.concurrency)
        leases = ExitStack()
        leases.enter_context(self.leases.kept(stage, batch, self.executor.started_at))
        with leases, self._given_back_on_abort(stage, batch):
            for job, handled, error in handlers:
                if handled is not None and handled.recorded:
                    recorded.append(job)
                    bells.extend(handled.bells)
                elif handled is not None:
                    succeeded.append(job)
                    outputs[job.id] = handled.output
                elif isinstance(error, NotStarted):
                    not_started.append(job)
                else:
                    assert error is not None
                    failures.append((job, error))
            if handlers_done is not None:
                handlers_done()
            self._record(lambda: self.outcomes.completed_with_writes(recorded, bells, tally))
            for job, error in failures:
                self._record(partial(self.outcomes.finalize_failure, stage, job, error, tally))
            if self._completion_trails(succeeded):
                # The leases are kept until the trailing completion is recorded.
                self.trailing.hand_over(
                    partial(self.outcomes.record_completion, succeeded=succeeded, outputs=outputs),
                    partial(self.outcomes.count_completion, succeeded, tally),
                    leases.pop_all(),
                )
            else:
                self._record(lambda: self.outcomes.complete_batch(succeeded, outputs, tally))
        self._record(lambda: self.outcomes.give_back(not_started, tally))
        elapsed = time.monotonic() - started
        tally.seconds += elapsed
        self.longest_batch[stage.name] = max(self.longest_batch.get(stage.name, 0.0), elapsed)
        if self.connection_fault is not None:
            raise ConnectionLost(
                f"the run's connection was lost ({self.connection_fault}); it reconnected,"
                " recorded the outcomes of the handlers that had finished, and stopped"
            )

    def _completion_trails(self, succeeded: list[claim.ClaimedJob]) -> bool:
        """Whether this batch's completion is handed to the trailing thread: the loop's, with
        the run's connection not known lost, and making nothing claimable (Outcomes.can_trail)."""
        return (
            self.completions_trail
            and bool(succeeded)
            and self.connection_fault is None
            and not self.db.broken
            and self.outcomes.can_trail(succeeded)
        )

    @contextmanager
    def _given_back_on_abort(self, stage: Stage, batch: list[claim.ClaimedJob]) -> Iterator[None]:
        """On an abort (KeyboardInterrupt), give back the jobs whose handlers never started;
        those that started are left to their leases."""
        try:
            yield
        except KeyboardInterrupt:
            unstarted = self.executor.refuse_starts(batch)
            try:
                self._record(
                    lambda: self.outcomes.give_back(unstarted, self.tally.stage(stage.name))
                )
            except Exception:
                log.exception("run %s could not give back its unstarted jobs", self.run_id)
            raise

    def _record(self, step: Callable[[], None]) -> None:
        """Record outcomes; when the run's connection is found lost, reconnect (with a backoff)
        and record them on the new one. Each step changes only jobs this run still holds, in
        transactions of its own, so one cut short by the fault is safe to take again."""
        try:
            step()
            return
        except psycopg.OperationalError as exc:
            if not self.db.broken:
                raise
            self.connection_fault = self.connection_fault or describe(exc)
            log.warning("run %s lost its connection: %s; reconnecting", self.run_id, exc)
        self.db.reconnect()
        step()


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
) -> Iterator[Run]:
    """One invocation and its one ``runs`` row: opened first, closed whatever happens.

    The pipeline's ``stop_reason`` and ``error`` are what the row is closed with; an exception
    out of the block closes it with ``error`` and goes on up. A row that cannot be closed (the
    database is gone for longer than the retries) is left to the sweeper and never raises:
    ``run.close_error`` says why. ``conn`` reuses an open
    autocommit connection (a Lambda keeps one across invocations) and is left open; otherwise
    one is opened from ``dsn`` (or ``DATABASE_URL``) and closed.
    """
    if not stages:
        raise ConfigurationError("an invocation needs at least one Stage")
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"stage names must be unique, got {names}")
    owned = conn is None
    # The database the run opens more connections to: the one it opened its own on, or, when
    # handed one, the one named (else none: see another_connection).
    dsn = resolve_dsn(dsn) if owned else dsn or settings().database_url
    active = conn if conn is not None else connect(dsn, autocommit=True, as_app_role=True)
    try:
        if not active.autocommit:
            raise ConfigurationError("an invocation needs an autocommit connection")
        try:
            run_id = open_run(active, trigger, {**(opening_summary or {}), "host": _host()})
        except psycopg.Error as exc:
            raise DatabaseUnavailable(f"cannot open a run row: {exc}") from exc
        log.info("run opened", extra={"run_id": str(run_id), "trigger": trigger})
        db = RunConnections(active, dsn)
        run = Run(db, stages, run_id=run_id, deadline=deadline, plans=plans, stop=stop)
        try:
            yield run
        except Exception as exc:
            log.exception("run %s stopped on an error", run_id)
            run.stop_reason, run.error = "error", describe(exc)
            raise
        except KeyboardInterrupt:
            # An abort (a second stop request) is not an idle run: the jobs it held are left to
            # their leases.
            run.stop_reason, run.error = "error", ABORTED
            raise
        finally:
            run.trailing.close()
            run.leases.close()
            db.close_handler_connections()
            run.close_error = _close(active, dsn, run_id, run.stop_reason, run.tally, run.error)
            log.info(
                "run closed" if run.close_error is None else "run left open for the sweeper",
                extra={
                    "run_id": str(run_id),
                    "stop_reason": run.stop_reason,
                    "jobs_done": run.tally.done,
                    "jobs_failed": run.tally.failed,
                    "jobs_deferred": run.tally.deferred,
                },
            )
    finally:
        if owned:
            active.close()


def _close(
    conn: Connection,
    dsn: str | None,
    run_id: UUID,
    reason: StopReason,
    tally: RunTally,
    error: str | None,
) -> str | None:
    """Close the run row: on the run's connection, else on a fresh one, tried again with a
    backoff while the database cannot be reached (connect_retrying). None once closed, else why
    it could not be: a row left open is closed by the sweeper once it is abandoned."""
    if not (conn.closed or conn.broken):
        try:
            close_run(conn, run_id, reason, tally, error=error)
            return None
        except psycopg.Error:
            log.exception("closing run %s failed; retrying on a new connection", run_id)
    try:
        with connect_retrying(dsn) as fresh:
            close_run(fresh, run_id, reason, tally, error=error)
        return None
    except (psycopg.Error, DatabaseUnavailable) as exc:
        problem = describe(exc)
        log.error("run %s is left open for the sweeper to close: %s", run_id, problem)
        return problem


def _host() -> str:
    return settings().lambda_log_stream or socket.gethostname()

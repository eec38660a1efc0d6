"""One invocation and its one ``runs`` row: the run's state (its connections, its tally, the
executor and the outcomes), opened first and closed whatever happens.

The loop (fairqueue.pipeline), the doorbell worker and the sweeper each work inside one run.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

import psycopg

from . import claim
from .connections import RunConnections
from .db import Connection, connect
from .errors import ConfigurationError, DatabaseUnavailable, describe
from .executor import Executor, FollowUps, NotStarted
from .outcomes import Outcomes
from .plans import PLANS, Plans
from .runs import RunTally, StopReason, close_run, open_run
from .settings import settings
from .stage import Stage

log = logging.getLogger("fairqueue.run")

# Kept back from a Lambda's remaining time so the run row is written before the platform stops.
DEFAULT_MARGIN_S = 15.0


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
        self.longest_batch: dict[str, float] = {}
        follow_ups = FollowUps()
        self.executor = Executor(db, self.tally, follow_ups, stop)
        self.outcomes = Outcomes(
            db,
            run_id=run_id,
            locked_by=self.locked_by,
            tally=self.tally,
            follow_ups=follow_ups,
            by_type=self.by_type,
            job_for=self.executor.job_for,
        )

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

    def seconds_left(self) -> float:
        """What is left of the run's time budget (negative once it is spent)."""
        return self.deadline - time.monotonic()

    def seconds_needed(self, stage: Stage, jobs: int) -> float:
        """How long ``jobs`` jobs of the stage may take: bounded by its ``job_timeout_s``, else
        the longest batch of it this run has seen."""
        bound = stage.batch_seconds(jobs)
        return bound if bound is not None else self.longest_batch.get(stage.name, 0.0)

    def run_batch(self, stage: Stage, batch: list[claim.ClaimedJob]) -> None:
        tally = self.tally.stage(stage.name)
        tally.batches += 1
        tally.claimed += len(batch)
        started = time.monotonic()
        succeeded: list[claim.ClaimedJob] = []
        outputs: dict[UUID, dict[str, Any] | None] = {}
        not_started: list[claim.ClaimedJob] = []
        for job, output, error in self.executor.run_handlers(stage, batch):
            if error is None:
                succeeded.append(job)
                outputs[job.id] = output
            elif isinstance(error, NotStarted):
                not_started.append(job)
            else:
                self.outcomes.finalize_failure(stage, job, error, tally)
        self.outcomes.complete_batch(succeeded, outputs, tally)
        self.outcomes.give_back(not_started, tally)
        elapsed = time.monotonic() - started
        tally.seconds += elapsed
        self.longest_batch[stage.name] = max(self.longest_batch.get(stage.name, 0.0), elapsed)


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
        db = RunConnections(active, dsn)
        run = Run(db, stages, run_id=run_id, deadline=deadline, plans=plans, stop=stop)
        try:
            yield run
        except Exception as exc:
            log.exception("run %s stopped on an error", run_id)
            run.stop_reason, run.error = "error", describe(exc)
            raise
        finally:
            db.close_handler_connections()
            _close(active, dsn, run_id, run.stop_reason, run.tally, run.error)
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
    return settings().lambda_log_stream or socket.gethostname()

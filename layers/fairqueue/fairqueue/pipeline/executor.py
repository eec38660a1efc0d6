"""The executor: runs a batch's handlers, each inside its job's tenant transaction, and hands
back each job's output or error. It decides nothing about the job's next state; the outcomes do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from .. import jobs, quotas
from ..db import Connection
from ..doorbells import Doorbell
from ..errors import TenantMismatch, describe
from ..results import check_body
from ..runs import RunTally
from ..stage import Job, Stage
from ..tenancy import tenant_transaction
from . import claim
from .connections import RunConnections
from .spent import SpentUnits


class NotStarted(Exception):
    """A claimed job whose handler a stop request kept from starting."""


class ReleaseFailed(Exception):
    """A claimed job's held upstream work could not be started; its handler did not run."""


class JobLost(Exception):
    """The job was no longer this run's when its handler returned (its lease ran out and another
    run took it): the handler's writes were rolled back with the completion they came with."""


@dataclass(frozen=True)
class Handled:
    """A handler that returned: its output, and whether its job was already marked done in the
    handler's own transaction (a handler that wrote through ``job.conn``), with the doorbells of
    the follow-ups that landed there, to ring now that it is committed."""

    output: dict[str, Any] | None
    recorded: bool = False
    bells: list[Doorbell] = field(default_factory=list)


# Marks a job done inside its handler's transaction, with its follow-ups, and returns their
# doorbells; raises JobLost when the run no longer holds the job (outcomes.Outcomes owns it).
RecordWithWrites = Callable[[Connection, claim.ClaimedJob, dict[str, Any] | None], list[Doorbell]]


class FollowUps:
    """Jobs a handler enqueued, parked until its job's outcome: they land with a completion (or
    a give-up hook's success) and are dropped with anything else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parked: dict[UUID, list[jobs.PreparedJob]] = {}

    def park(self, job_id: UUID, prepared: jobs.PreparedJob) -> None:
        with self._lock:
            self._parked.setdefault(job_id, []).append(prepared)

    def take(self, job_id: UUID) -> list[jobs.PreparedJob]:
        """The job's follow-ups, no longer parked."""
        with self._lock:
            return self._parked.pop(job_id, [])

    def parked_for(self, job_ids: Iterable[UUID]) -> dict[UUID, list[jobs.PreparedJob]]:
        """The follow-ups of each of these jobs that has any, still parked: a completion that
        meets a lost connection is recorded again, follow-ups included."""
        with self._lock:
            if not self._parked:
                return {}
            return {
                job_id: list(self._parked[job_id]) for job_id in job_ids if job_id in self._parked
            }

    def any_parked(self, job_ids: Iterable[UUID]) -> bool:
        """Whether any of these jobs has a follow-up parked (parked_for without the copies)."""
        with self._lock:
            return bool(self._parked) and any(job_id in self._parked for job_id in job_ids)

    def drop(self, job_ids: Iterable[UUID]) -> None:
        """No longer parked: their jobs' outcomes are recorded."""
        with self._lock:
            if self._parked:
                for job_id in job_ids:
                    self._parked.pop(job_id, None)


class Executor:
    def __init__(
        self,
        db: RunConnections,
        tally: RunTally,
        follow_ups: FollowUps,
        stop: threading.Event | None,
        record_with_writes: RecordWithWrites,
        spent: SpentUnits,
    ) -> None:
        self.db = db
        self.spent = spent
        self.tally = tally
        self.follow_ups = follow_ups
        self.stop = stop
        self.record_with_writes = record_with_writes
        # When each job's handler started (time.monotonic), for the lease keeper.
        self._started: dict[UUID, float] = {}
        # Set by an abort: no handler starts after it, so what had not started can be given
        # back while the pool's threads are still running.
        self._starts_refused = False
        self._starts = threading.Lock()

    def started_at(self, job_id: UUID) -> float | None:
        return self._started.get(job_id)

    def refuse_starts(self, batch: list[claim.ClaimedJob]) -> list[claim.ClaimedJob]:
        """Start no further handler; the jobs of ``batch`` whose handlers never started."""
        with self._starts:
            self._starts_refused = True
            return [job for job in batch if job.id not in self._started]

    def run_handlers(
        self, stage: Stage, batch: list[claim.ClaimedJob], concurrency: int
    ) -> Iterator[tuple[claim.ClaimedJob, Handled | None, BaseException | None]]:
        """Each job of the batch with what its handler returned, or its error, as the handlers
        finish, at most ``concurrency`` of them at once.

        A stage that runs one handler at a time runs them on this thread: a pool of one thread
        only added a hand-over per job (a drain of no-op jobs ran about 10% faster without it).
        """
        workers = min(concurrency, len(batch))
        if workers == 1:
            for job in batch:
                try:
                    output = self.call_handler(stage, job)
                except Exception as exc:
                    yield job, None, exc
                else:
                    yield job, output, None
            return
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"fq-{stage.name}")
        try:
            futures: dict[Future[Handled], claim.ClaimedJob] = {
                pool.submit(self.call_handler, stage, job): job for job in batch
            }
            for future in as_completed(futures):
                error = future.exception()
                yield futures[future], None if error is not None else future.result(), error
        except BaseException:
            # An abort does not wait for the handlers in flight.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()

    def call_handler(self, stage: Stage, claimed: claim.ClaimedJob) -> Handled:
        with self._starts:
            if self._starts_refused or (self.stop is not None and self.stop.is_set()):
                raise NotStarted
            if self.db.broken:
                # A run that lost its connection starts no handler whose outcome it could not
                # record: the job is given back once it has reconnected.
                raise NotStarted
            self._started[claimed.id] = time.monotonic()
        if stage.payload_model is not None:
            stage.payload_model.model_validate(claimed.payload)
        if claimed.awaits_release:
            self.release_upstream(stage, claimed)
        # The handler reads and writes application data under its job's tenant clamp; what it
        # writes commits when it returns, together with the job marked done, and rolls back
        # when it raises or when the job is no longer this run's: a job's writes land once. The
        # transaction, and the handler's connection it runs on, are taken only if the handler asks
        # for job.conn; unwound in turn, the transaction ends before the connection goes back.
        with ExitStack() as transaction:
            opened: list[Connection] = []

            def open_conn() -> Connection:
                if not opened:
                    conn = transaction.enter_context(self.db.handler_connection())
                    opened.append(
                        transaction.enter_context(tenant_transaction(conn, claimed.tenant_id))
                    )
                return opened[0]

            output = stage.handler(self.job_for(stage, claimed, open_conn))
            # Checked inside the transaction: an output that cannot be stored is a failure.
            body = None if output is None else check_body(output, f"{stage.name}'s output")
            if not opened:
                return Handled(body)
            bells = self.record_with_writes(opened[0], claimed, body)
        return Handled(body, recorded=True, bells=bells)

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
            claim.mark_released(conn, claimed.id, tenant_id=claimed.tenant_id)

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
            if stage.fair_by == "cost":
                self.spent.add(claimed.id, units)

        def follow_up(job_type: str, payload: dict[str, Any], **options: Any) -> None:
            if options.get("tenant_id") != claimed.tenant_id:
                raise TenantMismatch(
                    f"job {claimed.id} works for tenant {claimed.tenant_id!r}; it cannot "
                    f"enqueue for {options.get('tenant_id')!r}"
                )
            self.follow_ups.park(claimed.id, jobs.prepare(job_type, payload, **options))

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

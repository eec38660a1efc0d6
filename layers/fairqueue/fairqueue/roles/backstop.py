"""The backstop sweep: no finished result is lost when no client was watching.

It looks only at done jobs of stages with a ``render_result`` that still hold their output, have
no result decided, and have not been touched for the grace window: oldest first, a bounded batch
locked ``FOR UPDATE OF jobs SKIP LOCKED`` (through a door), rendered with the stage's own
function and saved as the worker's. Each batch's results commit together; their
``after_result`` hooks fire right after, before the sweep looks at anything else, so a stop
request finishes what was recorded, hooks included. Hooks still owed after the grace window (a
process that died between the two, a hook that failed) are fired from here as well.

A result that cannot be saved (its ``render_result`` raises, its save is refused) is recorded
through a door (sql/functions/result_backoff.sql) and backed off: it is not claimed again in the
same pass, nor before its retry time, so one poisoned batch cannot hold the pass. Saving gets at
most half of the pass's budget; firing owed hooks, moving finished jobs, retention and vacuum
each run every pass, and one that fails is logged and counted in the summary without stopping
the others.

A sweep never stacks on itself in one process: a second call while one is in flight returns
None at once. Two processes (a rolling deploy) may sweep together; the row locks keep each
result written once and each hook fired once. It runs apart from the sweeper, so lease
recovery never waits behind a slow hook.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from ..db import Connection, connect
from ..errors import ConfigurationError, describe
from ..queries import query
from ..results import ResultSettings, fire_hook, record_worker_result, result_source
from ..stage import Stage
from ..tenancy import tenants_transaction
from .vacuuming import vacuum_hot_tables

log = logging.getLogger("fairqueue.backstop")

# Days of finished jobs made ahead: a week of passes may find the table busy before one is due.
DAYS_AHEAD = 7
# The budget of a pass called without one (``serve --role backstop``); a Lambda passes its own.
PASS_BUDGET_S = 60.0
# The share of a pass's budget that saving missing results may take: the rest is kept for
# hooks, moves, retention and vacuum.
SAVING_SHARE = 0.5
# The most failure records forgotten per pass once their job no longer waits for a result.
FAILURES_TIDIED = 1000
# How long making or dropping a day waits for the finished jobs' lock before it is left for the
# next pass: every reader of finished jobs queues behind a waiting step, so the wait is short.
PARTITION_LOCK_WAIT_S = 0.2


def _must_end(stop: threading.Event | None, deadline: float) -> bool:
    """A stop was asked for, or the time given ran out."""
    stopped = stop is not None and stop.is_set()
    return stopped or time.monotonic() >= deadline


@dataclass
class BackstopResult:
    written: int = 0
    refused: int = 0  # precedence kept a client's row
    # One line per result that could not be saved (render or save failed) in this pass; each
    # is recorded and backed off.
    render_errors: list[str] = field(default_factory=list)
    # Jobs whose result still fails to save, waiting out their backoff, after this pass.
    results_failing: int = 0
    hooks_fired: int = 0
    outputs_trimmed: int = 0
    # Finished jobs moved out of the hot table (fairqueue.jobs) to fairqueue.finished_jobs.
    jobs_moved: int = 0
    # Days of finished jobs made ahead and dropped whole by retention, and steps left for the
    # next pass because their locks were busy.
    days_made: int = 0
    days_dropped: int = 0
    days_skipped: int = 0
    # Hot tables vacuumed by this pass (fairqueue.roles.vacuuming): only where the server allows it.
    tables_vacuumed: list[str] = field(default_factory=list)
    # Saving stopped before every missing result was tried: a stop request or its share of the
    # budget.
    interrupted: bool = False
    # The steps of the pass that failed (and were passed over): "<step>: <error>".
    step_errors: list[str] = field(default_factory=list)


class Backstop:
    """The backstop of one process: holds its stages, settings and the no-stacking guard."""

    def __init__(
        self,
        dsn: str | None,
        stages: Sequence[Stage],
        settings: ResultSettings | None = None,
        *,
        budget_s: float = PASS_BUDGET_S,
    ) -> None:
        if not budget_s > 0:
            raise ConfigurationError(f"the backstop's pass budget must be positive, got {budget_s}")
        self.dsn = dsn
        self.budget_s = budget_s
        self.settings = settings or ResultSettings.from_env()
        self.rendering = {s.name: s for s in stages if s.render_result is not None}
        self.hooked = {s.name: s for s in stages if s.after_result is not None}
        self._in_flight = threading.Lock()

    def rescue(
        self,
        stop: threading.Event | None = None,
        *,
        budget_s: float | None = None,
        conn: Connection | None = None,
    ) -> BackstopResult | None:
        """One pass: save the missing results, fire the owed hooks, move the finished jobs out
        of the hot table, trim old outputs, drop old days and vacuum the hot tables where the
        server allows it; None when another pass of this process is still in flight.

        A stop request, or ``budget_s`` (else the backstop's own budget) running out, ends it
        between batches: the batch in flight and its hooks always finish. ``conn`` is an open
        autocommit connection to sweep on (a Lambda keeps one across invocations), left open;
        without it the sweep opens one from the DSN given at construction (or
        ``DATABASE_URL``) and closes it.
        """
        if conn is not None and not conn.autocommit:
            raise ConfigurationError("the backstop sweeps on an autocommit connection")
        if not self._in_flight.acquire(blocking=False):
            return None
        deadline = time.monotonic() + (self.budget_s if budget_s is None else budget_s)
        try:
            if conn is not None:
                return self._rescue(conn, stop, deadline)
            with connect(self.dsn, autocommit=True, as_app_role=True) as owned:
                return self._rescue(owned, stop, deadline)
        finally:
            self._in_flight.release()

    def _rescue(
        self, conn: Connection, stop: threading.Event | None, deadline: float
    ) -> BackstopResult:
        result = BackstopResult()
        now = time.monotonic()
        saving_ends = now + (deadline - now) * SAVING_SHARE
        self._step(
            result, "save results", lambda: self._save_missing(conn, result, stop, saving_ends)
        )
        if result.interrupted and stop is not None and stop.is_set():
            return result

        def fire_owed() -> None:
            result.hooks_fired += self._fire_owed_hooks(conn, stop)

        self._step(result, "fire owed hooks", fire_owed)
        self._step(
            result, "move finished jobs", lambda: self._move_finished(conn, result, stop, deadline)
        )
        self._step(result, "retention", lambda: self._retention(conn, result))
        self._step(result, "tidy failed saves", lambda: self._tidy_failures(conn, result))
        # A vacuum cannot be stopped half way: a pass out of time leaves it to the next.
        if not _must_end(stop, deadline):

            def vacuum() -> None:
                result.tables_vacuumed = vacuum_hot_tables(conn)

            self._step(result, "vacuum", vacuum)
        return result

    @staticmethod
    def _step(result: BackstopResult, name: str, step: Callable[[], None]) -> None:
        """Run one step of the pass; one that fails is logged and counted, and the pass goes on
        to the next."""
        try:
            step()
        except Exception as exc:
            log.exception("the backstop's step %r failed", name)
            result.step_errors.append(f"{name}: {describe(exc)}")

    def _save_missing(
        self,
        conn: Connection,
        result: BackstopResult,
        stop: threading.Event | None,
        saving_ends: float,
    ) -> None:
        """Save the missing results a batch at a time until a batch comes back short or the
        saving share of the budget runs out; a job tried once is not claimed again this pass."""
        tried: list[UUID] = []
        while self.rendering:
            if _must_end(stop, saving_ends):
                result.interrupted = True
                return
            recorded, claimed = self._record_batch(conn, result, tried)
            # Fired before anything else: a stop after this point leaves no hook owed here.
            for job_id, tenant_id, stage in recorded:
                result.hooks_fired += fire_hook(conn, stage, job_id, tenant_id)
            if len(claimed) < self.settings.batch:
                return
            tried.extend(claimed)

    def _move_finished(
        self,
        conn: Connection,
        result: BackstopResult,
        stop: threading.Event | None,
        deadline: float,
    ) -> None:
        """Move the finished jobs out of the hot table, a bounded batch per transaction, until
        a batch comes back short or the pass must end."""
        limit = self.settings.batch * 10
        while True:
            row = conn.execute(
                query("move_finished"), {"limit": limit, "lock_wait_s": PARTITION_LOCK_WAIT_S}
            ).fetchone()
            moved = int(row["moved"]) if row else 0
            result.jobs_moved += moved
            if moved < limit or _must_end(stop, deadline):
                return

    def _record_batch(
        self, conn: Connection, result: BackstopResult, tried: list[UUID]
    ) -> tuple[list[tuple[UUID, str | None, Stage]], list[UUID]]:
        """Lock, render and save one batch in one transaction, passing over the jobs in
        ``tried``; what owes a hook, and the ids of the jobs claimed. A job whose result cannot
        be saved is recorded and backed off in the same transaction."""
        recorded: list[tuple[UUID, str | None, Stage]] = []
        with tenants_transaction(conn) as clamp:
            batch = conn.execute(
                query("claim_results_to_save"),
                {
                    "types": list(self.rendering),
                    "grace_s": self.settings.grace_s,
                    "limit": self.settings.batch,
                    "tried": tried,
                },
            ).fetchall()
            for item in batch:
                clamp(item["tenant_id"])
                source = result_source(conn, item["id"], item["tenant_id"])
                assert source is not None, "the door locked this row for us"
                stage = self.rendering[source["type"]]
                try:
                    # A savepoint: one job's failure does not undo the batch.
                    with conn.transaction():
                        written = record_worker_result(conn, source, stage)
                except Exception as exc:
                    log.exception(
                        "the result of %s job %s could not be saved", stage.name, item["id"]
                    )
                    error = f"{stage.name} {item['id']}: {describe(exc)}"
                    result.render_errors.append(error)
                    conn.execute(
                        query("note_result_failure"), {"job_id": item["id"], "error": error[:2000]}
                    )
                    continue
                if written:
                    result.written += 1
                    if stage.after_result is not None:
                        recorded.append((source["result_job_id"], source["tenant_id"], stage))
                else:
                    result.refused += 1
        return recorded, [item["id"] for item in batch]

    def _fire_owed_hooks(self, conn: Connection, stop: threading.Event | None) -> int:
        if not self.hooked:
            return 0
        owed = conn.execute(
            query("due_result_hooks"),
            {
                "types": list(self.hooked),
                "grace_s": self.settings.grace_s,
                "limit": self.settings.batch,
            },
        ).fetchall()
        fired = 0
        for row in owed:
            if stop is not None and stop.is_set():
                break
            stage = self.hooked[row["type"]]
            fired += fire_hook(conn, stage, row["job_id"], row["tenant_id"])
        return fired

    def _retention(self, conn: Connection, result: BackstopResult) -> None:
        """Trim a bounded batch of old outputs, then keep the finished jobs' days: the next ones
        made ahead, the ones past retention dropped whole."""
        trimmed = conn.execute(
            query("trim_outputs"),
            {"age_s": self.settings.output_retention_s, "limit": self.settings.batch * 10},
        ).fetchone()
        result.outputs_trimmed = int(trimmed["trimmed"]) if trimmed else 0
        days = conn.execute(
            query("keep_partitions"),
            {
                "keep_s": self.settings.job_retention_s,
                "ahead": DAYS_AHEAD,
                "lock_wait_s": PARTITION_LOCK_WAIT_S,
            },
        ).fetchone()
        if days is not None:
            result.days_made = int(days["made"])
            result.days_dropped = int(days["dropped"])
            result.days_skipped = int(days["skipped"])

    @staticmethod
    def _tidy_failures(conn: Connection, result: BackstopResult) -> None:
        """Forget the failed saves of jobs no longer waiting for a result; count the rest."""
        row = conn.execute(query("tidy_result_failures"), {"limit": FAILURES_TIDIED}).fetchone()
        result.results_failing = int(row["failing"]) if row else 0

"""The backstop sweep: no finished result is lost when no client was watching.

It looks only at done jobs of stages with a ``render_result`` that still hold their output, have
no result decided, and have not been touched for the grace window: oldest first, a bounded batch
locked ``FOR UPDATE OF jobs SKIP LOCKED`` (through a door), rendered with the stage's own
function and saved as the worker's. Each batch's results commit together; their
``after_result`` hooks fire right after, before the sweep looks at anything else, so a stop
request finishes what was recorded, hooks included. Hooks still owed after the grace window (a
process that died between the two, a hook that failed) are fired from here as well.

A sweep never stacks on itself in one process: a second call while one is in flight returns
None at once. Two processes (a rolling deploy) may sweep together; the row locks keep each
result written once and each hook fired once. It runs apart from the sweeper, so lease
recovery never waits behind a slow hook.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from ..db import Connection, connect
from ..errors import ConfigurationError
from ..queries import query
from ..results import ResultSettings, fire_hook, record_worker_result, result_source
from ..stage import Stage
from ..tenancy import tenants_transaction
from .vacuuming import vacuum_hot_tables

log = logging.getLogger("fairqueue.backstop")

# Days of finished jobs made ahead: a week of passes may find the table busy before one is due.
DAYS_AHEAD = 7
# How long making or dropping a day waits for the finished jobs' lock before it is left for the
# next pass: every reader of finished jobs queues behind a waiting step, so the wait is short.
PARTITION_LOCK_WAIT_S = 0.2


def _must_end(stop: threading.Event | None, deadline: float | None) -> bool:
    """A stop was asked for, or the pass's budget ran out."""
    stopped = stop is not None and stop.is_set()
    return stopped or (deadline is not None and time.monotonic() >= deadline)


@dataclass
class BackstopResult:
    written: int = 0
    refused: int = 0  # precedence kept a client's row
    render_errors: list[str] = field(default_factory=list)
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
    interrupted: bool = False


class Backstop:
    """The backstop of one process: holds its stages, settings and the no-stacking guard."""

    def __init__(
        self,
        dsn: str | None,
        stages: Sequence[Stage],
        settings: ResultSettings | None = None,
    ) -> None:
        self.dsn = dsn
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

        A stop request, or ``budget_s`` running out, ends it between batches: the batch in
        flight and its hooks always finish. ``conn`` is an open autocommit connection to sweep
        on (a Lambda keeps one across invocations), left open; without it the sweep opens one
        from the DSN given at construction (or ``DATABASE_URL``) and closes it.
        """
        if conn is not None and not conn.autocommit:
            raise ConfigurationError("the backstop sweeps on an autocommit connection")
        if not self._in_flight.acquire(blocking=False):
            return None
        deadline = None if budget_s is None else time.monotonic() + budget_s
        try:
            if conn is not None:
                return self._rescue(conn, stop, deadline)
            with connect(self.dsn, autocommit=True, as_app_role=True) as owned:
                return self._rescue(owned, stop, deadline)
        finally:
            self._in_flight.release()

    def _rescue(
        self, conn: Connection, stop: threading.Event | None, deadline: float | None
    ) -> BackstopResult:
        result = BackstopResult()
        while self.rendering:
            if _must_end(stop, deadline):
                result.interrupted = True
                return result
            recorded, claimed = self._record_batch(conn, result)
            # Fired before anything else: a stop after this point leaves no hook owed here.
            for job_id, tenant_id, stage in recorded:
                result.hooks_fired += fire_hook(conn, stage, job_id, tenant_id)
            if claimed < self.settings.batch:
                break
        result.hooks_fired += self._fire_owed_hooks(conn, stop)
        self._move_finished(conn, result, stop, deadline)
        self._retention(conn, result)
        # A vacuum cannot be stopped half way: a pass out of time leaves it to the next.
        if not _must_end(stop, deadline):
            result.tables_vacuumed = vacuum_hot_tables(conn)
        return result

    def _move_finished(
        self,
        conn: Connection,
        result: BackstopResult,
        stop: threading.Event | None,
        deadline: float | None,
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
        self, conn: Connection, result: BackstopResult
    ) -> tuple[list[tuple[UUID, str | None, Stage]], int]:
        """Lock, render and save one batch in one transaction; what owes a hook, and how many
        jobs were claimed."""
        recorded: list[tuple[UUID, str | None, Stage]] = []
        with tenants_transaction(conn) as clamp:
            batch = conn.execute(
                query("claim_missing_results"),
                {
                    "types": list(self.rendering),
                    "grace_s": self.settings.grace_s,
                    "limit": self.settings.batch,
                },
            ).fetchall()
            for item in batch:
                clamp(item["tenant_id"])
                source = result_source(conn, item["id"], item["tenant_id"])
                assert source is not None, "the door locked this row for us"
                stage = self.rendering[source["type"]]
                try:
                    # A savepoint: one job's render error does not undo the batch.
                    with conn.transaction():
                        written = record_worker_result(conn, source, stage)
                except Exception as exc:
                    log.exception("render_result of %s failed for job %s", stage.name, item["id"])
                    result.render_errors.append(f"{stage.name} {item['id']}: {exc}")
                    continue
                if written:
                    result.written += 1
                    if stage.after_result is not None:
                        recorded.append((source["result_job_id"], source["tenant_id"], stage))
                else:
                    result.refused += 1
        return recorded, len(batch)

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
        days = conn.execute(
            query("keep_partitions"),
            {
                "keep_s": self.settings.job_retention_s,
                "ahead": DAYS_AHEAD,
                "lock_wait_s": PARTITION_LOCK_WAIT_S,
            },
        ).fetchone()
        result.outputs_trimmed = int(trimmed["trimmed"]) if trimmed else 0
        if days is not None:
            result.days_made = int(days["made"])
            result.days_dropped = int(days["dropped"])
            result.days_skipped = int(days["skipped"])

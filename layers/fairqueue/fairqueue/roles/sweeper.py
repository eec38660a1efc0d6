"""The sweeper, every minute: what no doorbell and no crashed run may leave undone.

- Rings again every due job of a doorbell stage whose last doorbell is stale (or never went).
- Fails jobs whose run died on their last attempt, and runs their stages' give-up hooks.
- Runs again the give-up hooks still owed a minute after their jobs failed (the process died
  before the hook ran to its end, or the hook raised).
- Closes the runs whose process died before closing them (open longer than any invocation
  lives: ``FAIRQUEUE_RUN_ABANDONED_AFTER_S``), as ``error`` with a message that says so.
- Moves the served window's edge, so claims never pay for a day without traffic.
- Starts the next job of any lane left waiting with nothing holding it (a lost promotion).
- Makes every due tick of the schedules a job, once (fairqueue.roles.scheduling), after
  keeping the schedules declared in code (``FAIRQUEUE_SCHEDULES``) in step with the table.
- Reads backlog and stuck work per type from the table (not from queue depth) for metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from .. import lanes
from ..db import Connection
from ..doorbells import Doorbell, ringing
from ..pipeline.run import invocation
from ..queries import query
from ..runs import close_abandoned_runs
from ..schedules import Schedule
from ..settings import settings
from ..stage import Stage
from ..status import TypeStatus, queue_status
from .scheduling import load_schedules, sweep_schedules

DEFAULT_STALE_AFTER_S = 60.0


@dataclass(frozen=True)
class SweepResult:
    run_id: UUID
    republished: int
    ring_failures: int
    abandoned_failed: int
    lanes_promoted: int
    status: list[TypeStatus]
    abandoned_runs_closed: int = 0
    owed_give_ups_fired: int = 0
    schedule_ticks: int = 0


def sweep(
    dsn: str | None,
    stages: Sequence[Stage],
    *,
    conn: Connection | None = None,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
    limit: int = 1000,
    summary: Mapping[str, Any] | None = None,
    declared: Sequence[Schedule] | None = None,
) -> SweepResult:
    """One sweep, one runs row (trigger ``sweeper``); ``summary`` is recorded on the row as
    it opens (the sweeper function records the tick that started it there). ``declared``:
    the schedules declared in code, by default those ``FAIRQUEUE_SCHEDULES`` names."""
    schedules = load_schedules() if declared is None else declared
    doorbell_types = [s.name for s in stages if s.delivery == "doorbell"]
    with invocation(dsn, stages, trigger="sweeper", conn=conn, opening_summary=summary) as run:
        run.outcomes.fail_abandoned()
        give_ups_fired = run.outcomes.fire_owed_give_ups()
        run.tally.count("owed_give_ups_fired", give_ups_fired)
        with run.db.use() as c:
            c.execute(query("expire_served"))
            runs_closed = close_abandoned_runs(c, settings().run_abandoned_after_s)
            rows = c.execute(
                query("stale_doorbells"),
                {"types": doorbell_types, "stale_s": stale_after_s, "limit": limit},
            ).fetchall()
            bells = [Doorbell(job_id=row["id"], tenant_id=row["tenant_id"]) for row in rows]
            failed = ringing.ring(c, bells)
            rung = [bell.job_id for bell in bells if bell not in failed]
            if rung:
                c.execute(query("mark_rung"), {"ids": rung})
            promoted = lanes.promote_stalled(c)
            scheduled = sweep_schedules(c, schedules)
            status = queue_status(c)
        run.tally.count("lanes_promoted", promoted)
        run.tally.count("abandoned_runs_closed", runs_closed)
        run.tally.count("republished", len(rung))
        run.tally.count("ring_failures", len(failed))
        run.tally.count("schedule_ticks", scheduled.ticks_made)
        if scheduled.declared_problem is not None:
            # The problem itself is in the sweep's log.
            run.tally.count("schedules_declared_refused")
    return SweepResult(
        run_id=run.run_id,
        republished=len(rung),
        ring_failures=len(failed),
        abandoned_failed=run.tally.abandoned_failed,
        lanes_promoted=promoted,
        status=status,
        abandoned_runs_closed=runs_closed,
        owed_give_ups_fired=give_ups_fired,
        schedule_ticks=scheduled.ticks_made,
    )

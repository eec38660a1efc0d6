"""The sweeper's schedules: the ones declared in code kept in step with the table, then every
due tick made a job, once (docs/design/schedules.md).

A sweep reads the due schedules by their next tick, a batch at a time, locked and skipping the
rows another sweep holds, works out their ticks here (fairqueue.schedules.ticks), and in the same
transaction moves each schedule past them and inserts their jobs (fairqueue.schedule_ticks).
A tick is made by the one commit that moves its schedule past it: two sweeps at once, a retried
invocation or a redeploy find it made and the schedule moved on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from cronsim import CronSimError

from ..db import Connection
from ..doorbells import Doorbell, ringing
from ..errors import ConfigurationError, FairqueueError, describe
from ..jobs import doorbell_of
from ..queries import query
from ..schedules import Schedule, database_now
from ..schedules.ticks import ON_TIME, Rule, catch_up_of, ticks_to_make
from ..settings import settings
from .function import import_target

log = logging.getLogger("fairqueue.scheduling")

# Due schedules read and moved per transaction; a sweep goes on while batches come back full,
# up to MAX_BATCHES of them (the rest wait for the next sweep).
BATCH: Final = 1000
MAX_BATCHES: Final = 100
# How long a schedule whose rule cannot be read waits before a sweep tries it again.
RETRY_UNREADABLE: Final = timedelta(hours=1)


@dataclass(frozen=True)
class ScheduleSweep:
    """What one sweep did with the schedules."""

    ticks_made: int
    declared_changed: int
    declared_removed: int
    # Why the declared schedules were left as they were, when one could not be checked.
    declared_problem: str | None = None


def load_schedules(spec: str | None = None) -> list[Schedule] | None:
    """The schedules ``module:attribute`` names (``FAIRQUEUE_SCHEDULES``), or None when it is
    not set: the declared schedules are then left as they are."""
    target = spec or settings().schedules
    if target is None:
        return None
    value = import_target(target, "FAIRQUEUE_SCHEDULES", "schedule list")
    schedules = list(value) if isinstance(value, list | tuple) else None
    if schedules is None or not all(isinstance(s, Schedule) for s in schedules):
        raise ConfigurationError(f"{target!r} must be a list of Schedule")
    names = [(s.tenant_id, s.name) for s in schedules]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{target!r} names a schedule of one tenant twice")
    return schedules


def sweep_schedules(
    conn: Connection,
    declared: Sequence[Schedule] | None,
    *,
    on_time: timedelta = ON_TIME,
    batch: int = BATCH,
) -> ScheduleSweep:
    """Keep the declared schedules in step (None: leave them), then make every due tick,
    ``batch`` schedules a transaction."""
    changed = removed = 0
    problem = None
    if declared is not None:
        try:
            changed, removed = _declare(conn, declared)
        except FairqueueError as exc:
            # A declared schedule this process cannot check (its stage is not in the stage
            # list, its payload no longer fits) leaves the table as it was; the ticks due are
            # still made, and the sweeper's other work still done.
            problem = describe(exc)
            log.error("the declared schedules were left as they were: %s", problem)
    made = 0
    for _ in range(MAX_BATCHES):
        swept = _sweep_batch(conn, on_time, batch)
        if swept.bells:
            # A bell that fails to ring is rung again by a later sweep (stale_doorbells).
            ringing.ring(conn, swept.bells)
        made += swept.made
        if swept.read < batch:
            break
    return ScheduleSweep(
        ticks_made=made,
        declared_changed=changed,
        declared_removed=removed,
        declared_problem=problem,
    )


def _declare(conn: Connection, declared: Sequence[Schedule]) -> tuple[int, int]:
    """One statement: the declared schedules, each with its next tick from now in case it is
    new or changed."""
    with conn.transaction():
        now = database_now(conn)
        rows: list[dict[str, Any]] = []
        for schedule in declared:
            definition = schedule.definition()
            columns = definition.columns()
            columns["payload"] = json.loads(definition.payload_json)
            columns["next_tick_at"] = definition.rule.next_after(now).isoformat()
            rows.append(columns)
        row = conn.execute(query("schedules_declare"), {"declared": json.dumps(rows)}).fetchone()
    assert row is not None
    return int(row["changed"]), int(row["removed"])


@dataclass(frozen=True)
class _Batch:
    read: int  # due schedules read
    made: int  # jobs made
    bells: list[Doorbell]  # what the jobs of doorbell stages ring once committed


def _sweep_batch(conn: Connection, on_time: timedelta, batch: int) -> _Batch:
    """One transaction: up to ``batch`` due schedules moved past their ticks, the ticks made."""
    with conn.transaction():
        now = database_now(conn)
        due = conn.execute(query("schedules_due"), {"limit": batch}).fetchall()
        if not due:
            return _Batch(read=0, made=0, bells=[])
        params: dict[str, list[Any]] = {
            key: [] for key in ("ids", "was", "next", "last", "tick_ids", "tick_ats")
        }
        for row in due:
            rule = Rule(cron=row["cron"], every_s=row["every_s"], timezone=row["timezone"])
            try:
                ticks = ticks_to_make(
                    rule, row["next_tick_at"], now, catch_up_of(row["catch_up"]), on_time
                )
                next_tick = rule.next_after(now)
            except (CronSimError, ValueError, KeyError, FairqueueError) as exc:
                # A rule this process cannot read (written past the library's checks, or a
                # timezone its tzdata lacks) must not stop every other schedule's ticks: it is
                # put off for RETRY_UNREADABLE and logged each time.
                log.error("schedule %s: its rule cannot be read: %s", row["id"], describe(exc))
                ticks, next_tick = [], now + RETRY_UNREADABLE
            params["ids"].append(row["id"])
            params["was"].append(row["next_tick_at"])
            params["next"].append(next_tick)
            params["last"].append(ticks[-1] if ticks else None)
            params["tick_ids"].extend(row["id"] for _ in ticks)
            params["tick_ats"].extend(ticks)
        made = conn.execute(query("schedule_ticks"), params).fetchall()
    bells = [doorbell_of(job["type"], job["tenant_id"], job["id"]) for job in made]
    return _Batch(read=len(due), made=len(made), bells=[b for b in bells if b is not None])

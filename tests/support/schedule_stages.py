"""Stages and helpers the schedule tests share: a type for the ticks' jobs, and reads of what
the sweeps made, as the superuser sees it across tenants."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fairqueue import Schedule, Stage
from fairqueue.db import Connection

TICK = Stage("tick", handler=lambda job: None, max_attempts=5)


def tick_jobs(conn: Connection) -> list[tuple[UUID, datetime]]:
    """Every job a tick made, open or finished: its schedule and its tick's time."""
    rows = conn.execute(
        "select fairqueue.schedule_of_tick_key(dedupe_key) as schedule_id,"
        " (substr(dedupe_key, 47))::timestamptz as tick_at"
        "  from fairqueue.all_jobs where fairqueue.schedule_of_tick_key(dedupe_key) is not null"
        " order by 1, 2"
    ).fetchall()
    return [(r["schedule_id"], r["tick_at"]) for r in rows]


# What FAIRQUEUE_SCHEDULES names in the tests of declared schedules.
SCHEDULES = [Schedule("nightly-report", "tick", cron="0 3 * * *", timezone="Europe/Berlin")]

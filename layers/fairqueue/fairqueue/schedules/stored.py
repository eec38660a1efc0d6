"""A tenant's schedules at run time: add, pause, resume, remove, read. Each works under the
tenant's clamp, through the doors of sql/functions/schedules.sql: one tenant neither sees nor
changes another's schedules. Checked before anything is written: a bad rule is
InvalidSchedule, an unknown job type UnknownJobType, and nothing is stored."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ..db import Connection
from ..errors import DuplicateSchedule, InvalidPayload, UnknownSchedule
from ..inputs import check_label
from ..job_info import MAX_LISTED
from ..queries import query
from ..tenancy import mismatch_of, tenant_scope, tenants_transaction
from .schedule import Schedule
from .ticks import CatchUp, Rule


@dataclass(frozen=True)
class ScheduleInfo:
    """One stored schedule, and the last job its ticks made."""

    id: UUID
    tenant_id: str | None
    name: str
    job_type: str
    cron: str | None
    every_s: int | None
    timezone: str
    payload: dict[str, Any]
    group_id: str | None
    max_attempts: int
    catch_up: str
    declared: bool
    paused: bool
    next_tick_at: datetime
    last_tick_at: datetime | None
    last_job_id: UUID | None
    last_job_status: str | None
    created_at: datetime

    def rule(self) -> Rule:
        return Rule(cron=self.cron, every_s=self.every_s, timezone=self.timezone)


def add_schedule(
    conn: Connection,
    name: str,
    job_type: str,
    *,
    cron: str | None = None,
    every: timedelta | None = None,
    timezone: str = "UTC",
    payload: dict[str, Any] | None = None,
    tenant_id: str | None = None,
    group_id: str | None = None,
    catch_up: CatchUp = "one",
) -> UUID:
    """Store a schedule of the tenant; its first tick is the first after now. Its id; a name
    the tenant already has is DuplicateSchedule."""
    definition = Schedule(
        name,
        job_type,
        cron=cron,
        every=every,
        timezone=timezone,
        payload=payload,
        tenant_id=tenant_id,
        group_id=group_id,
        catch_up=catch_up,
    ).definition()
    with tenant_scope(conn, tenant_id):
        now = database_now(conn)
        row = _door(
            conn,
            "schedule_add",
            {**definition.columns(), "next_tick_at": definition.rule.next_after(now)},
        )
    if row["id"] is None:
        raise DuplicateSchedule(f"{_owner(tenant_id)} already has a schedule named {name!r}")
    schedule_id: UUID = row["id"]
    return schedule_id


def pause_schedule(conn: Connection, name: str, *, tenant_id: str | None = None) -> None:
    """A paused schedule makes no job until it is resumed."""
    _check(name, tenant_id)
    with tenant_scope(conn, tenant_id):
        row = _door(
            conn,
            "schedule_set_paused",
            {"tenant_id": tenant_id, "name": name, "paused": True, "next_tick_at": None},
        )
    _found(row, name, tenant_id)


def resume_schedule(conn: Connection, name: str, *, tenant_id: str | None = None) -> None:
    """A resumed schedule makes its next tick after now; the ticks due while it was paused
    are not made."""
    _check(name, tenant_id)
    with tenant_scope(conn, tenant_id):
        schedule = _read_one(conn, name, tenant_id)
        params = {
            "tenant_id": tenant_id,
            "name": name,
            "paused": False,
            "next_tick_at": schedule.rule().next_after(database_now(conn)),
        }
        _found(_door(conn, "schedule_set_paused", params), name, tenant_id)


def remove_schedule(conn: Connection, name: str, *, tenant_id: str | None = None) -> None:
    """No tick after this; the jobs the schedule made stay as they are."""
    _check(name, tenant_id)
    with tenant_scope(conn, tenant_id):
        row = _door(conn, "schedule_remove", {"tenant_id": tenant_id, "name": name})
    _found(row, name, tenant_id)


def list_schedules(conn: Connection, *, tenant_id: str | None = None) -> list[ScheduleInfo]:
    """The tenant's schedules (None: those of no tenant), by name."""
    check_label("tenant_id", tenant_id)
    with tenant_scope(conn, tenant_id):
        return _read(conn, None, tenant_id)


def get_schedule(conn: Connection, name: str, *, tenant_id: str | None = None) -> ScheduleInfo:
    """One schedule of the tenant by name, or UnknownSchedule."""
    _check(name, tenant_id)
    with tenant_scope(conn, tenant_id):
        return _read_one(conn, name, tenant_id)


def find_schedules(
    conn: Connection,
    *,
    tenant_id: str | None = None,
    name: str | None = None,
    limit: int = 1000,
) -> list[ScheduleInfo]:
    """An operator's view across tenants (``tenant_id`` None: every tenant), by tenant and
    name: the door names the schedules, each tenant's are then read under its clamp."""
    check_label("tenant_id", tenant_id)
    check_label("name", name)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LISTED:
        raise InvalidPayload(f"limit must be a whole number from 1 to {MAX_LISTED}, got {limit!r}")
    found = conn.execute(
        query("find_schedules"), {"tenant_id": tenant_id, "name": name, "limit": limit}
    ).fetchall()
    tenants: dict[str | None, set[UUID]] = defaultdict(set)
    for row in found:
        tenants[row["tenant_id"]].add(row["id"])
    read: dict[UUID, ScheduleInfo] = {}
    with tenants_transaction(conn) as clamp_to:
        for tenant, ids in tenants.items():
            clamp_to(tenant)
            read.update({s.id: s for s in _read(conn, name, tenant) if s.id in ids})
    return [read[row["id"]] for row in found if row["id"] in read]


def schedule_of_job(conn: Connection, dedupe_key: str | None, tenant_id: str | None) -> str | None:
    """The name of the tenant's schedule whose tick made a job with this dedupe key, read under
    the tenant's clamp; None for any other job, or when the schedule is gone."""
    if dedupe_key is None:
        return None
    with tenant_scope(conn, tenant_id):
        row = conn.execute(query("schedule_of_job"), {"dedupe_key": dedupe_key}).fetchone()
    return None if row is None else str(row["name"])


def database_now(conn: Connection) -> datetime:
    """The transaction's time, which the doors compare next ticks with."""
    row = conn.execute(query("sweep_now")).fetchone()
    assert row is not None
    now: datetime = row["now"]
    return now


def _door(conn: Connection, name: str, params: dict[str, Any]) -> dict[str, Any]:
    row = conn.execute(query(name), params).fetchone()
    assert row is not None, "a schedule door answers one row"
    if not row["matches"]:
        raise mismatch_of(row, params["tenant_id"])
    return row


def _read(conn: Connection, name: str | None, tenant_id: str | None) -> list[ScheduleInfo]:
    rows = conn.execute(query("schedule_rows"), {"tenant_id": tenant_id, "name": name})
    return [ScheduleInfo(**row) for row in rows.fetchall()]


def _read_one(conn: Connection, name: str, tenant_id: str | None) -> ScheduleInfo:
    found = _read(conn, name, tenant_id)
    if not found:
        raise _unknown(name, tenant_id)
    return found[0]


def _check(name: str, tenant_id: str | None) -> None:
    check_label("schedule name", name, required=True)
    check_label("tenant_id", tenant_id)


def _found(row: dict[str, Any], name: str, tenant_id: str | None) -> None:
    if row["id"] is None:
        raise _unknown(name, tenant_id)


def _unknown(name: str, tenant_id: str | None) -> UnknownSchedule:
    return UnknownSchedule(f"{_owner(tenant_id)} has no schedule named {name!r}")


def _owner(tenant_id: str | None) -> str:
    return f"tenant {tenant_id!r}" if tenant_id is not None else "no tenant"

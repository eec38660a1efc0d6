"""What the dashboard reads beyond the CLI's own reads: the served standings summed per tenant,
group and plan, the day's fairness, credit balances and the runs by hour, each through a door
of sql/functions/dashboard.sql (or the runs table, which the application role reads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final
from uuid import UUID

from ..db import Connection
from ..overview import split_group_key
from ..queries import query

# How many rows a table of the dashboard shows: enough to act on, few enough to render fast.
SHOWN: Final = 50


@dataclass(frozen=True)
class TenantService:
    """A tenant's jobs served in the last day over its groups; ``tenant_id`` None: no tenant."""

    tenant_id: str | None
    plan: str
    groups: int
    served: int
    waiting: int
    paused: int


@dataclass(frozen=True)
class Fairness:
    """The day's service in one row; the indexes are None when nothing was served."""

    tenants: int
    groups: int
    served: int
    waiting: int
    tenant_index: float | None
    group_index: float | None


@dataclass(frozen=True)
class PlanShare:
    """A plan's tenants, groups, jobs served in the last day and groups waiting."""

    plan: str
    tenants: int
    groups: int
    served: int
    waiting: int


@dataclass(frozen=True)
class WaitingGroup:
    """A group with due work: its oldest due job ``head_id`` and when that was made."""

    type: str
    group_key: str
    plan: str
    served: int
    paused: bool
    head_id: UUID
    head_created_at: datetime

    @property
    def tenant_id(self) -> str | None:
        """The group's tenant; None for no tenant."""
        return split_group_key(self.group_key)[0]

    @property
    def group_id(self) -> str | None:
        """The group's id; None for its tenant's default group."""
        return split_group_key(self.group_key)[1]


@dataclass(frozen=True)
class GroupRow:
    """A group over its types: served in the last day, whether it has due work, whether paused."""

    group_key: str
    tenant_id: str | None
    served: int
    waiting: bool
    paused: bool

    @property
    def group_id(self) -> str | None:
        """The group's id; None for its tenant's default group, which cannot be paused."""
        return split_group_key(self.group_key)[1]


@dataclass(frozen=True)
class Balance:
    """A tenant's credits: the balance, and what was granted, spent and refunded."""

    tenant_id: str
    balance: int
    granted: int
    spent: int
    refunded: int


@dataclass(frozen=True)
class RunHour:
    """The runs that started in one hour and stopped for one reason (None: still open)."""

    hour: datetime
    stop_reason: str | None
    runs: int
    jobs_done: int
    jobs_failed: int


def tenant_service(conn: Connection, limit: int = SHOWN) -> list[TenantService]:
    """The most served tenants of the last day first."""
    rows = conn.execute(query("dashboard_tenants"), {"limit": limit}).fetchall()
    return [
        TenantService(
            r["tenant_id"],
            r["plan"],
            int(r["groups"]),
            int(r["served"]),
            int(r["waiting"]),
            int(r["paused"]),
        )
        for r in rows
    ]


def fairness(conn: Connection) -> Fairness:
    """The day's service between tenants and between groups."""
    r = conn.execute(query("dashboard_fairness")).fetchone()
    assert r is not None
    return Fairness(
        int(r["tenants"]),
        int(r["groups"]),
        int(r["served"]),
        int(r["waiting"]),
        r["tenant_index"],
        r["group_index"],
    )


def plan_shares(conn: Connection) -> list[PlanShare]:
    """Every plan with groups, by name ('' is the plan of the tenants with none)."""
    rows = conn.execute(query("dashboard_plans")).fetchall()
    return [
        PlanShare(
            r["plan"], int(r["tenants"]), int(r["groups"]), int(r["served"]), int(r["waiting"])
        )
        for r in rows
    ]


def longest_waiting(conn: Connection, limit: int = SHOWN) -> list[WaitingGroup]:
    """The groups whose oldest due job was made first."""
    rows = conn.execute(query("dashboard_waiting"), {"limit": limit}).fetchall()
    return [WaitingGroup(**r) for r in rows]


def group_rows(conn: Connection, limit: int = SHOWN) -> list[GroupRow]:
    """Paused groups first, then the most served."""
    rows = conn.execute(query("dashboard_groups"), {"limit": limit}).fetchall()
    return [
        GroupRow(r["group_key"], r["tenant_id"], int(r["served"]), r["waiting"], r["paused"])
        for r in rows
    ]


def balances(conn: Connection, limit: int = SHOWN) -> list[Balance]:
    """Every tenant that has a credit entry, by id."""
    rows = conn.execute(query("dashboard_balances"), {"limit": limit}).fetchall()
    return [
        Balance(
            r["tenant_id"],
            int(r["balance"]),
            int(r["granted"]),
            int(r["spent"]),
            int(r["refunded"]),
        )
        for r in rows
    ]


def run_hours(conn: Connection) -> list[RunHour]:
    """The last day's runs by hour and stop reason, oldest hour first."""
    rows = conn.execute(query("dashboard_run_hours")).fetchall()
    return [
        RunHour(
            r["hour"], r["stop_reason"], int(r["runs"]), int(r["jobs_done"]), int(r["jobs_failed"])
        )
        for r in rows
    ]

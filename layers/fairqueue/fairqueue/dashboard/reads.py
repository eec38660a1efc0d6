"""What the dashboard reads beyond the CLI's own reads: the backlog per type, the day's service
(its fairness, each plan's share, the most served tenants and standings), the longest waiting
standings, the groups, credit balances and the runs by hour, each through a door of
sql/functions/dashboard.sql (or the runs table, which the application role reads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final
from uuid import UUID

from ..db import Connection
from ..overview import GroupKeyed, ServedGroup, split_group_key
from ..queries import query

# How many rows a table of the dashboard shows: enough to act on, few enough to render fast.
SHOWN: Final = 50


@dataclass(frozen=True)
class Backlog:
    """A type's jobs by state, every tenant's; ``failed_today``: failed in the last day."""

    type: str
    queued: int
    due: int
    scheduled: int
    running: int
    stuck: int
    failed_today: int


@dataclass(frozen=True)
class TenantService:
    """A tenant's jobs served in the last day over its standings (a group's place in one
    type's order), those waiting and those paused; ``tenant_id`` None: no tenant."""

    tenant_id: str | None
    plan: str
    standings: int
    served: int
    waiting: int
    paused: int


@dataclass(frozen=True)
class Fairness:
    """The day's service over the tenants and standings with work; the indexes (Jain's) are
    None when nothing was served."""

    tenants: int
    standings: int
    served: int
    waiting: int
    tenant_index: float | None
    standing_index: float | None


@dataclass(frozen=True)
class PlanShare:
    """A plan's tenants, standings, jobs served in the last day and standings waiting."""

    plan: str
    tenants: int
    standings: int
    served: int
    waiting: int


@dataclass(frozen=True)
class WaitingGroup(GroupKeyed):
    """A group with due work: its oldest due job ``head_id`` and when that was made."""

    type: str
    group_key: str
    plan: str
    served: int
    paused: bool
    head_id: UUID
    head_created_at: datetime


@dataclass(frozen=True)
class GroupRow:
    """A group: its most served type's count in the last day, whether any of its types has due
    work, whether it is paused."""

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


def backlog(conn: Connection) -> list[Backlog]:
    """Every type with open jobs or jobs failed in the last day, by name."""
    return [Backlog(**r) for r in conn.execute(query("dashboard_backlog")).fetchall()]


@dataclass(frozen=True)
class Service:
    """The last day's service: its fairness, each plan's share, the most served tenants."""

    fairness: Fairness
    plans: list[PlanShare]
    tenants: list[TenantService]


def service(conn: Connection, limit: int = SHOWN) -> Service:
    """The day's service in one read of the standings: the totals, every plan, and the
    ``limit`` most served tenants first."""
    rows = conn.execute(query("dashboard_service"), {"limit": limit}).fetchall()
    total = next(r for r in rows if r["kind"] == "total")
    served = float(total["served"] or 0)
    tenants_count, standings = int(total["tenants"]), int(total["standings"] or 0)
    fairness = Fairness(
        tenants_count,
        standings,
        int(served),
        int(total["waiting"] or 0),
        _jain(served, tenants_count, float(total["tenant_squares"] or 0)),
        _jain(served, standings, float(total["standing_squares"] or 0)),
    )
    plans = [
        PlanShare(
            r["plan"], int(r["tenants"]), int(r["standings"]), int(r["served"]), int(r["waiting"])
        )
        for r in rows
        if r["kind"] == "plan"
    ]
    tenants = [
        TenantService(
            r["tenant_id"],
            r["plan"],
            int(r["standings"]),
            int(r["served"]),
            int(r["waiting"]),
            int(r["paused"]),
        )
        for r in rows
        if r["kind"] == "tenant"
    ]
    return Service(fairness, plans, tenants)


def _jain(total: float, count: int, squares: float) -> float | None:
    """Jain's index of ``count`` shares adding up to ``total`` whose squares add up to
    ``squares``: 1 when all are equal, 1/count when one has everything."""
    return total * total / (count * squares) if squares else None


def most_served(conn: Connection, limit: int) -> list[ServedGroup]:
    """The standings served most in the last day."""
    rows = conn.execute(query("dashboard_most_served"), {"limit": limit}).fetchall()
    return [
        ServedGroup(str(r["type"]), str(r["group_key"]), int(r["served"]), waiting=False)
        for r in rows
    ]


def longest_waiting(conn: Connection, limit: int = SHOWN) -> list[WaitingGroup]:
    """The groups whose oldest due job was made first."""
    rows = conn.execute(query("dashboard_waiting"), {"limit": limit}).fetchall()
    return [WaitingGroup(**r) for r in rows]


def group_rows(conn: Connection, limit: int = SHOWN) -> list[GroupRow]:
    """Paused groups first, then those with the most served standing."""
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

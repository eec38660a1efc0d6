"""Rationed budgets with a reset time, shared by every invocation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from .db import Connection
from .errors import ConfigurationError, UnknownQuota
from .inputs import check_label
from .queries import query
from .stage import Defer

# The longest period the database accepts (sql/functions/quotas.sql).
MAX_PERIOD = timedelta(days=366)
# The most units a quota holds: as much as a balance may (lanes.MAX_BALANCE), well inside the
# bigint columns, so that no definition reaches the database as a number it has no door for.
MAX_UNITS = 10**15

QuotaStop = Literal["quota_reserve", "quota_exhausted"]


@dataclass(frozen=True)
class QuotaState:
    name: str
    capacity: int
    remaining: int
    reserve: int
    resets_at: datetime

    def stop_reason(self) -> QuotaStop | None:
        """Why a pipeline must not claim more work that spends this quota, if it must not."""
        if self.remaining <= 0:
            return "quota_exhausted"
        if self.remaining <= self.reserve:
            return "quota_reserve"
        return None


def define_quota(
    conn: Connection, name: str, *, capacity: int, period: timedelta, reserve: int = 0
) -> None:
    """Create a quota full, or change its capacity, reserve and period (remaining is kept)."""
    conn.execute(query("define_quota"), _definition(name, capacity, period, reserve))


def define_quota_if_absent(
    conn: Connection, name: str, *, capacity: int, period: timedelta, reserve: int = 0
) -> bool:
    """Create a quota full unless one of that name exists, which is kept as it is (a stage list
    that brings its own quota never overwrites an operator's); whether it was created now."""
    row = conn.execute(
        query("define_quota_if_absent"), _definition(name, capacity, period, reserve)
    ).fetchone()
    return row is not None


def _definition(name: str, capacity: int, period: timedelta, reserve: int) -> dict[str, Any]:
    """A quota's definition checked, as the doors' parameters."""
    check_label("a quota's name", name, required=True)
    if not 0 <= reserve <= capacity <= MAX_UNITS:
        raise ConfigurationError(
            f"quota {name!r}: need 0 <= reserve <= capacity <= {MAX_UNITS:,},"
            f" got {reserve}, {capacity}"
        )
    if not timedelta(0) < period <= MAX_PERIOD:
        raise ConfigurationError(
            f"quota {name!r}: the period must be over 0 and at most 366 days, got {period}"
        )
    return {
        "name": name,
        "capacity": capacity,
        "reserve": reserve,
        "period_s": period.total_seconds(),
    }


def read_quota(conn: Connection, name: str) -> QuotaState:
    """The quota as it is now, reset first if its reset time has passed."""
    with conn.transaction():
        conn.execute(query("reset_due_quota"), {"name": name})
        row = conn.execute(query("read_quota"), {"name": name}).fetchone()
    if row is None:
        raise UnknownQuota(
            f"no quota named {name!r}: define it with define_quota(), or"
            f" `fairqueue quotas define {name} --capacity N --period SECONDS`"
        )
    return _state(row)


def list_quotas(conn: Connection) -> list[QuotaState]:
    """Every quota as it is now, in name order; the ones whose reset time has passed are reset
    first, as read_quota resets the one it reads."""
    with conn.transaction():
        conn.execute(query("reset_due_quotas"))
        rows = conn.execute(query("list_quotas")).fetchall()
    return [_state(row) for row in rows]


def _state(row: Mapping[str, Any]) -> QuotaState:
    return QuotaState(
        name=str(row["name"]),
        capacity=int(row["capacity"]),
        remaining=int(row["remaining"]),
        reserve=int(row["reserve"]),
        resets_at=row["resets_at"],
    )


def spend(conn: Connection, name: str, units: int) -> int:
    """Spend units without touching the reserve; returns what remains, or raises Defer."""
    if units < 1:
        raise ConfigurationError(f"quota {name!r}: spend at least one unit, got {units}")
    row = conn.execute(query("spend_quota"), {"name": name, "units": units}).fetchone()
    if row is not None:
        return int(row["remaining"])
    state = read_quota(conn, name)
    raise Defer(state.resets_at, reason=f"quota {name!r} cannot spend {units} until it resets")

"""One look at the whole queue, for ``fairqueue top``: each type's jobs by state, the last runs
and the most and least served groups."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .db import Connection
from .queries import query
from .runs import RunRow, recent_runs
from .status import TypeStatus, queue_status


@dataclass(frozen=True)
class ServedGroup:
    """A group's jobs of a type served in the last day; ``waiting``: it has due work now."""

    type: str
    group_key: str
    served: int
    waiting: bool


@dataclass(frozen=True)
class Overview:
    taken_at: datetime
    types: list[TypeStatus]
    runs: list[RunRow]
    most_served: list[ServedGroup]
    least_served: list[ServedGroup]


def overview(conn: Connection, *, runs: int = 8, groups: int = 5) -> Overview:
    """The queue as it is now; ``conn`` autocommits or the caller commits."""
    now = conn.execute("select now() as now").fetchone()
    assert now is not None
    served = conn.execute(query("served_groups"), {"limit": groups}).fetchall()

    def group(row: dict[str, object]) -> ServedGroup:
        return ServedGroup(
            str(row["type"]), str(row["group_key"]), int(str(row["served"])), bool(row["waiting"])
        )

    return Overview(
        taken_at=now["now"],
        types=queue_status(conn),
        runs=recent_runs(conn, runs),
        most_served=[group(r) for r in served if r["most"]],
        least_served=[group(r) for r in served if not r["most"]],
    )

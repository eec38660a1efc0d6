"""One look at the whole queue, for ``fairqueue top``: each type's jobs by state, the last runs
and the most and least served groups."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from .db import Connection
from .queries import query
from .runs import RunRow, recent_runs
from .status import TypeStatus, queue_status


class GroupKeyed:
    """A row named by its group's key (``group_key``), read back as its tenant and group."""

    group_key: str

    @property
    def tenant_id(self) -> str | None:
        """The tenant the group is of; None for the jobs with no tenant."""
        return split_group_key(self.group_key)[0]

    @property
    def group_id(self) -> str | None:
        """The group's id; None for the tenant's default group (its jobs with no group)."""
        return split_group_key(self.group_key)[1]


@dataclass(frozen=True)
class ServedGroup(GroupKeyed):
    """A group's jobs of a type served in the last day; ``waiting``: it has due work now. A
    least served group also carries its tenant's plan ('' for none) and how many of its
    tenant's jobs of the type run now (0 for the most served)."""

    type: str
    group_key: str
    served: int
    waiting: bool
    plan: str = ""
    running: int = 0


# A key as fairqueue.group_key spells it (sql/functions/group_key.sql): the tenant with \ and /
# escaped, a slash, the group id as it is.
_GROUP_KEY = re.compile(r"((?:[^\\/]|\\.)*)/(.*)", re.DOTALL)
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def split_group_key(key: str) -> tuple[str | None, str | None]:
    """A group's key as (tenant id, group id), None for no tenant and for the default group:
    ``acme/inbox`` is ('acme', 'inbox'), ``acme/`` ('acme', None), ``/x`` (None, 'x')."""
    found = _GROUP_KEY.fullmatch(key)
    if found is None:  # not a key group_key made: shown whole, as the group's id
        return None, key
    tenant = _ESCAPED.sub(r"\1", found[1])
    return tenant or None, found[2] or None


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
            str(row["type"]),
            str(row["group_key"]),
            int(str(row["served"])),
            bool(row["waiting"]),
            str(row["plan"]),
            int(str(row["running"])),
        )

    return Overview(
        taken_at=now["now"],
        types=queue_status(conn),
        runs=recent_runs(conn, runs),
        most_served=[group(r) for r in served if r["most"]],
        least_served=[group(r) for r in served if not r["most"]],
    )

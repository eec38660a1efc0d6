"""Give-up hooks owed: a job failed for good owes its stage's ``on_give_up`` from the failure's
own transaction until the hook has run to its end (``fairqueue.jobs.give_up_owed``). The hook
runs inside the tenant transaction that clears the mark, so its writes through ``job.conn``
land with it, once; a hook that raises, or whose process died, stays owed, and the sweeper
fires it again. ``fairqueue.pipeline.outcomes`` runs the hooks; these are the statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from ..db import Connection
from ..queries import query

# How long after a failure the sweeper takes its hook for abandoned: the failing process fires
# it right after the failure commits, well within this.
OWED_GRACE_S = 60.0


@dataclass(frozen=True)
class OwedGiveUp:
    id: UUID
    type: str
    tenant_id: str | None
    error: str


def lock_owed(conn: Connection, tenant_id: str | None, job_id: UUID) -> bool:
    """In the caller's transaction under the tenant's clamp: lock the job if its hook is owed
    and nobody else is firing it."""
    row = conn.execute(
        query("lock_owed_give_up"), {"id": job_id, "tenant_id": tenant_id}
    ).fetchone()
    return row is not None


def mark_fired(conn: Connection, tenant_id: str | None, job_id: UUID) -> None:
    """In the same transaction: the hook ran to its end."""
    conn.execute(query("mark_give_up_fired"), {"id": job_id, "tenant_id": tenant_id})


def due(
    conn: Connection, job_types: list[str], grace_s: float, limit: int = 500
) -> list[OwedGiveUp]:
    """The hooks of these types owed longer than ``grace_s``, across tenants (a door)."""
    rows = conn.execute(
        query("due_give_ups"), {"types": job_types, "grace_s": grace_s, "limit": limit}
    ).fetchall()
    return [
        OwedGiveUp(
            id=row["id"],
            type=row["type"],
            tenant_id=row["tenant_id"],
            error=row["last_error"] or "",
        )
        for row in rows
    ]

"""Cancelling a job that has not started: it becomes ``cancelled``, its lane moves on and its
credits come back, all in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from .db import Connection
from .errors import JobNotCancellable
from .job_info import tenant_job
from .lanes import lock_lane, promote_next, refund
from .queries import query

CANCELLED_NOTE = "cancelled before it started"


@dataclass(frozen=True)
class Cancelled:
    """A cancelled job, the credits it got back and the lane job that started in its place."""

    job_id: UUID
    refunded: int
    promoted: UUID | None


def cancel_job(conn: Connection, job_id: UUID, *, tenant_id: str | None) -> Cancelled:
    """Cancel a queued or pending job of ``tenant_id``. A running or finished one is refused
    (``JobNotCancellable``), as is an id the tenant has no job of (``UnknownJob``). Held
    upstream work is left as it is. Runs in the caller's transaction when one is open."""
    with tenant_job(conn, job_id, tenant_id, "job_status") as (params, found):
        if found["lane"] is not None:
            # The lane's order is changed under its lock, as admission and promotion change it.
            lock_lane(conn, tenant_id, found["lane"])
        row = conn.execute(query("cancel_job"), params | {"note": CANCELLED_NOTE}).fetchone()
        if row is None:
            now = conn.execute(query("job_status"), params).fetchone()
            status = found["status"] if now is None else now["status"]
            raise JobNotCancellable(
                f"job {job_id} is {status}: only a queued or pending job can be cancelled"
            )
        refunded = refund(conn, tenant_id, job_id, "cancelled")
        promoted = None
        if found["lane"] is not None and found["delta_of"] is None:
            promoted = promote_next(conn, tenant_id, found["lane"])
    return Cancelled(job_id, refunded, promoted)

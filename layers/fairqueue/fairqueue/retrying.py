"""Running a failed job again by hand: back to pending (or queued in its lane) with fresh
attempts, noted on the row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

import psycopg

from .db import Connection
from .errors import DuplicateJob, JobNotRetryable
from .job_info import tenant_job
from .jobs import doorbell_of, ring_when_committed
from .lanes import lock_lane, promote_next
from .queries import query


@dataclass(frozen=True)
class Retried:
    """A failed job made ready again: ``pending``, or ``queued`` behind its lane's holder."""

    job_id: UUID
    status: str


def retry_job(conn: Connection, job_id: UUID, *, tenant_id: str | None) -> Retried:
    """Run a failed job of ``tenant_id`` again with fresh attempts. Refused: a job that is not
    failed, and a paid or upstream job (its credits were refunded and its held work is gone:
    admit it again) with ``JobNotRetryable``; an open job of the tenant holding its dedupe key
    with ``DuplicateJob``; an id the tenant has no job of with ``UnknownJob``. Runs in the
    caller's transaction when one is open."""
    with tenant_job(conn, job_id, tenant_id, "job_for_retry") as (params, found):
        if found["status"] != "failed":
            raise JobNotRetryable(
                f"job {job_id} is {found['status']}: only a failed job is retried"
            )
        if found["credit_cost"] or found["upstream_id"] is not None:
            raise JobNotRetryable(
                f"job {job_id} was paid for or held work upstream, refunded and released when it"
                " failed: admit it again instead"
            )
        if found["lane"] is not None:
            lock_lane(conn, tenant_id, found["lane"])
        note = f"retried by hand at {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC; before: "
        try:
            with conn.transaction():
                row = conn.execute(query("retry_failed"), params | {"note": note}).fetchone()
        except psycopg.errors.UniqueViolation:
            raise DuplicateJob(
                f"job {job_id}: an open job of the tenant holds its dedupe key"
                f" {found['dedupe_key']!r}"
            ) from None
        if row is None:
            raise JobNotRetryable(f"job {job_id} is no longer failed")
        if row["lane"] is not None and row["delta_of"] is None:
            promote_next(conn, tenant_id, row["lane"])
            status = conn.execute(query("job_for_retry"), params).fetchone()
            assert status is not None
            return Retried(job_id, str(status["status"]))
        ring_when_committed(conn, doorbell_of(found["type"], tenant_id, job_id))
    return Retried(job_id, str(row["status"]))

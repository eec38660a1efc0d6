"""Jobs as an operator reads them: found across tenants by a door that hands back ids and
tenants only, then each read under its own tenant's clamp."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from .db import Connection
from .errors import InvalidPayload, UnknownJob
from .inputs import check_label
from .queries import query
from .tenancy import tenant_scope, tenants_transaction

STATUSES: Final = ("queued", "pending", "running", "done", "failed", "cancelled")
MAX_LISTED: Final = 10_000


@dataclass(frozen=True)
class JobInfo:
    """One job, open or finished, as stored."""

    id: UUID
    type: str
    status: str
    tenant_id: str | None
    group_id: str | None
    group_key: str
    lane: str | None
    dedupe_key: str | None
    attempts: int
    max_attempts: int
    run_after: datetime
    created_at: datetime
    locked_at: datetime | None
    lease_until: datetime | None
    locked_by: str | None
    finished_at: datetime | None
    last_error: str | None
    run_id: UUID | None
    credit_cost: int
    delta_of: UUID | None
    upstream_id: str | None
    payload: dict[str, Any]
    output: Any


def find_jobs(
    conn: Connection,
    *,
    ids: Sequence[UUID] | None = None,
    status: str | None = None,
    job_type: str | None = None,
    tenant_id: str | None = None,
    group_id: str | None = None,
    limit: int = 20,
) -> list[JobInfo]:
    """The jobs that match every filter given, newest first, each read under its tenant's
    clamp. ``tenant_id`` None means any tenant."""
    if status is not None and status not in STATUSES:
        raise InvalidPayload(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LISTED:
        raise InvalidPayload(f"limit must be a whole number from 1 to {MAX_LISTED}, got {limit!r}")
    check_label("type", job_type)
    check_label("tenant_id", tenant_id)
    check_label("group_id", group_id)
    found = conn.execute(
        query("find_jobs"),
        {
            "ids": None if ids is None else list(ids),
            "status": status,
            "type": job_type,
            "tenant_id": tenant_id,
            "group_id": group_id,
            "limit": limit,
        },
    ).fetchall()
    by_tenant: dict[str | None, list[UUID]] = defaultdict(list)
    for row in found:
        by_tenant[row["tenant_id"]].append(row["id"])
    read: dict[UUID, JobInfo] = {}
    with tenants_transaction(conn) as clamp_to:
        for tenant, tenant_ids in by_tenant.items():
            clamp_to(tenant)
            for row in conn.execute(
                query("job_details"), {"ids": tenant_ids, "tenant_id": tenant}
            ).fetchall():
                read[row["id"]] = JobInfo(**row)
    # A job that finished and moved between the two reads is read where it is now; one that
    # retention dropped in between is left out.
    return [read[row["id"]] for row in found if row["id"] in read]


def get_job(conn: Connection, job_id: UUID) -> JobInfo:
    """One job by id, whatever its tenant; ``UnknownJob`` when there is none."""
    if not isinstance(job_id, UUID):
        raise InvalidPayload(f"a job id must be a UUID, got {job_id!r}")
    jobs = find_jobs(conn, ids=[job_id], limit=1)
    if not jobs:
        raise UnknownJob(f"no job {job_id}")
    return jobs[0]


@contextmanager
def tenant_job(
    conn: Connection, job_id: UUID, tenant_id: str | None, query_name: str
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """An operator's action on one job of ``tenant_id``: the arguments checked, then, under the
    tenant's scope, the job's parameters and its row as ``query_name`` reads it; an id the
    tenant has no job of is ``UnknownJob``. The action runs inside the block."""
    if not isinstance(job_id, UUID):
        raise InvalidPayload(f"a job id must be a UUID, got {job_id!r}")
    check_label("tenant_id", tenant_id)
    with tenant_scope(conn, tenant_id):
        params = {"id": job_id, "tenant_id": tenant_id}
        found = conn.execute(query(query_name), params).fetchone()
        if found is None:
            raise UnknownJob(f"no job {job_id}")
        yield params, found

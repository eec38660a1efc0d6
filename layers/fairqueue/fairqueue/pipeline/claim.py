"""The claim, and the statements that move a claimed job on: each one row change, guarded.
Which of them a job's outcome takes, and what follows it (follow-ups, lanes, refunds, hooks), is
decided in :mod:`fairqueue.pipeline.outcomes`.

A claim is one transaction: the candidate rows are locked ``FOR UPDATE OF jobs SKIP LOCKED``
and flipped to running with ``attempts + 1`` and a lease, so a second claimer loses. Every later
transition names the claimer (``locked_by``) and applies only while the job is still running
under it: an invocation that lost its job to a rescue changes nothing. Each runs under the job's
tenant clamp and names that tenant as well (``tenant_id``), so a login that bypasses row-level
security still changes only that tenant's job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, LiteralString
from uuid import UUID

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import args_row
from psycopg.types.json import Jsonb

from ..db import Connection
from ..errors import ConfigurationError
from ..inputs import MAX_BATCH, MAX_LEASE_S, MAX_QUANTUM
from ..plans import ORDERS, PLANS, Order, Plans
from ..queries import query
from ..stage import FairBy, FairShare, known_stage
from ..tenancy import tenant_transaction
from ..upstream import release_delay

if TYPE_CHECKING:
    from ..stage import Stage

# The claim statement of each level of the fair order, with the read of what it took
# (sql/order/claim.queries.sql).
CLAIMS: Mapping[str, str] = {"group": "claim_and_read", "tenant": "claim_and_read_by_tenant"}
FAIR_SHARES = tuple(CLAIMS)
FAIR_BYS: tuple[FairBy, ...] = ("jobs", "cost")


@dataclass(frozen=True)
class ClaimedJob:
    id: UUID
    type: str
    payload: dict[str, Any]
    tenant_id: str | None
    group_id: str | None
    attempts: int
    max_attempts: int
    lane: str | None = None
    delta_of: UUID | None = None
    # Held upstream work that this job starts before its handler runs (None: none).
    upstream_id: str | None = None
    released: bool = False
    release_tries: int = 0

    @property
    def holds_a_lane(self) -> bool:
        """A first-pass job of a lane: while it is open, the lane's next job waits."""
        return self.lane is not None and self.delta_of is None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ClaimedJob:
        return cls(
            id=row["id"],
            type=row["type"],
            payload=row["payload"],
            tenant_id=row["tenant_id"],
            group_id=row["group_id"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            lane=row.get("lane"),
            delta_of=row.get("delta_of"),
            upstream_id=row.get("upstream_id"),
            released=bool(row.get("released")),
            release_tries=row.get("release_tries", 0),
        )

    @property
    def awaits_release(self) -> bool:
        return self.upstream_id is not None and not self.released


# How many times a claim aborted by a deadlock is made again before the error reaches the caller.
CLAIM_TRIES = 3


def claim_batch(
    conn: Connection,
    job_type: str,
    *,
    batch: int,
    lease_s: float,
    locked_by: str,
    run_id: UUID | None = None,
    plans: Plans = PLANS,
    fair_share: FairShare | None = None,
    quantum: int | None = None,
    order: Order | None = None,
    fair_by: FairBy | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``batch`` jobs of a type in fair order, then read them tenant by tenant.

    ``fair_share`` is the level the order is kept at, ``"group"`` or ``"tenant"``; None takes
    the stage's (``Stage.fair_share``), ``"group"`` for a type no stage declares here.
    ``quantum`` is how many jobs in a row the group (or tenant) at the top gives; None
    takes the stage's (``Stage.quantum``), 1 for a type no stage declares here. ``order`` is
    how plans weigh, ``"priority"`` or ``"shares"``; None takes the stage's
    (``Stage.order``), ``"priority"`` for a type no stage declares here. ``fair_by`` is what
    a job counts as served, ``"jobs"`` (one) or ``"cost"`` (its cost); None takes the stage's
    (``Stage.fair_by``), ``"jobs"`` for a type no stage declares here. The
    claim itself crosses tenants and sees ids only; each job's payload is read again under its
    own tenant's clamp, in the same statement (the server switches the clamp).
    """
    if not 1 <= batch <= MAX_BATCH or not 0 < lease_s <= MAX_LEASE_S:
        raise ConfigurationError(
            f"claim of {job_type}: batch must be from 1 to {MAX_BATCH} and lease_s over 0 and "
            f"at most {MAX_LEASE_S:g}, got {batch} and {lease_s}"
        )
    # What the caller leaves out, the type's stage declares; a type no stage declares here
    # takes the exact order (group level, quantum 1, plan priority).
    stage = known_stage(job_type)
    level = (stage.fair_share if stage else "group") if fair_share is None else fair_share
    turn = (stage.quantum if stage else 1) if quantum is None else quantum
    weighing = (stage.order if stage else "priority") if order is None else order
    counting = (stage.fair_by if stage else "jobs") if fair_by is None else fair_by
    if level not in FAIR_SHARES:
        raise ConfigurationError(
            f"claim of {job_type}: fair_share must be one of {', '.join(FAIR_SHARES)},"
            f" got {level!r}"
        )
    if not 1 <= turn <= MAX_QUANTUM:
        raise ConfigurationError(
            f"claim of {job_type}: quantum must be from 1 to {MAX_QUANTUM}, got {turn}"
        )
    if weighing not in ORDERS:
        raise ConfigurationError(
            f"claim of {job_type}: order must be one of {', '.join(ORDERS)}, got {weighing!r}"
        )
    if counting not in FAIR_BYS:
        raise ConfigurationError(
            f"claim of {job_type}: fair_by must be one of {', '.join(FAIR_BYS)}, got {counting!r}"
        )
    params = {
        "type": job_type,
        "batch": batch,
        "lease_s": lease_s,
        "locked_by": locked_by,
        "run_id": run_id,
        **plans.claim_params(weighing, turn),
        "by_cost": counting == "cost",
    }
    # The statistics check, the expiry and a change of quantum commit on their own first (on an
    # autocommit connection), so the claim never holds counter rows locked by the expiry while
    # waiting for others, nor the tables' ANALYZE lock, nor the standings' lock of a change.
    conn.execute(query("ready_for_claim"), params)
    # Groups other claimers hold are passed over inside the claim: a short batch means the
    # groups nobody holds ran out. A claim that a deadlock aborted changed nothing (its
    # transaction rolled back whole) and is made again, a bounded number of times.
    attempt = 1
    while True:
        try:
            return _claim_rows(conn, query(CLAIMS[level]), params)
        except psycopg.errors.DeadlockDetected:
            if attempt == CLAIM_TRIES:
                raise
            attempt += 1


def _claim_rows(
    conn: Connection, statement: LiteralString, params: dict[str, Any]
) -> list[ClaimedJob]:
    """The claim's one statement (with its read), in a transaction of its own. On an autocommit
    connection the statement is one already: BEGIN and COMMIT would be two more round trips per
    claim. Its columns are ClaimedJob's fields in order, so each row becomes one directly.

    A claim that is its own transaction commits without waiting for the disk; one made inside
    the caller's open transaction leaves that transaction's commit as the caller set it."""
    cursor = conn.cursor(row_factory=args_row(ClaimedJob))
    if conn.autocommit:
        return cursor.execute(statement, {**params, "quick_commit": True}).fetchall()
    own = conn.info.transaction_status == TransactionStatus.IDLE
    with conn.transaction():
        return cursor.execute(statement, {**params, "quick_commit": own}).fetchall()


def read_jobs(conn: Connection, tenant_id: str | None, job_ids: list[UUID]) -> list[ClaimedJob]:
    """Jobs of one tenant, read under its clamp."""
    with tenant_transaction(conn, tenant_id):
        rows = conn.execute(query("read_jobs"), {"ids": job_ids, "tenant_id": tenant_id}).fetchall()
    return [ClaimedJob.from_row(row) for row in rows]


def read_jobs_of_tenants(
    conn: Connection, owned: Iterable[tuple[str | None, UUID]]
) -> list[ClaimedJob]:
    """Jobs of several tenants (tenant, id), each tenant's read under its own clamp."""
    return [
        job
        for tenant_id, job_ids in by_tenant(owned).items()
        for job in read_jobs(conn, tenant_id, job_ids)
    ]


def by_tenant(pairs: Iterable[tuple[str | None, UUID]]) -> dict[str | None, list[UUID]]:
    grouped: dict[str | None, list[UUID]] = {}
    for tenant_id, job_id in pairs:
        grouped.setdefault(tenant_id, []).append(job_id)
    return grouped


def has_claimable(conn: Connection, job_type: str) -> bool:
    row = conn.execute(query("has_claimable"), {"type": job_type}).fetchone()
    return bool(row and row["claimable"])


def complete_claimed(
    conn: Connection,
    owned: list[tuple[str | None, UUID]],
    locked_by: str,
    outputs: Mapping[UUID, dict[str, Any] | None] | None = None,
) -> set[UUID]:
    """Mark several tenants' jobs (tenant, id) done in one statement, each tenant's under its
    own clamp; the ids that were still this claimer's."""
    if not owned:
        return set()
    rows = conn.execute(
        query("complete_claimed"), _completion(owned, locked_by, outputs)
    ).fetchall()
    return {row["id"] for row in rows}


def count_completed(
    conn: Connection,
    owned: list[tuple[str | None, UUID]],
    locked_by: str,
    outputs: Mapping[UUID, dict[str, Any] | None] | None = None,
) -> int:
    """complete_claimed for a caller that needs only how many were still this claimer's."""
    if not owned:
        return 0
    row = conn.execute(
        query("complete_claimed_count"), _completion(owned, locked_by, outputs)
    ).fetchone()
    assert row is not None
    return int(row["done"])


def _completion(
    owned: list[tuple[str | None, UUID]],
    locked_by: str,
    outputs: Mapping[UUID, dict[str, Any] | None] | None,
) -> dict[str, Any]:
    ids = [job_id for _, job_id in owned]
    return {
        "tenant_ids": [tenant_id for tenant_id, _ in owned],
        "ids": ids,
        "outputs": _stored(ids, outputs or {}),
        "locked_by": locked_by,
    }


def extend_leases(
    conn: Connection, owned: list[tuple[str | None, UUID]], locked_by: str, lease_s: float
) -> int:
    """Set the leases of several tenants' jobs (tenant, id) to ``lease_s`` from now, in one
    statement through the door that names each job's tenant and claimer; how many this claimer
    still held."""
    if not owned:
        return 0
    row = conn.execute(
        query("extend_leases"),
        {
            "tenant_ids": [tenant_id for tenant_id, _ in owned],
            "ids": [job_id for _, job_id in owned],
            "locked_by": locked_by,
            "lease_s": lease_s,
        },
    ).fetchone()
    assert row is not None
    return int(row["extended"])


def _stored(
    job_ids: list[UUID], outputs: Mapping[UUID, dict[str, Any] | None]
) -> list[Jsonb | None]:
    return [None if outputs.get(i) is None else Jsonb(outputs[i]) for i in job_ids]


@dataclass(frozen=True)
class RetryOutcome:
    status: str
    run_after: datetime


def retry_or_fail(
    conn: Connection,
    job_id: UUID,
    locked_by: str,
    error: str,
    *,
    tenant_id: str | None,
    backoff_unit_s: float = 60.0,
) -> RetryOutcome | None:
    """Back to pending after 2^attempts units (minutes by default), or failed when used up."""
    row = conn.execute(
        query("retry_or_fail"),
        {
            "id": job_id,
            "tenant_id": tenant_id,
            "locked_by": locked_by,
            "error": error,
            "unit_s": backoff_unit_s,
        },
    ).fetchone()
    if row is None:
        return None
    return RetryOutcome(status=str(row["status"]), run_after=row["run_after"])


def fail_now(
    conn: Connection, job_id: UUID, locked_by: str, error: str, *, tenant_id: str | None
) -> bool:
    """Failed at once, no retries (a payload that no longer validates)."""
    row = conn.execute(
        query("fail_now"),
        {"id": job_id, "tenant_id": tenant_id, "locked_by": locked_by, "error": error},
    )
    return row.fetchone() is not None


def defer(
    conn: Connection,
    job_id: UUID,
    locked_by: str,
    until: datetime | timedelta,
    *,
    tenant_id: str | None,
) -> bool:
    """Back to pending at ``until`` with the claim's attempt undone."""
    if isinstance(until, timedelta):
        found = conn.execute("select now() + %s as at", (until,)).fetchone()
        assert found is not None
        at = found["at"]
    else:
        at = until
    row = conn.execute(
        query("defer"), {"id": job_id, "tenant_id": tenant_id, "locked_by": locked_by, "until": at}
    )
    return row.fetchone() is not None


def give_back(
    conn: Connection, job_ids: list[UUID], locked_by: str, *, tenant_id: str | None
) -> int:
    """Give back one tenant's claimed jobs that never started, attempt undone."""
    if not job_ids:
        return 0
    rows = conn.execute(
        query("give_back"), {"ids": job_ids, "tenant_id": tenant_id, "locked_by": locked_by}
    ).fetchall()
    return len(rows)


def mark_released(conn: Connection, job_id: UUID, *, tenant_id: str | None) -> None:
    """Record, in the job's tenant transaction, that its held work has started."""
    conn.execute(query("mark_released"), {"id": job_id, "tenant_id": tenant_id})


def release_failed(
    conn: Connection, stage: Stage, job: ClaimedJob, locked_by: str, error: str
) -> str | None:
    """Give a job whose release failed back for a later try, or fail it past the stage's
    window; its new status, or None when this claimer no longer holds it."""
    row = conn.execute(
        query("release_failed"),
        {
            "id": job.id,
            "tenant_id": job.tenant_id,
            "locked_by": locked_by,
            "error": f"releasing held upstream work failed: {error}",
            "window_s": stage.release_window_s,
            "delay_s": release_delay(
                job.release_tries + 1,
                base_s=stage.release_backoff_s,
                cap_s=stage.release_backoff_cap_s,
            ),
        },
    ).fetchone()
    return None if row is None else str(row["status"])


@dataclass(frozen=True)
class AbandonedJob:
    id: UUID
    type: str
    tenant_id: str | None
    error: str


def fail_abandoned(
    conn: Connection, job_types: list[str], *, limit: int = 500
) -> list[AbandonedJob]:
    """Fail jobs of these types whose invocation died on their last attempt.

    Returns their ids and tenants, so the caller can read each under its tenant's clamp and run
    its give-up hook (refund paid work).
    """
    with conn.transaction():
        rows = conn.execute(
            query("fail_abandoned"), {"types": job_types, "limit": limit}
        ).fetchall()
    return [
        AbandonedJob(
            id=row["id"], type=row["type"], tenant_id=row["tenant_id"], error=row["last_error"]
        )
        for row in rows
    ]

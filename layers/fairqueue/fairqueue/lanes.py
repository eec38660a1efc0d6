"""Serial lanes: every error on the first click, then one job at a time per lane.

``admit`` runs every synchronous check, the credit debit and the insert under the lane's lock,
in the tenant's transaction: the job lands ``pending`` when the lane is free, ``queued`` when a
first-pass job already holds it. ``promote_next`` (under the same lock) moves the oldest queued
job to pending once the lane is free. Delta jobs (re-checks of an earlier job) skip the lane.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal
from uuid import UUID

from psycopg.types.json import Jsonb

from .db import Connection, names_missing_schema
from .errors import DuplicateJob, InsufficientCredit, InvalidPayload, UnknownJob
from .inputs import check_label
from .jobs import doorbell_of, prepare, ring_when_committed
from .queries import query
from .stage import known_stage
from .tenancy import mismatch_of, tenant_scope, transaction_unless_open

# The classids of the two-key advisory lock form: lane locks and credit locks each live in a
# key space of their own.
LANE_LOCK_NAMESPACE: Final = 0x46514C4E
CREDIT_LOCK_NAMESPACE: Final = 0x46514352

# The most credits one ledger entry may move and one balance may hold: far more than any plan
# grants, and far below what a bigint holds, so no ledger kept under it sums past one.
MAX_BALANCE: Final = 10**15


@dataclass(frozen=True)
class Admission:
    job_id: UUID
    status: Literal["pending", "queued"]
    place: int


def lock_key(tenant_id: str | None, lane: str) -> str:
    """The one spelling of a lane's lock key; a tenant and a lane can never run together."""
    return json.dumps([tenant_id, lane], separators=(",", ":"))


def lock_lane(conn: Connection, tenant_id: str | None, lane: str) -> None:
    """Hold the lane until the transaction ends."""
    conn.execute(
        query("lane_lock"), {"namespace": LANE_LOCK_NAMESPACE, "key": lock_key(tenant_id, lane)}
    )


def credit_lock_key(tenant_id: str | None) -> str:
    """The one spelling of a tenant's balance lock key."""
    return json.dumps([tenant_id], separators=(",", ":"))


def lock_balance(conn: Connection, tenant_id: str | None) -> None:
    """Hold the tenant's balance until the transaction ends, as admission does to charge it."""
    conn.execute(
        query("lane_lock"), {"namespace": CREDIT_LOCK_NAMESPACE, "key": credit_lock_key(tenant_id)}
    )


@names_missing_schema
def admit(
    conn: Connection,
    lane: str,
    job_type: str,
    payload: dict[str, Any],
    *,
    tenant_id: str | None,
    cost: int | None = None,
    delta_of: UUID | None = None,
    group_id: str | None = None,
    dedupe_key: str | None = None,
    fair_cost: int = 1,
) -> Admission:
    """Admit a job into a lane, or raise the error the click deserves; nothing lands then.

    ``cost`` defaults to the stage's ``credit_cost``. ``fair_cost`` is the job's cost in the
    fair order, what ``enqueue`` takes as ``cost`` (``Stage(fair_by="cost")``). A stage with an
    ``upstream`` creates its held work here, under the lock, so the upstream's validation is an
    admission error.
    Raises InvalidPayload, UnknownJobType, PayloadTooLarge, InsufficientCredit, UnknownJob (a
    ``delta_of`` not in this lane), DuplicateJob, UpstreamRejected, UpstreamUnavailable.
    """
    check_label(f"{job_type}: the lane", lane, required=True)
    prepared = prepare(
        job_type,
        payload,
        tenant_id=tenant_id,
        group_id=group_id,
        dedupe_key=dedupe_key,
        cost=fair_cost,
    )
    stage = known_stage(job_type)
    assert stage is not None, "prepare() refuses unknown types"
    charge = stage.credit_cost if cost is None else cost
    if isinstance(charge, bool) or not isinstance(charge, int) or charge < 0:
        raise InvalidPayload(f"{job_type}: the credit cost must be a whole number >= 0")
    checks = {
        "tenant_id": tenant_id,
        "lane": lane,
        "lane_lock": LANE_LOCK_NAMESPACE,
        "lane_key": lock_key(tenant_id, lane),
        "credit_lock": CREDIT_LOCK_NAMESPACE,
        "credit_key": credit_lock_key(tenant_id),
        "charge": charge,
        "delta_of": delta_of,
        "dedupe_key": dedupe_key,
    }
    job = {
        "type": prepared.type,
        "payload": Jsonb(prepared.payload),
        "group_id": group_id,
        "max_attempts": prepared.max_attempts,
        "fair_cost": prepared.cost,
    }
    # The checks take the lane's lock (and the balance's, when the job costs credits), held
    # until the transaction ends.
    if stage.upstream is None:
        # One statement: on an autocommit connection, a transaction of its own.
        row = _one(conn, "admission", checks | job)
        _refuse(row, job_type, tenant_id, charge, delta_of)
        job_id: UUID = row["id"]
    else:
        with transaction_unless_open(conn):
            found = _one(conn, "admission_checks", checks)
            _refuse(found, job_type, tenant_id, charge, delta_of)
            job_id = found["id"]
            upstream_id = stage.upstream.create(job_type, prepared.payload, key=str(job_id))
            row = conn.execute(
                query("admission_insert"),
                job
                | {
                    "id": job_id,
                    "tenant_id": tenant_id,
                    "dedupe_key": dedupe_key,
                    "lane": lane,
                    "delta_of": delta_of,
                    "cost": charge,
                    "upstream_id": upstream_id,
                    "status": "queued" if found["busy"] else "pending",
                },
            ).fetchone() or {"status": None}
    if row["status"] is None:
        # Only a plain enqueue of the same key racing this admission gets here; held work
        # created above is never released, so it never starts.
        raise DuplicateJob(f"{job_type}: an open job of this tenant has that dedupe key")
    if row["status"] == "pending":
        ring_when_committed(conn, doorbell_of(job_type, tenant_id, job_id))
    return Admission(job_id=job_id, status=row["status"], place=row["place"])


def _refuse(
    found: dict[str, Any],
    job_type: str,
    tenant_id: str | None,
    charge: int,
    delta_of: UUID | None,
) -> None:
    """Raise what the admission's checks refused, in the order a click is told of it."""
    if not found["matches"]:
        raise mismatch_of(found, tenant_id)
    if not found["delta_found"]:
        raise UnknownJob(f"{job_type}: no job {delta_of} in this lane to re-check")
    if charge and found["balance"] < charge:
        raise InsufficientCredit(
            f"{job_type} costs {charge} credits; the balance is {found['balance']}"
        )
    if found["dedupe_taken"]:
        raise DuplicateJob(f"{job_type}: an open job of this tenant has that dedupe key")


def _one(conn: Connection, name: str, params: dict[str, Any]) -> dict[str, Any]:
    row = conn.execute(query(name), params).fetchone()
    assert row is not None, f"{name} returns one row"
    return row


def promote_next(conn: Connection, tenant_id: str | None, lane: str) -> UUID | None:
    """Start the lane's next queued job if nothing holds the lane; its id, or None."""
    with tenant_scope(conn, tenant_id):
        lock_lane(conn, tenant_id, lane)
        row = conn.execute(query("promote_next"), {"tenant_id": tenant_id, "lane": lane}).fetchone()
    if row is None:
        return None
    promoted: UUID = row["id"]
    # A doorbell stage's promoted job starts within seconds, which is when its held upstream
    # work is released (by the claim, before the handler runs).
    ring_when_committed(conn, doorbell_of(row["type"], tenant_id, promoted))
    return promoted


def lane_jobs(conn: Connection, tenant_id: str | None, lane: str) -> list[dict[str, Any]]:
    """The lane's open jobs in order: the one holding it, then the queue (deltas last), each
    with its place."""
    with tenant_scope(conn, tenant_id):
        return conn.execute(query("lane_jobs"), {"tenant_id": tenant_id, "lane": lane}).fetchall()


def lane_history(
    conn: Connection, tenant_id: str | None, job_type: str, *, since: datetime | None = None
) -> list[dict[str, Any]]:
    """A type's lane jobs of one tenant, finished ones too, lane by lane in admission order;
    with ``since``, only those admitted since then."""
    with tenant_scope(conn, tenant_id):
        return conn.execute(
            query("lane_history"), {"tenant_id": tenant_id, "type": job_type, "since": since}
        ).fetchall()


def add_credits(
    conn: Connection,
    tenant_id: str | None,
    amount: int,
    *,
    kind: Literal["grant", "debit"] = "grant",
    job_id: UUID | None = None,
    note: str | None = None,
) -> bool:
    """Write a ledger entry; False when the job was already charged. A grant adds credits (an
    amount above 0), a debit takes them (below 0). Neither moves more than MAX_BALANCE, and a
    grant that would take the balance past MAX_BALANCE is refused with nothing written."""
    check_label("tenant_id", tenant_id)
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise InvalidPayload(f"a credit amount must be a whole number, got {amount!r}")
    if (kind == "grant" and amount <= 0) or (kind == "debit" and amount >= 0):
        sign = "above" if kind == "grant" else "below"
        raise InvalidPayload(f"a {kind} must be an amount {sign} 0, got {amount}")
    if abs(amount) > MAX_BALANCE:
        raise InvalidPayload(f"a {kind} moves at most {MAX_BALANCE:,} credits, got {amount:,}")
    if note is not None:
        check_label("a ledger note", note)
    with tenant_scope(conn, tenant_id):
        if kind == "grant":
            lock_balance(conn, tenant_id)  # two grants cannot both fit
            held = balance(conn, tenant_id)
            if held + amount > MAX_BALANCE:
                raise InvalidPayload(
                    f"a grant of {amount:,} would take {tenant_id!r}'s balance of {held:,} past"
                    f" the most a balance holds, {MAX_BALANCE:,}"
                )
        row = conn.execute(
            query("add_credits"),
            {
                "tenant_id": tenant_id,
                "job_id": job_id,
                "kind": kind,
                "amount": amount,
                "note": note,
            },
        ).fetchone()
    return row is not None


def balance(conn: Connection, tenant_id: str | None) -> int:
    with tenant_scope(conn, tenant_id):
        row = conn.execute(query("credit_balance"), {"tenant_id": tenant_id}).fetchone()
    return int(row["balance"]) if row else 0


def refund(conn: Connection, tenant_id: str | None, job_id: UUID, note: str) -> int:
    """Pay back a cancelled or failed job's debit once, in the caller's transaction clamped to
    ``tenant_id``; the amount, or 0 (never charged, refunded already, or not cancelled or
    failed)."""
    row = conn.execute(
        query("refund_job"), {"tenant_id": tenant_id, "job_id": job_id, "note": note}
    ).fetchone()
    return int(row["amount"]) if row else 0


def promote_stalled(conn: Connection, *, limit: int = 500) -> int:
    """Start the next job of every lane left waiting with nothing holding it; how many."""
    stalled = conn.execute(query("stalled_lanes"), {"limit": limit}).fetchall()
    return sum(promote_next(conn, row["tenant_id"], row["lane"]) is not None for row in stalled)

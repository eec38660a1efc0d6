"""Why a job has not run yet: each rule that holds it back, in the order the pipeline meets
them, from the same rows the claim reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal
from uuid import UUID

from .db import Connection
from .errors import UnknownQuota
from .job_info import JobInfo, find_jobs
from .plans import PLANS, Order, Plans
from .queries import query
from .quotas import read_quota
from .stage import Stage, known_stage
from .tenancy import tenant_transaction

STANDINGS_SHOWN: Final = 3


@dataclass(frozen=True)
class Standing:
    """A group's place in its type's order: how many groups stand ahead of it, its tenant's plan
    ('' for none), how many of its jobs of the type ran in the last day, and when its oldest due
    job was made."""

    place: int
    plan: str
    served: int
    oldest_created_at: datetime


@dataclass(frozen=True)
class Waiting:
    """The reasons, as sentences, and where the job stands with those just ahead of it
    (nearest first), when it offers a due job to the claim: its group among groups, or, for a
    stage fair between tenants first (``level`` "tenant"), its tenant among tenants."""

    reasons: list[str]
    standing: Standing | None = None
    ahead: list[Standing] = field(default_factory=list)
    level: Literal["group", "tenant"] = "group"


def why_waiting(
    conn: Connection, job: JobInfo, stage: Stage | None, plans: Plans = PLANS
) -> Waiting:
    """Why ``job`` has not run. ``stage`` is its stage in the caller's stage list, or None when
    the caller has none for its type; ``plans`` the plans its tenant's cap is read from."""
    if job.status not in ("queued", "pending"):
        return Waiting([])
    reasons: list[str] = []
    with tenant_transaction(conn, job.tenant_id):
        if job.status == "queued" and job.lane is not None:
            reasons.append(_lane_reason(conn, job))
        if job.run_after > _now(conn):
            reasons.append(f"it is not due until {job.run_after:%Y-%m-%d %H:%M:%S %Z}")
        paused = conn.execute(
            query("group_paused"), {"group_key": job.group_key, "tenant_id": job.tenant_id}
        ).fetchone()
        if paused is not None and paused["paused"]:
            reasons.append(f"its group {job.group_id or '(default)'!r} is paused")
        if job.tenant_id is not None:
            reasons.extend(_cap_reason(conn, job, plans))
        older = _one_count(conn, "group_ahead", job)
    if stage is None:
        reasons.append(f"no stage in the stage list handles type {job.type!r}: nothing claims it")
    elif stage.quota is not None:
        reasons.extend(_quota_reason(conn, stage.quota))
    if job.status == "queued" or reasons:
        return Waiting(reasons)
    if older:
        reasons.append(f"{older} older due job(s) of its group go first")
    if stage is not None and stage.fair_share == "tenant":
        return _tenant_place(conn, job, reasons, older)
    rows = _standing_rows(conn, "group_standing", job, stage.order if stage else "priority")
    if not rows:
        # Its standing changed between the reads (claimed, paused): nothing to place.
        return Waiting(reasons or ["its group offers no due job to the claim right now"])
    own, ahead = _standings(rows)
    if own.place:
        reasons.append(f"{own.place} group(s) stand ahead of its group in the fair order")
    elif not older:
        reasons.append(f"it is next: the next claim of type {job.type!r} takes it")
    return Waiting(reasons, own, ahead)


def _tenant_place(conn: Connection, job: JobInfo, reasons: list[str], older: int) -> Waiting:
    """A stage fair between tenants first: its tenant's place among tenants, then its group's
    among its tenant's groups."""
    rows = _standing_rows(conn, "tenant_standing", job)
    if not rows:
        return Waiting(reasons or ["its group offers no due job to the claim right now"])
    own, ahead = _standings(rows)
    groups_ahead = int(rows[0]["groups_ahead"] or 0)
    if own.place:
        reasons.append(
            f"{own.place} tenant(s) stand ahead of its tenant in the fair order (its stage is"
            " fair between tenants first)"
        )
    if groups_ahead:
        reasons.append(f"{groups_ahead} of its tenant's group(s) stand ahead of its group")
    if not (own.place or groups_ahead or older):
        reasons.append(f"it is next: the next claim of type {job.type!r} takes it")
    return Waiting(reasons, own, ahead, level="tenant")


def _standing_rows(
    conn: Connection, name: str, job: JobInfo, order: Order = "priority"
) -> list[dict[str, Any]]:
    """The standing door's rows, its plans weighed as the stage's claim weighs them."""
    return conn.execute(
        query(name),
        {"type": job.type, "group_key": job.group_key, "ahead": STANDINGS_SHOWN}
        | PLANS.claim_params(order),
    ).fetchall()


def _standings(rows: list[dict[str, Any]]) -> tuple[Standing, list[Standing]]:
    """The door's rows, own first, as standings: its own and those ahead, nearest first."""
    standings = [
        Standing(int(r["place"]), r["plan"], int(r["served"]), r["oldest_created_at"]) for r in rows
    ]
    return standings[0], standings[1:]


def tenant_job_waiting(conn: Connection, job_id: UUID, tenant_id: str | None) -> list[str]:
    """Why a tenant's own job has not run, as sentences, judged by this process's stages; empty
    once it has run or when the tenant has no such job. Other groups are only counted."""
    jobs = find_jobs(conn, ids=[job_id], tenant_id=tenant_id, limit=1)
    if not jobs or jobs[0].tenant_id != tenant_id:
        return []
    return why_waiting(conn, jobs[0], known_stage(jobs[0].type)).reasons


def _now(conn: Connection) -> datetime:
    row = conn.execute("select now() as now").fetchone()
    assert row is not None
    now: datetime = row["now"]
    return now


def _one_count(conn: Connection, name: str, job: JobInfo) -> int:
    row = conn.execute(
        query(name),
        {
            "type": job.type,
            "group_key": job.group_key,
            "tenant_id": job.tenant_id,
            "lane": job.lane,
            "created_at": job.created_at,
            "id": job.id,
        },
    ).fetchone()
    return 0 if row is None else int(row["ahead"])


def _lane_reason(conn: Connection, job: JobInfo) -> str:
    row = conn.execute(
        query("lane_ahead"),
        {
            "tenant_id": job.tenant_id,
            "lane": job.lane,
            "created_at": job.created_at,
            "id": job.id,
        },
    ).fetchone()
    assert row is not None
    holder = f"; job {row['holder']} holds it" if row["holder"] is not None else ""
    return f"it waits in lane {job.lane!r} behind {row['ahead']} job(s){holder}"


def _cap_reason(conn: Connection, job: JobInfo, plans: Plans) -> list[str]:
    """Its tenant at its plan's cap of running jobs of the type (a tenant with no plan, or one
    ``plans`` does not name, takes the middle plan's cap, as the claim does)."""
    row = conn.execute(query("tenant_running"), {"type": job.type, "tenant_id": job.tenant_id})
    found = row.fetchone()
    assert found is not None
    cap = plans.cap_of(found["plan"])
    if cap is None or found["running"] < cap:
        return []
    return [f"its tenant is at its plan's cap of {cap} running ({found['running']} of this type)"]


def _quota_reason(conn: Connection, name: str) -> list[str]:
    try:
        state = read_quota(conn, name)
    except UnknownQuota:
        return [f"its stage spends quota {name!r}, which is not defined (fairqueue quotas define)"]
    stop = state.stop_reason()
    if stop is None:
        return []
    where = "at its reserve" if stop == "quota_reserve" else "spent"
    return [
        f"its stage's quota {name!r} is {where} ({state.remaining} of {state.capacity} left,"
        f" reserve {state.reserve}) until {state.resets_at:%Y-%m-%d %H:%M:%S %Z}"
    ]

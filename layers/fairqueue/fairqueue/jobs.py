"""Enqueue: one INSERT in the caller's transaction, checked before it is sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from .db import Connection, after_commit, names_missing_schema
from .doorbells import Doorbell, ringing
from .errors import InvalidPayload, PayloadTooLarge, UnknownJobType
from .inputs import (
    check_attempts,
    check_cost,
    check_delay,
    check_label,
    integral_numbers,
    storable_json,
)
from .queries import query
from .settings import settings
from .stage import Stage, known_stage, known_types
from .tenancy import mismatch_of
from .validation import problems


def max_payload_bytes() -> int:
    """``FAIRQUEUE_MAX_PAYLOAD_BYTES``, by default 1 MiB."""
    return settings().max_payload_bytes


def validate_payload(stage: Stage, payload: Any) -> dict[str, Any]:
    """The payload as it will be stored, or InvalidPayload naming what is wrong.

    A payload model checks the payload as the JSON document it is, strictly: the JSON Schema
    the model publishes (the API's document shows it) is what it accepts, so ``"5"`` or
    ``true`` for an ``int`` field is refused rather than coerced (``2.0`` is an integer, as
    JSON Schema has it). What is stored is the model's
    output (JSON-ready, by alias): defaults filled in, fields it does not know left out, and
    the handler and any upstream see exactly what was checked.
    """
    if not isinstance(payload, dict):
        raise InvalidPayload(
            f"{stage.name}: the payload must be a JSON object (a dict), "
            f"got {type(payload).__name__}"
        )
    if stage.payload_model is None:
        return payload
    # Checked first: a model must not be handed what cannot be stored.
    encoded = storable_json(payload, f"{stage.name}: the payload")
    try:
        model = stage.payload_model.model_validate_json(integral_numbers(encoded), strict=True)
    except ValidationError as exc:
        raise InvalidPayload(
            f"{stage.name}: payload does not fit the stage's model: {problems(exc)}"
        ) from None
    checked: dict[str, Any] = model.model_dump(mode="json", by_alias=True)
    return checked


# Not frozen: a frozen dataclass sets each field through object.__setattr__, which was a fifth of
# checking a small job in enqueue_many; nothing changes a PreparedJob once it is made.
@dataclass(slots=True)
class PreparedJob:
    """A job checked and ready to insert."""

    type: str
    payload: dict[str, Any]
    tenant_id: str | None
    group_id: str | None
    dedupe_key: str | None
    max_attempts: int
    run_at: datetime | None
    delay_s: float
    # Its cost in units, what it counts as served under Stage(fair_by="cost").
    cost: int
    # The payload as the compact JSON that was checked and measured: what is stored.
    payload_json: str
    # Its size in bytes, UTF-8, as the limits count it.
    payload_bytes: int


def prepare(
    job_type: str,
    payload: dict[str, Any],
    *,
    tenant_id: str | None = None,
    group_id: str | None = None,
    dedupe_key: str | None = None,
    run_after: datetime | timedelta | None = None,
    max_attempts: int | None = None,
    cost: int = 1,
) -> PreparedJob:
    """Check a job without touching the database; every problem is an error naming it."""
    stage = stage_of(job_type)
    check_label(f"{job_type}: tenant_id", tenant_id)
    return prepare_for(
        stage,
        payload,
        tenant_id=tenant_id,
        group_id=group_id,
        dedupe_key=dedupe_key,
        run_after=run_after,
        max_attempts=max_attempts,
        cost=cost,
        payload_limit=max_payload_bytes(),
    )


@dataclass(slots=True)
class JobFields:
    """What a job carries besides its payload, checked: how ``prepare_for`` and ``enqueue_many``
    store the arguments ``enqueue`` takes."""

    group_id: str | None
    dedupe_key: str | None
    max_attempts: int
    run_at: datetime | None
    delay_s: float
    cost: int = 1


def job_fields(
    stage: Stage,
    *,
    group_id: str | None,
    dedupe_key: str | None,
    run_after: datetime | timedelta | None,
    max_attempts: int | None,
    cost: object = 1,
) -> JobFields:
    """The job's own arguments besides its payload, checked; InvalidPayload names the first one
    that is wrong."""
    job_type = stage.name
    if group_id is not None:
        check_label(f"{job_type}: group_id", group_id)
    if dedupe_key is not None:
        check_label(f"{job_type}: dedupe_key", dedupe_key)
    attempts = check_attempts(
        f"{job_type}: max_attempts", stage.max_attempts if max_attempts is None else max_attempts
    )
    run_at: datetime | None = None
    delay_s = 0.0
    if isinstance(run_after, datetime):
        if run_after.tzinfo is None:
            raise InvalidPayload(f"{job_type}: run_after must be timezone-aware")
        run_at = run_after
    elif isinstance(run_after, timedelta):
        delay_s = check_delay(f"{job_type}: run_after", run_after)
    elif run_after is not None:
        raise InvalidPayload(f"{job_type}: run_after must be a datetime, a timedelta or None")
    return JobFields(
        group_id=group_id,
        dedupe_key=dedupe_key,
        max_attempts=attempts,
        run_at=run_at,
        delay_s=delay_s,
        cost=check_cost(f"{job_type}: cost", cost),
    )


def prepare_for(
    stage: Stage,
    payload: dict[str, Any],
    *,
    tenant_id: str | None,
    group_id: str | None,
    dedupe_key: str | None,
    run_after: datetime | timedelta | None,
    max_attempts: int | None,
    payload_limit: int,
    cost: object = 1,
) -> PreparedJob:
    """``prepare``'s checks of what is the job's own, for a stage already found and a tenant id
    already checked: a caller checking many jobs of one stage and tenant finds and checks those
    once."""
    job_type = stage.name
    stored = validate_payload(stage, payload)
    encoded = storable_json(stored, f"{job_type}: the payload")
    size = json_size(encoded)
    if size > payload_limit:
        raise PayloadTooLarge(
            f"{job_type}: payload is {size} bytes, over the limit of {payload_limit}"
        )
    fields = job_fields(
        stage,
        group_id=group_id,
        dedupe_key=dedupe_key,
        run_after=run_after,
        max_attempts=max_attempts,
        cost=cost,
    )
    return PreparedJob(
        type=job_type,
        payload=stored,
        tenant_id=tenant_id,
        group_id=fields.group_id,
        dedupe_key=fields.dedupe_key,
        max_attempts=fields.max_attempts,
        run_at=fields.run_at,
        delay_s=fields.delay_s,
        cost=fields.cost,
        payload_json=encoded,
        payload_bytes=size,
    )


def json_size(encoded: str) -> int:
    """The size in bytes, UTF-8, of JSON text already checked to be valid Unicode: an ASCII
    text's length is its size."""
    return len(encoded) if encoded.isascii() else len(encoded.encode("utf-8"))


def stage_of(job_type: str) -> Stage:
    """The stage that declares ``job_type`` in this process, or UnknownJobType."""
    stage = known_stage(job_type)
    if stage is None:
        known = ", ".join(sorted(known_types())) or "none"
        raise UnknownJobType(
            f"unknown job type {job_type!r}: no Stage declares it in this process "
            f"(known types: {known})"
        )
    return stage


def insert(conn: Connection, job: PreparedJob) -> UUID | None:
    """Insert a prepared job; None when an open job of the tenant has its dedupe key.

    One statement that clamps the transaction to the job's tenant itself, unless it is clamped
    already: an autocommit connection's statement is its own transaction, and a caller's open
    transaction stays clamped to the tenant, as ``tenant_scope`` leaves it. A transaction
    clamped to another tenant is refused (TenantMismatch) and nothing is written.
    """
    row = conn.execute(
        query("enqueue"),
        {
            "type": job.type,
            "payload": job.payload_json,
            "tenant_id": job.tenant_id,
            "group_id": job.group_id,
            "dedupe_key": job.dedupe_key,
            "max_attempts": job.max_attempts,
            "run_after": job.run_at,
            "delay_s": job.delay_s,
            "cost": job.cost,
        },
    ).fetchone()
    assert row is not None, "the enqueue statement answers one row"
    if not row["matches"]:
        raise mismatch_of(row, job.tenant_id)
    job_id = row["id"]
    assert job_id is None or isinstance(job_id, UUID)
    return job_id


@names_missing_schema
def enqueue(
    conn: Connection,
    job_type: str,
    payload: dict[str, Any],
    *,
    tenant_id: str | None = None,
    group_id: str | None = None,
    dedupe_key: str | None = None,
    run_after: datetime | timedelta | None = None,
    max_attempts: int | None = None,
    cost: int = 1,
) -> UUID | None:
    """Insert a job; returns its id, or None when an open job has the same dedupe key.

    ``cost`` (a whole number from 1 to MAX_COST) is what the job counts as served when its
    stage is fair by cost (``Stage(fair_by="cost")``); every job counts one otherwise.

    Runs in the caller's transaction, clamped to ``tenant_id``: the job exists once the caller
    commits. A transaction already clamped to another tenant is refused (TenantMismatch).
    """
    prepared = prepare(
        job_type,
        payload,
        tenant_id=tenant_id,
        group_id=group_id,
        dedupe_key=dedupe_key,
        run_after=run_after,
        max_attempts=max_attempts,
        cost=cost,
    )
    job_id = insert(conn, prepared)
    ring_when_committed(conn, doorbell_for(prepared, job_id))
    return job_id


def doorbell_for(job: PreparedJob, job_id: UUID | None) -> Doorbell | None:
    """The doorbell an inserted job of a doorbell stage rings once committed."""
    return None if job_id is None else doorbell_of(job.type, job.tenant_id, job_id)


def rings_doorbells(job_type: str) -> bool:
    """Whether the type's stage in this process is a doorbell stage."""
    stage = known_stage(job_type)
    return stage is not None and stage.delivery == "doorbell"


def doorbell_of(job_type: str, tenant_id: str | None, job_id: UUID) -> Doorbell | None:
    """The doorbell a job rings when it becomes pending, if its stage is a doorbell stage."""
    if not rings_doorbells(job_type):
        return None
    return Doorbell(job_id=job_id, tenant_id=tenant_id)


def ring_when_committed(conn: Connection, bell: Doorbell | None) -> None:
    """Ring once the row is committed; where that cannot be known, the sweep rings it."""
    ring_all_when_committed(conn, [bell])


def ring_all_when_committed(conn: Connection, bells: Sequence[Doorbell | None]) -> None:
    """Ring every doorbell given, in one publish, once the rows are committed; where that
    cannot be known, the sweep rings them."""
    due = [bell for bell in bells if bell is not None]
    if not due:
        return

    def ring() -> None:
        ringing.ring(conn, due)

    after_commit(conn, ring)

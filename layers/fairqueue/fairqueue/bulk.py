"""Enqueue many: the jobs of one type and one tenant, checked together, inserted by one statement.

Every job gets ``enqueue``'s checks before anything is sent: its fields by ``jobs.job_fields``
and the call's payloads encoded together as one JSON document, or, when any check fails, each job
again by ``jobs.prepare_for``, so that the first bad one refuses the whole call with the error
``enqueue`` would raise, its message prefixed with the job's place in the list (``jobs[3]:
...``). What passes goes to the database as one INSERT of the document and arrays
(``queries/jobs.sql``, ``enqueue_many``), which clamps its transaction to the tenant as
``enqueue``'s statement does, and each inserted job of a doorbell stage rings once the rows
commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar
from uuid import UUID

from .db import Connection, names_missing_schema
from .errors import FairqueueError, InvalidPayload, PayloadTooLarge
from .inputs import MAX_ENQUEUE_MANY, MAX_ENQUEUE_MANY_BYTES, check_label, json_if_storable
from .jobs import (
    JobFields,
    PreparedJob,
    doorbell_of,
    job_fields,
    json_size,
    max_payload_bytes,
    prepare_for,
    ring_all_when_committed,
    rings_doorbells,
    stage_of,
    validate_payload,
)
from .queries import query
from .stage import Stage
from .tenancy import mismatch_of

T = TypeVar("T")

Refusal = Literal["open", "repeated"]
"""Why a job of the call was not inserted: ``open``, an open job of the tenant (queued, pending
or running) holds its dedupe key; ``repeated``, an earlier job of the same call has the key."""


@dataclass(frozen=True, slots=True)
class NewJob:
    """One job of an ``enqueue_many`` call: what ``enqueue`` takes besides the type and the
    tenant, with the same meaning and the same checks."""

    payload: dict[str, Any]
    group_id: str | None = None
    dedupe_key: str | None = None
    run_after: datetime | timedelta | None = None
    max_attempts: int | None = None
    cost: int = 1


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What became of the job at ``index`` in the call: its id, or why there is none."""

    index: int
    job_id: UUID | None
    refused: Refusal | None = None

    @property
    def inserted(self) -> bool:
        return self.job_id is not None


@names_missing_schema
def enqueue_many(
    conn: Connection,
    job_type: str,
    jobs: Sequence[NewJob],
    *,
    tenant_id: str | None = None,
) -> list[Enqueued]:
    """Insert up to MAX_ENQUEUE_MANY jobs of one type for one tenant in one statement.

    Returns one ``Enqueued`` per job, in the order given. A job whose dedupe key an open job of
    the tenant holds, or an earlier job of the same call, is not inserted and says so
    (``refused``); the others are. Any job that ``enqueue`` would refuse refuses the whole
    call, naming its index, and nothing is sent. Runs in the caller's transaction, clamped to
    ``tenant_id`` (a transaction clamped to another tenant is refused: TenantMismatch); the
    jobs exist once the caller commits, and a doorbell stage's jobs ring then, one doorbell
    each. An empty list returns ``[]`` and sends nothing.
    """
    prepared = prepare_many(job_type, jobs, tenant_id=tenant_id)
    if not prepared.places:
        return []  # no jobs given (a repeated key always follows one that is sent)
    ids = insert_many(conn, job_type, tenant_id, prepared)
    if rings_doorbells(job_type):
        ring_all_when_committed(
            conn,
            [
                None if job_id is None else doorbell_of(job_type, tenant_id, job_id)
                for job_id in ids
            ],
        )
    # The jobs sent answer in order, their ids in the same order: each place of the call is
    # either refused before sending or the next of them.
    sent = iter(ids)
    answers: list[Enqueued] = []
    for index in range(len(prepared.places) + len(prepared.refused)):
        why = prepared.refused.get(index)
        job_id = None if why is not None else next(sent)
        if why is None and job_id is None:
            why = "open"
        answers.append(Enqueued(index=index, job_id=job_id, refused=why))
    return answers


@dataclass(slots=True)
class PreparedMany:
    """The jobs of a call checked and ready to send, in the arrays the statement takes: the job
    at position k of each was at ``places[k]`` in the call."""

    places: list[int] = field(default_factory=list)
    # The payloads of the jobs sent, as one JSON array: encoded once for the call.
    payloads: str = "[]"
    group_ids: list[str | None] = field(default_factory=list)
    dedupe_keys: list[str | None] = field(default_factory=list)
    max_attempts: list[int] = field(default_factory=list)
    run_ats: list[datetime | None] = field(default_factory=list)
    delays_s: list[float] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    # The places refused before the database is asked, and why.
    refused: dict[int, Refusal] = field(default_factory=dict)

    def add(self, place: int, fields: JobFields) -> None:
        self.places.append(place)
        self.group_ids.append(fields.group_id)
        self.dedupe_keys.append(fields.dedupe_key)
        self.max_attempts.append(fields.max_attempts)
        self.run_ats.append(fields.run_at)
        self.delays_s.append(fields.delay_s)
        self.costs.append(fields.cost)


def prepare_many(job_type: str, jobs: Sequence[NewJob], *, tenant_id: str | None) -> PreparedMany:
    """Every job checked, none sent: the ones to insert, with their places in the call, and
    the places of the ones refused before the database is asked (a dedupe key repeated)."""
    stage = stage_of(job_type)
    check_label(f"{job_type}: tenant_id", tenant_id)
    items: list[object] = list(jobs)
    if len(items) > MAX_ENQUEUE_MANY:
        raise InvalidPayload(
            f"{job_type}: enqueue_many takes at most {MAX_ENQUEUE_MANY} jobs per call,"
            f" got {len(items)}; split them into several calls"
        )
    limit = max_payload_bytes()
    together = _prepared_together(stage, items, limit)
    return together if together is not None else _prepared_each(stage, items, tenant_id, limit)


def _prepared_together(
    stage: Stage, items: list[object], payload_limit: int
) -> PreparedMany | None:
    """The call's jobs checked with their payloads encoded as one document: the way a call of
    good jobs is checked, the encoding being most of the checks' cost. None when any check
    fails, or the document is over a limit that each payload or all of them together must
    keep: ``_prepared_each`` then finds the first job that is wrong, as ``enqueue`` would."""
    prepared = PreparedMany()
    payloads: list[dict[str, Any]] = []
    seen_keys: set[str] = set()
    # A job that gives nothing but its payload (the common one) has the stage's defaults.
    defaults = job_fields(stage, group_id=None, dedupe_key=None, run_after=None, max_attempts=None)
    try:
        for index, item in enumerate(items):
            if not isinstance(item, NewJob):
                return None
            stored = validate_payload(stage, item.payload)
            if (
                item.group_id is None
                and item.dedupe_key is None
                and item.run_after is None
                and item.max_attempts is None
                and item.cost == 1
                and type(item.cost) is int
            ):
                fields = defaults
            else:
                fields = job_fields(
                    stage,
                    group_id=item.group_id,
                    dedupe_key=item.dedupe_key,
                    run_after=item.run_after,
                    max_attempts=item.max_attempts,
                    cost=item.cost,
                )
            if fields.dedupe_key is not None:
                if fields.dedupe_key in seen_keys:
                    prepared.refused[index] = "repeated"
                    continue
                seen_keys.add(fields.dedupe_key)
            payloads.append(stored)
            prepared.add(index, fields)
    except FairqueueError:
        return None
    document = json_if_storable(payloads)
    # No payload is larger than the document that holds them all, nor are they together.
    if document is None or json_size(document) > min(payload_limit, MAX_ENQUEUE_MANY_BYTES):
        return None
    prepared.payloads = document
    return prepared


def _prepared_each(
    stage: Stage, items: list[object], tenant_id: str | None, payload_limit: int
) -> PreparedMany:
    """The call's jobs checked one by one, each payload encoded and measured on its own: the
    first job that is wrong refuses the call with the error ``enqueue`` would raise, naming
    its place."""
    prepared = PreparedMany()
    encoded: list[str] = []
    seen_keys: set[str] = set()
    total_bytes = 0
    for index, item in enumerate(items):
        job = _prepare_one(stage, index, item, tenant_id, payload_limit)
        total_bytes += job.payload_bytes
        if total_bytes > MAX_ENQUEUE_MANY_BYTES:
            raise PayloadTooLarge(
                f"{stage.name}: the payloads of jobs[0] to jobs[{index}] are {total_bytes} bytes"
                f" together, over the limit of {MAX_ENQUEUE_MANY_BYTES} for one call;"
                " split them into several calls"
            )
        if job.dedupe_key is not None:
            if job.dedupe_key in seen_keys:
                prepared.refused[index] = "repeated"
                continue
            seen_keys.add(job.dedupe_key)
        encoded.append(job.payload_json)
        prepared.add(
            index,
            JobFields(
                group_id=job.group_id,
                dedupe_key=job.dedupe_key,
                max_attempts=job.max_attempts,
                run_at=job.run_at,
                delay_s=job.delay_s,
                cost=job.cost,
            ),
        )
    prepared.payloads = f"[{','.join(encoded)}]"
    return prepared


def _prepare_one(
    stage: Stage, index: int, item: object, tenant_id: str | None, payload_limit: int
) -> PreparedJob:
    if not isinstance(item, NewJob):
        raise InvalidPayload(
            f"jobs[{index}]: {stage.name}: each job must be a NewJob, got {type(item).__name__}"
        )
    try:
        return prepare_for(
            stage,
            item.payload,
            tenant_id=tenant_id,
            group_id=item.group_id,
            dedupe_key=item.dedupe_key,
            run_after=item.run_after,
            max_attempts=item.max_attempts,
            cost=item.cost,
            payload_limit=payload_limit,
        )
    except FairqueueError as exc:
        # The error enqueue would raise for this job, naming its place in the call.
        raise type(exc)(f"jobs[{index}]: {exc}") from exc


def insert_many(
    conn: Connection, job_type: str, tenant_id: str | None, prepared: PreparedMany
) -> list[UUID | None]:
    """Insert the prepared jobs of one type and tenant in one statement; each one's id, or None
    where an open job of the tenant holds its dedupe key. The keys must differ.

    The statement clamps its transaction to the tenant unless it is clamped already, as
    ``enqueue``'s does; a transaction clamped to another tenant is refused (TenantMismatch)
    and nothing is written."""
    row = conn.execute(
        query("enqueue_many"),
        {
            "type": job_type,
            "tenant_id": tenant_id,
            "payloads": prepared.payloads,
            "group_ids": _unless_all_null(prepared.group_ids),
            "dedupe_keys": _unless_all_null(prepared.dedupe_keys),
            "max_attempts": prepared.max_attempts,
            "run_afters": _unless_all_null(prepared.run_ats),
            "delays_s": prepared.delays_s,
            # Every cost 1 (the common call) goes as no array: the door reads that as 1 each.
            "costs": None if all(c == 1 for c in prepared.costs) else prepared.costs,
        },
    ).fetchone()
    assert row is not None, "the enqueue_many statement answers one row"
    if not row["matches"]:
        raise mismatch_of(row, tenant_id)
    ids: list[UUID | None] = row["ids"]
    assert len(ids) == len(prepared.places), "enqueue_many answers one id per job"
    return ids


def _unless_all_null(values: list[T | None]) -> list[T | None] | None:
    """The array to send, or None when every element is None: the statement reads a NULL array
    as a null at every position, and an array of a thousand nulls takes time to send."""
    return None if all(value is None for value in values) else values

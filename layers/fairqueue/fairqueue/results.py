"""Results: one row per job (a job and its re-checks share the original's row), two writers.

The handler's return value is the job's output, stored on the job when it is marked done. The
client that watches the job renders the result from that output and saves it
(``save_result``): the common path, one write. The backstop sweep (``fairqueue.roles.backstop``)
saves it for done jobs whose result is still missing after a grace window. Both go through
``_record``, and the precedence between them is one SQL statement (``save_result`` in
``queries/results.sql``). A stage's ``after_result`` hook fires once per row version that lands,
in the transaction that marks it fired, from whichever path recorded it.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field

from .db import Connection, after_commit
from .errors import InvalidPayload, JobNotFinished, UnknownJob
from .inputs import storable_json
from .queries import query
from .settings import settings, within
from .stage import Result as Result  # its home is fairqueue.stage; still importable from here
from .stage import Stage, Writer, known_stage
from .tenancy import tenant_scope, tenant_transaction

log = logging.getLogger("fairqueue.results")


def _bounded(name: str, default: float) -> Any:
    return Field(default=default, **within(name))


class ResultSettings(BaseModel):
    """How long a missing result may wait for its client, and how long outputs and finished
    jobs are kept, and how many the backstop takes per batch. From ``FAIRQUEUE_RESULT_GRACE_S``,
    ``FAIRQUEUE_OUTPUT_RETENTION_S``, ``FAIRQUEUE_JOB_RETENTION_S`` and
    ``FAIRQUEUE_RESULT_BATCH``, each within ``settings.RESULT_BOUNDS``."""

    grace_s: float = _bounded("result_grace_s", 120.0)
    output_retention_s: float = _bounded("output_retention_s", 86_400.0)
    job_retention_s: float = _bounded("job_retention_s", 7 * 86_400.0)
    batch: int = _bounded("result_batch", 100)

    @classmethod
    def from_env(cls) -> ResultSettings:
        """The settings the environment gives (``settings()`` refuses, naming the variable, one
        out of its bounds)."""
        config = settings()
        return cls(
            grace_s=config.result_grace_s,
            output_retention_s=config.output_retention_s,
            job_retention_s=config.job_retention_s,
            batch=config.result_batch,
        )


def check_body(body: Any, what: str) -> dict[str, Any]:
    """A result body or output must be a JSON object."""
    if not isinstance(body, dict):
        raise InvalidPayload(f"{what} must be a JSON object, got {type(body).__name__}")
    storable_json(body, what)
    return body


def save_result(
    conn: Connection, job_id: UUID, body: dict[str, Any], *, tenant_id: str | None
) -> Result:
    """The client's save: always wins over a worker's. The job must be done.

    Runs in the caller's transaction when one is open (clamped to ``tenant_id``); the stage's
    ``after_result`` hook fires once that commits. Raises UnknownJob (no such job for this
    tenant), JobNotFinished, InvalidPayload.
    """
    check_body(body, "a result body")
    with tenant_scope(conn, tenant_id):
        source = result_source(conn, job_id, tenant_id)
        if source is None or source["tenant_id"] != tenant_id:
            raise UnknownJob(f"no job {job_id} for this tenant")
        if source["status"] != "done":
            raise JobNotFinished(f"job {job_id} is {source['status']}, not done")
        stage = known_stage(source["type"])
        # A client save always wins over its own tenant's rows; refused only when the row its
        # original names is another tenant's, which this tenant cannot see or replace.
        if not _record(conn, source, body, "client", stage):
            raise UnknownJob(f"no job {job_id} for this tenant")
        row = _result_row(conn, source["result_job_id"], tenant_id)
        assert row is not None
    result = Result.from_row(row)
    if stage is not None and stage.after_result is not None:
        hooked = stage

        def fire() -> None:
            fire_hook(conn, hooked, result.job_id, tenant_id)

        # A hook that cannot run now (a plain psycopg connection) is the backstop's to fire.
        after_commit(conn, fire)
    return result


def result_source(conn: Connection, job_id: UUID, tenant_id: str | None) -> dict[str, Any] | None:
    """What a result write needs to know of one of this tenant's jobs, in a transaction
    clamped to it; None when the job is not this tenant's."""
    row: dict[str, Any] | None = conn.execute(
        query("result_source"), {"id": job_id, "tenant_id": tenant_id}
    ).fetchone()
    return row


def _result_row(
    conn: Connection, result_job_id: UUID, tenant_id: str | None
) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(
        query("read_result"), {"job_id": result_job_id, "tenant_id": tenant_id}
    ).fetchone()
    return row


def record_worker_result(conn: Connection, source: dict[str, Any], stage: Stage) -> bool:
    """The backstop's save, in a transaction clamped to the job's tenant: render the result
    with the stage's own function and write it unless precedence refuses; True if written."""
    assert stage.render_result is not None
    body = check_body(stage.render_result(source["output"]), f"{stage.name}'s render_result")
    return _record(conn, source, body, "worker", stage)


def _record(
    conn: Connection,
    source: dict[str, Any],
    body: dict[str, Any],
    writer: Writer,
    stage: Stage | None,
) -> bool:
    """The one write site of results; the job's result is decided either way. UnknownJob when
    the row its original names may not be this tenant's (another tenant's row, which the
    policies hide, or a job gone since it was read): the transaction is then aborted."""
    try:
        row = conn.execute(
            query("save_result"),
            {
                "result_job_id": source["result_job_id"],
                "tenant_id": source["tenant_id"],
                "type": source["type"],
                "body": Jsonb(body),
                "saved_by": writer,
                "source_job_id": source["id"],
                "source_created_at": source["created_at"],
                "hook_due": stage is not None and stage.after_result is not None,
            },
        ).fetchone()
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ForeignKeyViolation):
        # The statement writes only results, which the application role may write: a refusal
        # here is the row's policy (a row of another tenant under this key) or the trigger
        # results_job (a key that is not a job of this tenant).
        raise UnknownJob(f"no job {source['id']} for this tenant") from None
    conn.execute(
        query("mark_result_decided"), {"id": source["id"], "tenant_id": source["tenant_id"]}
    )
    return row is not None


def read_result(conn: Connection, job_id: UUID, *, tenant_id: str | None) -> Result | None:
    """The result row of a job (a re-check's is its original's), or None."""
    with tenant_scope(conn, tenant_id):
        source = result_source(conn, job_id, tenant_id)
        key = source["result_job_id"] if source is not None else job_id
        row = _result_row(conn, key, tenant_id)
    if row is None or row["tenant_id"] != tenant_id:
        return None
    return Result.from_row(row)


def fire_hook(conn: Connection, stage: Stage, result_job_id: UUID, tenant_id: str | None) -> bool:
    """Fire the stage's ``after_result`` hook for a result row whose hook is owed.

    The hook gets a connection inside the tenant transaction that marks the hook fired: what it
    writes there commits with the mark, or not at all. A row another process is firing is
    skipped. False when nothing was owed here or the hook raised (logged; a later sweep retries).
    """
    if stage.after_result is None:
        return False
    try:
        with tenant_transaction(conn, tenant_id):
            named = {"job_id": result_job_id, "tenant_id": tenant_id}
            row = conn.execute(query("lock_owed_hook"), named).fetchone()
            if row is None:
                return False
            stage.after_result(Result.from_row(row), conn)
            conn.execute(query("mark_hook_fired"), named)
    except Exception:
        log.exception("after_result hook of %s failed for %s", stage.name, result_job_id)
        return False
    return True


def finished_without_result(
    conn: Connection, tenant_id: str | None, job_type: str
) -> list[dict[str, Any]]:
    """A type's done jobs of one tenant still waiting for their result: ids and outputs."""
    with tenant_scope(conn, tenant_id):
        return conn.execute(
            query("finished_without_result"), {"tenant_id": tenant_id, "type": job_type}
        ).fetchall()


def results_by_writer(
    conn: Connection, tenant_id: str | None, job_type: str, *, since: datetime | None = None
) -> dict[str, int]:
    """How many of a type's results the client and the worker saved, for one tenant; with
    ``since``, only those saved since then."""
    with tenant_scope(conn, tenant_id):
        rows = conn.execute(
            query("results_by_writer"), {"tenant_id": tenant_id, "type": job_type, "since": since}
        ).fetchall()
    return {row["saved_by"]: int(row["n"]) for row in rows}

"""The cron invocation as a Lambda runs it: the event, the connection, the answer."""

from __future__ import annotations

import importlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import psycopg
from aws_lambda_powertools.utilities import parameters
from psycopg.conninfo import conninfo_to_dict
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import ringing
from .db import Connection, connect
from .errors import ConfigurationError
from .pipeline import DEFAULT_TIME_BUDGET_S, LambdaContextLike, RunResult, run_pipeline
from .stage import Stage

DEFAULT_STAGES = "fairqueue.example:STAGES"

# Set by a local runner on Ctrl-C or SIGTERM: the batch in flight finishes, then the run closes.
stop_requested = threading.Event()


class ScheduledEvent(BaseModel):
    """What starts a run: EventBridge Scheduler's input, a scheduled rule, or a direct invoke."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    source: str | None = None
    execution_id: str | None = Field(default=None, alias="executionId")
    scheduled_time: datetime | None = Field(default=None, alias="scheduledTime")
    schedule_arn: str | None = Field(default=None, alias="scheduleArn")
    detail_type: str | None = Field(default=None, alias="detail-type")
    event_id: str | None = Field(default=None, alias="id")
    trigger: str | None = Field(default=None, max_length=64)
    time_budget_s: float | None = Field(default=None, gt=0, le=900)

    @classmethod
    def parse(cls, event: Any) -> ScheduledEvent:
        if event is None:
            return cls()
        if not isinstance(event, dict):
            raise ConfigurationError(
                f"the cron event must be a JSON object, got {type(event).__name__}"
            )
        try:
            return cls.model_validate(event)
        except ValidationError as exc:
            raise ConfigurationError(f"the cron event is malformed: {exc}") from exc

    @property
    def run_trigger(self) -> str:
        if self.trigger:
            return self.trigger
        if self.execution_id or self.detail_type == "Scheduled Event":
            return "schedule"
        return "invoke"

    @property
    def correlation_id(self) -> str | None:
        return self.execution_id or self.event_id


class CronAnswer(BaseModel):
    """The function's return value."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    run_id: str = Field(alias="runId")
    stop_reason: str = Field(alias="stopReason")
    jobs_done: int = Field(alias="jobsDone")
    jobs_failed: int = Field(alias="jobsFailed")
    jobs_deferred: int = Field(alias="jobsDeferred")
    units: int
    error: str | None = None

    @classmethod
    def of(cls, result: RunResult) -> CronAnswer:
        return cls(
            run_id=str(result.run_id),
            stop_reason=result.stop_reason,
            jobs_done=result.jobs_done,
            jobs_failed=result.jobs_failed,
            jobs_deferred=result.jobs_deferred,
            units=result.units,
            error=result.error,
        )


def load_stages(spec: str | None = None) -> list[Stage]:
    """The stage list named ``module:attribute`` (``FAIRQUEUE_STAGES``, else the example)."""
    target = spec or os.environ.get("FAIRQUEUE_STAGES") or DEFAULT_STAGES
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(
            f"FAIRQUEUE_STAGES must look like module:attribute, got {target!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"cannot import {module_name!r} named by {target!r}: {exc}"
        ) from exc
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from None
    stages = list(value) if isinstance(value, list | tuple) else None
    if not stages or not all(isinstance(s, Stage) for s in stages):
        raise ConfigurationError(f"{target!r} must be a non-empty list of Stage")
    return stages


def dsn_from_secret(secret: str) -> str:
    """A secret holding a connection string (URL or key=value), or RDS-style JSON, as a DSN."""
    text = secret.strip()
    if not text.startswith(("{", "[")):
        try:
            conninfo_to_dict(text)
        except psycopg.ProgrammingError:
            raise ConfigurationError(
                "the database secret is neither a connection string nor a JSON object"
            ) from None
        return text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"the database secret is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError("the database secret's JSON must be an object")
    missing = [k for k in ("host", "username", "password") if not data.get(k)]
    if missing:
        raise ConfigurationError(f"the database secret lacks {', '.join(missing)}")
    user = quote(str(data["username"]), safe="")
    password = quote(str(data["password"]), safe="")
    dbname = quote(str(data.get("dbname") or "postgres"), safe="")
    port = int(data.get("port") or 5432)
    return f"postgresql://{user}:{password}@{data['host']}:{port}/{dbname}?sslmode=require"


def database_url() -> str:
    """``DATABASE_URL``, else the secret ``DATABASE_SECRET_ARN`` names (cached five minutes)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    secret_arn = os.environ.get("DATABASE_SECRET_ARN")
    if not secret_arn:
        raise ConfigurationError("set DATABASE_SECRET_ARN (or DATABASE_URL) for this function")
    secret = parameters.get_secret(secret_arn, max_age=300)
    return dsn_from_secret(secret)


class ConnectionCache:
    """One autocommit connection kept across invocations, replaced when it breaks."""

    def __init__(self, resolve_dsn: Callable[[], str]) -> None:
        self._resolve = resolve_dsn
        self._conn: Connection | None = None
        self.dsn: str | None = None

    def get(self) -> Connection:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            try:
                conn.execute("select 1")
                return conn
            except psycopg.Error:
                conn.close()
        self.dsn = self._resolve()
        self._conn = connect(self.dsn, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def function_setup() -> tuple[ConnectionCache, list[Stage]]:
    """What every function does at cold start: its connection cache and stage list, and a
    refusal to start on a doorbell setting that cannot deliver (memory in production)."""
    connection = ConnectionCache(database_url)
    stages = load_stages()
    ringing.check_configuration()
    return connection, stages


def invoke(
    cache: ConnectionCache,
    stages: Sequence[Stage],
    event: ScheduledEvent,
    context: LambdaContextLike | None,
) -> RunResult:
    """One cron invocation over the cached connection."""
    conn = cache.get()
    return run_pipeline(
        cache.dsn,
        stages,
        time_budget_s=event.time_budget_s or DEFAULT_TIME_BUDGET_S,
        trigger=event.run_trigger,
        context=context,
        conn=conn,
        stop=stop_requested,
    )

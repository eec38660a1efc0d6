"""What every deployed function shares: its cold start, its connection, its event, its logs.

A function module calls :func:`function_setup` once at import. Nothing there reads the
database URL: the secret is read, and the connection opened, by the first invocation that asks
:meth:`ConnectionCache.get`, and again whenever the kept connection has broken.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple, ParamSpec, TypeVar
from urllib.parse import quote

import psycopg
from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities import parameters
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..db import Connection, connect
from ..doorbells import ringing
from ..errors import ConfigurationError
from ..settings import DEFAULT_STAGES as DEFAULT_STAGES
from ..settings import settings
from ..stage import Stage
from ..validation import problems

# The package's own loggers: every module's logger is a child of this one.
LIBRARY_LOGGER = "fairqueue"
# Development code (the example's stages among it), which the Lambda layer leaves out.
DEVELOPMENT_PACKAGE = "fairqueue.dev"

P = ParamSpec("P")
R = TypeVar("R")


class ScheduledEvent(BaseModel):
    """What starts a scheduled run: EventBridge Scheduler's input (template.yaml), a classic
    EventBridge rule's event, or a direct invoke."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    source: str | None = None
    execution_id: str | None = Field(default=None, alias="executionId")
    scheduled_time: datetime | None = Field(default=None, alias="scheduledTime")
    schedule_arn: str | None = Field(default=None, alias="scheduleArn")
    detail_type: str | None = Field(default=None, alias="detail-type")
    event_id: str | None = Field(default=None, alias="id")
    event_time: datetime | None = Field(default=None, alias="time")
    resources: list[str] = Field(default_factory=list)
    trigger: str | None = Field(default=None, max_length=64)
    time_budget_s: float | None = Field(default=None, gt=0, le=900)

    @classmethod
    def parse(cls, event: Any) -> ScheduledEvent:
        if event is None:
            return cls()
        if not isinstance(event, dict):
            raise ConfigurationError(
                f"the scheduled event must be a JSON object, got {type(event).__name__}"
            )
        try:
            return cls.model_validate(event)
        except ValidationError as exc:
            raise ConfigurationError(f"the scheduled event is malformed: {problems(exc)}") from None

    @property
    def is_scheduled(self) -> bool:
        return bool(self.execution_id) or self.detail_type == "Scheduled Event"

    @property
    def run_trigger(self) -> str:
        if self.trigger:
            return self.trigger
        return "schedule" if self.is_scheduled else "invoke"

    @property
    def correlation_id(self) -> str | None:
        return self.execution_id or self.event_id

    def schedule_context(self, now: datetime | None = None) -> dict[str, Any]:
        """What the run row records of the tick that started it (empty for a direct invoke):
        the scheduler's execution id, the time the tick was due, the schedule, and how late
        the run started (``late_s``, seconds after the due time)."""
        if not self.is_scheduled:
            return {}
        due = self.scheduled_time or self.event_time
        arn = self.schedule_arn or (self.resources[0] if self.resources else None)
        context: dict[str, Any] = {
            "execution_id": self.correlation_id,
            "scheduled_time": due.isoformat() if due else None,
            "schedule_arn": arn,
        }
        if due is not None:
            started = now or datetime.now(UTC)
            context["late_s"] = round((started - due).total_seconds(), 3)
        return {"schedule": context}


def load_stages(spec: str | None = None) -> list[Stage]:
    """The stage list named ``module:attribute`` (``FAIRQUEUE_STAGES``, else, outside
    production, the example)."""
    config = settings()
    if spec is None and config.production and "stages" not in config.model_fields_set:
        # The example's stages are development code; a production stack names its own.
        raise ConfigurationError(
            "FAIRQUEUE_ENV=production needs FAIRQUEUE_STAGES (module:attribute of your stage"
            " list): the example's stages are for development"
        )
    target = spec or config.stages
    value = import_target(target, "FAIRQUEUE_STAGES (StagesSpec)", "stage list")
    stages = list(value) if isinstance(value, list | tuple) else None
    if not stages or not all(isinstance(s, Stage) for s in stages):
        raise ConfigurationError(f"{target!r} must be a non-empty list of Stage")
    return stages


def import_target(target: str, variable: str, what: str) -> object:
    """The attribute ``module:attribute`` names (the value of ``variable``, the ``what`` it
    should hold), or a ConfigurationError saying why it cannot be had."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        name = variable.split()[0]
        raise ConfigurationError(f"{name} must look like module:attribute, got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = exc.name or ""
        if missing == DEVELOPMENT_PACKAGE or missing.startswith(f"{DEVELOPMENT_PACKAGE}."):
            raise ConfigurationError(
                f"{target!r} needs {DEVELOPMENT_PACKAGE}, development code that the Lambda"
                f" layer leaves out: set {variable} to your own {what}"
            ) from None
        raise ConfigurationError(
            f"cannot import {module_name!r} named by {target!r}: {exc}"
        ) from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from None


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
    """``DATABASE_URL``, else the secret ``DATABASE_SECRET_ARN`` names (cached five minutes),
    at ``FAIRQUEUE_DATABASE_HOST`` when that is set (an RDS Proxy's endpoint: the proxy takes
    the same login and port as the database behind it)."""
    config = settings()
    if config.database_url:
        return config.database_url
    secret_arn = config.database_secret_arn
    if not secret_arn:
        raise ConfigurationError("set DATABASE_SECRET_ARN (or DATABASE_URL) for this function")
    secret = parameters.get_secret(secret_arn, max_age=300)
    dsn = dsn_from_secret(secret)
    if config.database_host:
        return make_conninfo(dsn, host=config.database_host)
    return dsn


class ConnectionCache:
    """One autocommit connection kept across invocations, replaced when it breaks.

    The DSN is resolved when a connection is opened, never before: :attr:`dsn` is the one the
    current connection was opened with, for the handler connections a run opens beside it.
    """

    def __init__(self, resolve_dsn: Callable[[], str]) -> None:
        self._resolve = resolve_dsn
        self._conn: Connection | None = None
        self._dsn: str | None = None

    def get(self) -> Connection:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            try:
                conn.execute("select 1")
                return conn
            except psycopg.Error:
                conn.close()
        self._dsn = self._resolve()
        self._conn = connect(self._dsn, autocommit=True, as_app_role=True)
        return self._conn

    @property
    def dsn(self) -> str:
        if self._dsn is None:
            raise ConfigurationError("no connection yet: call get() before reading the DSN")
        return self._dsn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class FunctionSetup(NamedTuple):
    """A function's cold start: its connection cache and its stage list."""

    connection: ConnectionCache
    stages: list[Stage]


def function_setup(logger: Logger) -> FunctionSetup:
    """What every function does at cold start: the library's log lines go out through the
    function's Powertools logger (JSON, with the invocation's request id); the stages are
    loaded; a doorbell setting that cannot deliver (memory in production) is refused."""
    logging.getLogger(LIBRARY_LOGGER)  # registered before any module of the package logs
    copy_config_to_registered_loggers(source_logger=logger, include={LIBRARY_LOGGER})
    # An invocation that fails before its first metric has none to publish, and Powertools
    # would say so on stderr: a line of plain text among the JSON.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    stages = load_stages()
    ringing.check_configuration()
    return FunctionSetup(connection=ConnectionCache(database_url), stages=stages)


def invocation_logging(logger: Logger) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Per invocation, inside ``inject_lambda_context(clear_state=True)``: every line names the
    logger that wrote it (the cleared state drops that key), and an invocation that raises still
    leaves a line: the error and its traceback, before the error goes on to Lambda."""

    def decorate(handler: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(handler)
        def logged(*args: P.args, **kwargs: P.kwargs) -> R:
            logger.append_keys(name="%(name)s")
            try:
                return handler(*args, **kwargs)
            except Exception as exc:
                logger.exception("invocation failed", extra={"error_type": type(exc).__name__})
                raise

        return logged

    return decorate

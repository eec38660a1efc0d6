"""Every environment variable the library reads, in one typed object.

``settings()`` reads the environment at the point of use: a variable changed while the process
runs (a test's ``monkeypatch.setenv``) is seen by the next read. The parsed object is kept
only while the variables it came from are unchanged, so a read in a hot path costs a few
dictionary lookups. A bad value is a :class:`~fairqueue.errors.ConfigurationError` that names
the variable; a pydantic ``ValidationError`` never reaches a caller.

Powertools' and Lambda's own variables (``POWERTOOLS_*``, ``AWS_*``) are theirs, not ours, and
are not here, except the one the library itself reads (``AWS_LAMBDA_LOG_STREAM_NAME``). The
table in docs/guide/configuration.md lists every one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, Literal

from pydantic import Field, SecretStr, ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .errors import ConfigurationError
from .validation import shown_value

DEFAULT_STAGES: Final = "fairqueue.dev.example:STAGES"

DoorbellChoice = Literal["sqs", "postgres", "memory"]
Pooler = Literal["none", "transaction"]
Role = Literal["cron", "worker", "sweeper", "backstop", "all", "api", "dashboard"]


# Set while Settings.from_mapping builds an object from a mapping alone.
_given_only: ContextVar[bool] = ContextVar("fairqueue_settings_given_only", default=False)


# The result settings' bounds are the ones the database's doors take (sql/functions/
# results.sql, retention.sql, partitions.sql), so the backstop never hands a door a value it
# refuses: a grace of a millisecond to an hour; an output kept two hours (twice the longest
# grace) to ten years; a finished job kept a day to ten years; 1 to 10,000 results a batch.
TEN_YEARS_S: Final = 3660 * 86_400.0
RESULT_BOUNDS: Final[Mapping[str, tuple[float, float]]] = {
    "result_grace_s": (0.001, 3_600.0),
    "output_retention_s": (7_200.0, TEN_YEARS_S),
    "job_retention_s": (86_400.0, TEN_YEARS_S),
    "result_batch": (1, 10_000),
}


def within(name: str) -> Any:
    """The ``ge`` and ``le`` of a result setting's field (``RESULT_BOUNDS``)."""
    least, most = RESULT_BOUNDS[name]
    return {"ge": least, "le": most}


def _var(name: str, description: str) -> Any:
    return {"validation_alias": name, "description": description}


class Settings(BaseSettings):
    """The library's configuration. Each field's alias is its environment variable."""

    model_config = SettingsConfigDict(
        case_sensitive=True,
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
        populate_by_name=False,
    )

    # The database.
    database_url: str | None = Field(
        default=None,
        **_var("DATABASE_URL", "the Postgres to use"),
    )
    database_secret_arn: str | None = Field(
        default=None,
        **_var(
            "DATABASE_SECRET_ARN",
            "on Lambda: a Secrets Manager secret holding a connection string or an RDS-style "
            "JSON secret (host, port, username, password, dbname; TLS required)",
        ),
    )
    database_host: str | None = Field(
        default=None,
        **_var(
            "FAIRQUEUE_DATABASE_HOST",
            "on Lambda: the host to connect to instead of the one the database secret names"
            " (the stack sets it to its RDS Proxy's endpoint)",
        ),
    )
    pooler: Pooler = Field(
        default="none",
        **_var(
            "FAIRQUEUE_POOLER",
            "`transaction` when a transaction pooler (RDS Proxy, PgBouncer in transaction mode)"
            " is in front of the database: a login that needs `SET ROLE` is refused, and the"
            " Postgres doorbells listen on `FAIRQUEUE_LISTEN_DATABASE_URL`",
        ),
    )
    listen_database_url: str | None = Field(
        default=None,
        **_var(
            "FAIRQUEUE_LISTEN_DATABASE_URL",
            "a direct connection (not through a pooler) for the Postgres doorbells' `LISTEN`;"
            " unset means the connection they were given",
        ),
    )
    env: str = Field(
        default="development",
        **_var(
            "FAIRQUEUE_ENV",
            "`production` refuses the embedded database, in-memory doorbells and the "
            "development upstreams (in-process and in-database)",
        ),
    )

    # What runs.
    stages: str = Field(
        default=DEFAULT_STAGES,
        pattern=r"^[^:]+:[^:]+$",
        **_var("FAIRQUEUE_STAGES", "`module:attribute` of the functions' stage list"),
    )
    schedules: str | None = Field(
        default=None,
        pattern=r"^[^:]+:[^:]+$",
        **_var(
            "FAIRQUEUE_SCHEDULES",
            "`module:attribute` of the schedules declared in code (a list of `Schedule`), kept"
            " in step by the sweeper; unset leaves the declared schedules as they are",
        ),
    )
    role: Role = Field(
        default="all",
        **_var("FAIRQUEUE_ROLE", "the role of `fairqueue serve` when `--role` is not given"),
    )
    stop_grace_s: float = Field(
        default=25.0,
        gt=0,
        le=3600.0,
        **_var(
            "FAIRQUEUE_STOP_GRACE_S",
            "seconds `fairqueue serve` and `fairqueue run` wait for the work in flight after a"
            " stop request before they abort",
        ),
    )
    max_payload_bytes: int = Field(
        default=1024 * 1024,
        ge=1,
        **_var(
            "FAIRQUEUE_MAX_PAYLOAD_BYTES",
            "the largest payload, in UTF-8 bytes of compact JSON",
        ),
    )

    # Doorbells.
    doorbells: DoorbellChoice | None = Field(
        default=None,
        **_var(
            "FAIRQUEUE_DOORBELLS",
            "`sqs`, `postgres` or `memory`; unset means `memory`, which production refuses",
        ),
    )
    doorbell_queue_url: str | None = Field(
        default=None,
        **_var("FAIRQUEUE_DOORBELL_QUEUE_URL", "the SQS queue doorbells go to"),
    )

    # Set by Lambda, read by the library.
    lambda_log_stream: str | None = Field(
        default=None,
        **_var(
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "set by Lambda: the host a run row names (else the machine's host name)",
        ),
    )

    # Held upstream work.
    upstream_url: str | None = Field(
        default=None,
        **_var(
            "FAIRQUEUE_UPSTREAM_URL",
            "the base URL of the upstream service (`upstream_from_env`); the example's "
            "`analyze` stage uses it when set",
        ),
    )
    upstream_token: SecretStr | None = Field(
        default=None,
        **_var("FAIRQUEUE_UPSTREAM_TOKEN", "a bearer token for the upstream service"),
    )
    upstream_timeout_s: float = Field(
        default=5.0,
        gt=0,
        **_var("FAIRQUEUE_UPSTREAM_TIMEOUT_S", "seconds an upstream call may take"),
    )

    # Runs (the sweeper).
    run_abandoned_after_s: float = Field(
        default=1_200.0,
        ge=60.0,
        le=604_800.0,
        **_var(
            "FAIRQUEUE_RUN_ABANDONED_AFTER_S",
            "seconds after its start that a run still open is closed as abandoned (longer than"
            " any invocation lives: Lambda's 900 s and a margin)",
        ),
    )

    # Results and retention (the backstop).
    result_grace_s: float = Field(
        default=120.0,
        **within("result_grace_s"),
        **_var(
            "FAIRQUEUE_RESULT_GRACE_S",
            "seconds a missing result waits for its client before the backstop saves it",
        ),
    )
    output_retention_s: float = Field(
        default=86_400.0,
        **within("output_retention_s"),
        **_var("FAIRQUEUE_OUTPUT_RETENTION_S", "seconds a finished job's output is kept"),
    )
    job_retention_s: float = Field(
        default=604_800.0,
        **within("job_retention_s"),
        **_var(
            "FAIRQUEUE_JOB_RETENTION_S",
            "seconds a finished job is kept at least (a day or more; whole days are dropped)",
        ),
    )
    result_batch: int = Field(
        default=100,
        **within("result_batch"),
        **_var("FAIRQUEUE_RESULT_BATCH", "results the backstop saves per transaction"),
    )
    completion_trails: bool = Field(
        default=True,
        **_var(
            "FAIRQUEUE_COMPLETION_TRAILS",
            "whether the loop records a batch's completion on a second connection of the"
            " run while it claims the next batch",
        ),
    )

    # The admission API.
    api_secret: SecretStr | None = Field(
        default=None,
        **_var(
            "FAIRQUEUE_API_SECRET",
            "the local API's token signing secret (32 bytes or more); `fairqueue serve "
            "--role all` runs the API only when it is set",
        ),
    )
    api_host: str = Field(
        default="127.0.0.1",
        **_var("FAIRQUEUE_API_HOST", "the address the local API listens on"),
    )
    api_port: int = Field(
        default=8080,
        ge=0,
        le=65_535,
        **_var("FAIRQUEUE_API_PORT", "the port the local API listens on"),
    )
    api_pool_size: int = Field(
        default=10,
        ge=1,
        le=1000,
        **_var(
            "FAIRQUEUE_API_POOL_SIZE",
            "the local API's request threads and the most database connections it holds at"
            " once; a request waits for a free one",
        ),
    )
    # The operators' dashboard.
    dashboard_secret: SecretStr | None = Field(
        default=None,
        **_var(
            "FAIRQUEUE_DASHBOARD_SECRET",
            "the operators' password for the dashboard (32 bytes or more), which also signs"
            " its session cookies; `fairqueue serve --role all` runs the dashboard only when"
            " it is set",
        ),
    )
    dashboard_host: str = Field(
        default="127.0.0.1",
        **_var("FAIRQUEUE_DASHBOARD_HOST", "the address the dashboard listens on"),
    )
    dashboard_port: int = Field(
        default=8090,
        ge=0,
        le=65_535,
        **_var("FAIRQUEUE_DASHBOARD_PORT", "the port the dashboard listens on"),
    )
    tenant_claim: str = Field(
        default="tenant_id",
        min_length=1,
        **_var("FAIRQUEUE_TENANT_CLAIM", "the token claim naming the tenant"),
    )
    lane_claim: str = Field(
        default="sub",
        min_length=1,
        **_var("FAIRQUEUE_LANE_CLAIM", "the token claim naming the lane"),
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The process's environment, or only what from_mapping was given; never a .env file.
        return (init_settings,) if _given_only.get() else (init_settings, env_settings)

    @property
    def production(self) -> bool:
        return self.env == "production"

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Each field's environment variable, by field name."""
        return {name: str(info.validation_alias) for name, info in cls.model_fields.items()}

    @classmethod
    def from_mapping(cls, env: Mapping[str, str]) -> Settings:
        """The settings that ``env`` (a mapping like ``os.environ``) gives, and nothing else:
        the process's environment is not read. Empty values count as unset."""
        given = {var: env[var] for var in cls.variables().values() if env.get(var)}
        with _only_given(), _configuration_errors():
            return cls.model_validate(given)

    @classmethod
    def from_environment(cls) -> Settings:
        """The settings the process's environment gives now, read afresh."""
        with _configuration_errors():
            return cls()


@contextmanager
def _only_given() -> Iterator[None]:
    token = _given_only.set(True)
    try:
        yield
    finally:
        _given_only.reset(token)


@contextmanager
def _configuration_errors() -> Iterator[None]:
    try:
        yield
    except ValidationError as exc:
        raise ConfigurationError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    return "; ".join(_problem(error) for error in exc.errors())


# Variables whose values an error message must not repeat.
_SECRET: Final = frozenset({"DATABASE_URL", "FAIRQUEUE_UPSTREAM_TOKEN", "FAIRQUEUE_API_SECRET"})


class _Hidden:
    def __repr__(self) -> str:
        return "(a value not shown)"


def _problem(error: ErrorDetails) -> str:
    """One bad value as a phrase that names its variable."""
    variable = str(error["loc"][0]) if error["loc"] else "the environment"
    value = _Hidden() if variable in _SECRET else error.get("input")
    kind = error["type"]
    context = error.get("ctx") or {}
    unit = " of seconds" if variable.endswith("_S") else ""
    if kind == "literal_error":
        allowed = str(context.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"{variable}={value!r} is not one of: {allowed}"
    if kind == "string_pattern_mismatch" and variable in (
        "FAIRQUEUE_STAGES",
        "FAIRQUEUE_SCHEDULES",
    ):
        return f"{variable} must look like module:attribute, got {shown_value(value)}"
    if kind in ("float_parsing", "float_type", "finite_number"):
        return f"{variable} must be a number{unit}, got {shown_value(value)}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{variable} must be a whole number{unit}, got {shown_value(value)}"
    bounds = {
        "greater_than": ("over", "gt"),
        "greater_than_equal": ("at least", "ge"),
        "less_than": ("under", "lt"),
        "less_than_equal": ("at most", "le"),
    }
    if kind in bounds:
        phrase, key = bounds[kind]
        bound = context.get(key)
        # A whole bound in full (316224000, not 3.16224e+08).
        shown = bound
        if isinstance(bound, float):
            shown = int(bound) if bound.is_integer() else f"{bound:g}"
        return f"{variable} must be {phrase} {shown}, got {shown_value(value)}"
    return f"{variable}: {error['msg']}, got {shown_value(value)}"


_lock = threading.Lock()
_cached: tuple[tuple[str | None, ...], Settings] | None = None


# Every variable's name, listed once: the fields do not change while the process runs.
_NAMES: Final = tuple(Settings.variables().values())


def settings() -> Settings:
    """The settings the process's environment gives now (see the module's docstring)."""
    global _cached
    environ = os.environ
    key = tuple(environ.get(name) for name in _NAMES)
    with _lock:
        if _cached is not None and _cached[0] == key:
            return _cached[1]
    current = Settings.from_environment()
    with _lock:
        _cached = (key, current)
    return current


def settings_of(env: Mapping[str, str] | None) -> Settings:
    """The settings ``env`` gives, or with None the process's environment (:func:`settings`)."""
    return settings() if env is None else Settings.from_mapping(env)

"""Stages (job types with a handler), the Job a handler receives and the Result an
``after_result`` hook receives."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel

from .db import Connection
from .errors import ConfigurationError
from .inputs import MAX_ATTEMPTS, MAX_BATCH, MAX_LEASE_S
from .upstream import Upstream


class Defer(Exception):
    """Raised by a handler to give its job back until ``until``, without burning an attempt."""

    def __init__(self, until: datetime | timedelta, reason: str = "") -> None:
        if isinstance(until, datetime) and until.tzinfo is None:
            raise ConfigurationError("Defer(until=...) needs a timezone-aware datetime")
        super().__init__(reason or f"deferred until {until}")
        self.until = until
        self.reason = reason


@dataclass(frozen=True)
class Job:
    """What a handler sees of a claimed job."""

    id: UUID
    type: str
    payload: dict[str, Any]
    tenant_id: str | None
    group_id: str | None
    attempts: int
    max_attempts: int
    # Opens (on first use) the job's tenant transaction on the handler's connection.
    _open_conn: Callable[[], Connection] | None = field(default=None, repr=False, compare=False)
    _spend: Callable[[str, int], None] | None = field(default=None, repr=False, compare=False)
    _follow_up: Callable[..., None] | None = field(default=None, repr=False, compare=False)

    @property
    def conn(self) -> Connection | None:
        """A connection inside this job's tenant transaction: application data read or written
        through it is under the same clamp, and commits only if the handler returns. The
        transaction begins when a handler first asks for it, so a handler that never does
        costs no round trip."""
        return None if self._open_conn is None else self._open_conn()

    def spend(self, quota: str, units: int = 1) -> None:
        """Spend units of a shared quota, or raise Defer until it resets."""
        if self._spend is None:
            raise RuntimeError("this job was not handed out by a pipeline; it cannot spend quota")
        self._spend(quota, units)

    def enqueue(self, job_type: str, payload: dict[str, Any], **options: Any) -> None:
        """Enqueue a follow-up job, inserted in the same transaction that marks this job done.

        It is checked now (type, payload, size) and dropped if this job does not finish. The
        tenant and group default to this job's. Options are those of ``fairqueue.enqueue``.
        """
        if self._follow_up is None:
            raise RuntimeError("this job was not handed out by a pipeline; it cannot enqueue")
        options.setdefault("tenant_id", self.tenant_id)
        options.setdefault("group_id", self.group_id)
        self._follow_up(job_type, payload, **options)


Writer = Literal["client", "worker"]


@dataclass(frozen=True)
class Result:
    job_id: UUID  # the original job: its re-checks write to the same row
    tenant_id: str | None
    type: str
    body: dict[str, Any]
    saved_by: Writer | None  # None: a row written before saved_by existed, counted as a client's
    saved_at: datetime
    source_job_id: UUID  # the job whose output the body was rendered from

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Result:
        return cls(
            job_id=row["job_id"],
            tenant_id=row["tenant_id"],
            type=row["type"],
            body=row["body"],
            saved_by=row["saved_by"],
            saved_at=row["saved_at"],
            source_job_id=row["source_job_id"],
        )


# A handler's return value is its job's output (a JSON object, or None for none), stored on the
# job when it is marked done; a stage's render_result turns it into the job's result.
Handler = Callable[[Job], dict[str, Any] | None]
RenderResult = Callable[[dict[str, Any]], dict[str, Any]]
ResultHook = Callable[[Result, Connection], None]
# cron: drained by the scheduled pipeline, fairly, in batches. doorbell: each job rings a
# doorbell when committed and a worker starts it within seconds; the cron pipeline still drains
# what the doorbells miss.
Delivery = Literal["cron", "doorbell"]
GiveUpHook = Callable[[Job, str], None]


@dataclass
class Stage:
    """A job type, its handler and how the pipeline runs it.

    Creating a Stage makes its type known to ``enqueue`` in this process.
    """

    name: str
    handler: Handler
    batch: int = 10
    concurrency: int = 1
    max_attempts: int = 3
    payload_model: type[BaseModel] | None = None
    lease_s: float = 330.0
    backoff_unit_s: float = 60.0
    job_timeout_s: float | None = None
    quota: str | None = None
    on_give_up: GiveUpHook | None = None
    delivery: Delivery = "cron"
    # Admitted stages (fairqueue.lanes.admit): what one job costs in credits, and the upstream
    # service whose held work the job starts once it holds its lane.
    credit_cost: int = 0
    upstream: Upstream | None = None
    # Whether the HTTP API may admit this type for a client; internal stages stay internal.
    clients_may_admit: bool = False
    # Releasing held work retries with capped, jittered exponential backoff for this long
    # after the first failed try; past it the job fails and its credits are refunded.
    release_window_s: float = 1800.0
    release_backoff_s: float = 5.0
    release_backoff_cap_s: float = 300.0
    # Results (fairqueue.results): how the job's output becomes its result when the backstop
    # sweep has to write it, and a hook that follows every recorded result, once.
    render_result: RenderResult | None = None
    after_result: ResultHook | None = None

    def __post_init__(self) -> None:
        problems = []
        if not self.name or not self.name.strip():
            problems.append("name must be a non-empty string")
        if not 1 <= self.batch <= MAX_BATCH:
            problems.append(f"batch must be from 1 to {MAX_BATCH}, got {self.batch}")
        if self.concurrency < 1:
            problems.append(f"concurrency must be at least 1, got {self.concurrency}")
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            problems.append(
                f"max_attempts must be from 1 to {MAX_ATTEMPTS}, got {self.max_attempts}"
            )
        if self.backoff_unit_s <= 0:
            problems.append(f"backoff_unit_s must be positive, got {self.backoff_unit_s}")
        if not 0 < self.lease_s <= MAX_LEASE_S:
            problems.append(
                f"lease_s must be over 0 and at most {MAX_LEASE_S:g}, got {self.lease_s}"
            )
        if self.job_timeout_s is not None and self.job_timeout_s <= 0:
            problems.append(f"job_timeout_s must be positive, got {self.job_timeout_s}")
        if self.delivery not in ("cron", "doorbell"):
            problems.append(f"delivery must be 'cron' or 'doorbell', got {self.delivery!r}")
        if isinstance(self.credit_cost, bool) or not isinstance(self.credit_cost, int):
            problems.append(f"credit_cost must be a whole number, got {self.credit_cost!r}")
        elif self.credit_cost < 0:
            problems.append(f"credit_cost must be >= 0, got {self.credit_cost}")
        for label in ("release_window_s", "release_backoff_s", "release_backoff_cap_s"):
            if getattr(self, label) <= 0:
                problems.append(f"{label} must be positive, got {getattr(self, label)}")
        if not callable(self.handler):
            problems.append("handler must be callable")
        for label in ("render_result", "after_result"):
            if getattr(self, label) is not None and not callable(getattr(self, label)):
                problems.append(f"{label} must be callable or None")
        if problems:
            raise ConfigurationError(f"Stage {self.name!r}: " + "; ".join(problems))
        register(self)

    def batch_seconds(self, jobs: int | None = None) -> float | None:
        """Longest ``jobs`` jobs (a full batch by default) can take, when the stage bounds its
        jobs' time."""
        if self.job_timeout_s is None:
            return None
        rounds = -(-(self.batch if jobs is None else jobs) // self.concurrency)
        return rounds * self.job_timeout_s


_registry: dict[str, Stage] = {}
_registry_lock = threading.Lock()


def register(stage: Stage) -> None:
    with _registry_lock:
        _registry[stage.name] = stage


def known_stage(job_type: str) -> Stage | None:
    with _registry_lock:
        return _registry.get(job_type)


def known_types() -> Mapping[str, Stage]:
    with _registry_lock:
        return dict(_registry)

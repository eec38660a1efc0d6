"""Stages (job types with a handler), the Job a handler receives and the Result an
``after_result`` hook receives."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal
from uuid import UUID

from annotated_types import Ge, Gt, Interval
from pydantic import BaseModel, SkipValidation, StringConstraints

from .db import Connection
from .errors import ConfigurationError
from .inputs import MAX_ATTEMPTS, MAX_BATCH, MAX_LEASE_S, MAX_QUANTUM
from .options import check_options
from .plans import Order
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
        through it is under the same clamp, and commits in the same transaction that marks the
        job done (with its follow-ups), only if the handler returns while the run still holds
        the job; otherwise it rolls back, so these writes land once however often the job runs.
        The transaction begins when a handler first asks for it, so a handler that never does
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
# The level the fair order is kept at. group: the group served least goes first, so a tenant
# with more groups takes more turns. tenant: the tenant served least goes first, then its group
# served least; a tenant's share does not grow with its groups.
FairShare = Literal["group", "tenant"]
# What service is counted in. jobs: every job counts one. cost: a job counts its cost (enqueue's
# cost=), or the quota units it spent when it spent any (docs/guide/fairness.md).
FairBy = Literal["jobs", "cost"]
GiveUpHook = Callable[[Job, str], None]


@dataclass
class Stage:
    """A job type, its handler and how the pipeline runs it.

    Each field's annotation states what it accepts; a Stage that breaks one is refused with a
    ConfigurationError naming the stage and every bad option. Creating a Stage makes its type
    known to ``enqueue`` in this process.
    """

    name: Annotated[str, StringConstraints(pattern=r"\S")]
    handler: Handler
    batch: Annotated[int, Interval(ge=1, le=MAX_BATCH)] = 10
    concurrency: Annotated[int, Ge(1)] = 1
    max_attempts: Annotated[int, Interval(ge=1, le=MAX_ATTEMPTS)] = 3
    payload_model: type[BaseModel] | None = None
    lease_s: Annotated[float, Interval(gt=0, le=MAX_LEASE_S)] = 330.0
    backoff_unit_s: Annotated[float, Gt(0)] = 60.0
    job_timeout_s: Annotated[float, Gt(0)] | None = None
    quota: str | None = None
    on_give_up: GiveUpHook | None = None
    delivery: Delivery = "cron"
    fair_share: FairShare = "group"
    # How many jobs in a row the group at the top of the order gives before the order is taken
    # again (docs/guide/fairness.md): 1 keeps the exact order, one job a turn; more lets a
    # batch over many groups write fewer standings. At the tenant level, the tenant at the top
    # gives that many picks in a row, one job a turn among its groups.
    quantum: Annotated[int, Interval(ge=1, le=MAX_QUANTUM)] = 1
    # How plans weigh in the order (docs/guide/fairness.md): "priority", a higher plan's groups
    # first; "shares", every plan served in proportion to its weight, a plan's groups taking a
    # quantum of quantum x weight (at the tenant level, a plan's tenants).
    order: Order = "priority"
    # What the order counts as service (docs/guide/fairness.md): "jobs", one a job; "cost",
    # each job its cost, settled to the quota units it spent. At either level.
    fair_by: FairBy = "jobs"
    # Admitted stages (fairqueue.lanes.admit): what one job costs in credits, and the upstream
    # service whose held work the job starts once it holds its lane (a protocol: unchecked).
    credit_cost: Annotated[int, Ge(0)] = 0
    upstream: Annotated[Upstream | None, SkipValidation] = None
    # Whether the HTTP API may admit this type for a client; internal stages stay internal.
    clients_may_admit: bool = False
    # Releasing held work retries with capped, jittered exponential backoff for this long
    # after the first failed try; past it the job fails and its credits are refunded.
    release_window_s: Annotated[float, Gt(0)] = 1800.0
    release_backoff_s: Annotated[float, Gt(0)] = 5.0
    release_backoff_cap_s: Annotated[float, Gt(0)] = 300.0
    # Results (fairqueue.results): how the job's output becomes its result when the backstop
    # sweep has to write it, and a hook that follows every recorded result, once.
    render_result: RenderResult | None = None
    after_result: ResultHook | None = None

    def __post_init__(self) -> None:
        # Every option is checked against its annotation above (fairqueue.options).
        check_options(self, f"Stage {self.name!r}")
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

"""fairqueue: a fair job pipeline whose queue is one Postgres table."""

from .bulk import Enqueued, NewJob, enqueue_many
from .db import connect
from .errors import (
    ArgumentOutOfBounds,
    ConfigurationError,
    DatabaseUnavailable,
    DuplicateJob,
    FairqueueError,
    InsufficientCredit,
    InvalidDoorbell,
    InvalidPayload,
    JobNotCancellable,
    JobNotFinished,
    JobNotRetryable,
    PayloadTooLarge,
    SchemaNotMigrated,
    TenantMismatch,
    UnknownGroup,
    UnknownJob,
    UnknownJobType,
    UnknownPlan,
    UnknownQuota,
    UpstreamRejected,
    UpstreamUnavailable,
)
from .jobs import enqueue
from .migrate import migrate
from .pipeline import run_pipeline
from .pipeline.run import RunResult
from .plans import PLANS, Plan, Plans
from .quotas import define_quota
from .stage import Defer, Job, Stage

__all__ = [
    "PLANS",
    "ArgumentOutOfBounds",
    "ConfigurationError",
    "DatabaseUnavailable",
    "Defer",
    "DuplicateJob",
    "Enqueued",
    "FairqueueError",
    "InsufficientCredit",
    "InvalidDoorbell",
    "InvalidPayload",
    "Job",
    "JobNotCancellable",
    "JobNotFinished",
    "JobNotRetryable",
    "NewJob",
    "PayloadTooLarge",
    "Plan",
    "Plans",
    "RunResult",
    "SchemaNotMigrated",
    "Stage",
    "TenantMismatch",
    "UnknownGroup",
    "UnknownJob",
    "UnknownJobType",
    "UnknownPlan",
    "UnknownQuota",
    "UpstreamRejected",
    "UpstreamUnavailable",
    "connect",
    "define_quota",
    "enqueue",
    "enqueue_many",
    "migrate",
    "run_pipeline",
]

"""fairqueue: a fair job pipeline whose queue is one Postgres table."""

from .bulk import Enqueued, NewJob, enqueue_many
from .db import connect
from .errors import (
    ArgumentOutOfBounds,
    ConfigurationError,
    DatabaseUnavailable,
    DuplicateJob,
    DuplicateSchedule,
    FairqueueError,
    InsufficientCredit,
    InvalidDoorbell,
    InvalidPayload,
    InvalidSchedule,
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
    UnknownSchedule,
    UpstreamRejected,
    UpstreamUnavailable,
)
from .jobs import enqueue
from .migrate import migrate
from .pipeline import run_pipeline
from .pipeline.run import RunResult
from .plans import PLANS, Plan, Plans
from .quotas import define_quota
from .schedule import Schedule
from .schedules import (
    add_schedule,
    get_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
)
from .stage import Defer, Job, Stage

__all__ = [
    "PLANS",
    "ArgumentOutOfBounds",
    "ConfigurationError",
    "DatabaseUnavailable",
    "Defer",
    "DuplicateJob",
    "DuplicateSchedule",
    "Enqueued",
    "FairqueueError",
    "InsufficientCredit",
    "InvalidDoorbell",
    "InvalidPayload",
    "InvalidSchedule",
    "Job",
    "JobNotCancellable",
    "JobNotFinished",
    "JobNotRetryable",
    "NewJob",
    "PayloadTooLarge",
    "Plan",
    "Plans",
    "RunResult",
    "Schedule",
    "SchemaNotMigrated",
    "Stage",
    "TenantMismatch",
    "UnknownGroup",
    "UnknownJob",
    "UnknownJobType",
    "UnknownPlan",
    "UnknownQuota",
    "UnknownSchedule",
    "UpstreamRejected",
    "UpstreamUnavailable",
    "add_schedule",
    "connect",
    "define_quota",
    "enqueue",
    "enqueue_many",
    "get_schedule",
    "list_schedules",
    "migrate",
    "pause_schedule",
    "remove_schedule",
    "resume_schedule",
    "run_pipeline",
]

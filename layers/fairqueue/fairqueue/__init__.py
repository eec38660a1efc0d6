"""fairqueue: a fair job pipeline whose queue is one Postgres table."""

from .db import connect
from .errors import (
    ConfigurationError,
    DatabaseUnavailable,
    FairqueueError,
    InvalidPayload,
    PayloadTooLarge,
    UnknownJobType,
    UnknownPlan,
    UnknownQuota,
)
from .jobs import enqueue
from .migrate import migrate
from .pipeline import RunResult, run_pipeline
from .plans import PLANS, Plan, Plans
from .quotas import define_quota
from .stage import Defer, Job, Stage

__all__ = [
    "PLANS",
    "ConfigurationError",
    "DatabaseUnavailable",
    "Defer",
    "FairqueueError",
    "InvalidPayload",
    "Job",
    "PayloadTooLarge",
    "Plan",
    "Plans",
    "RunResult",
    "Stage",
    "UnknownJobType",
    "UnknownPlan",
    "UnknownQuota",
    "connect",
    "define_quota",
    "enqueue",
    "migrate",
    "run_pipeline",
]

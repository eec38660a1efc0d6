"""Errors a caller can act on. Each message names what was wrong."""

import traceback


class FairqueueError(Exception):
    """Base class of every error fairqueue raises on purpose."""


class ConfigurationError(FairqueueError):
    """A setting is missing or malformed."""


class DatabaseUnavailable(FairqueueError):
    """No database URL was given, or the database could not be reached."""


class SchemaNotMigrated(FairqueueError):
    """The database has no fairqueue schema, or one older than this package's migrations."""


class ConnectionLost(DatabaseUnavailable):
    """A run's own connection was lost mid-run: it reconnected, recorded the outcomes of the
    handlers that had finished, and stopped."""


class UnknownJobType(FairqueueError):
    """A job type that no Stage declares in this process."""


class InvalidPayload(FairqueueError):
    """A payload that fails its stage's model, or is not JSON."""


class PayloadTooLarge(FairqueueError):
    """A payload over the size limit."""


class UnknownPlan(FairqueueError):
    """A plan name that PLANS does not define."""


class UnknownQuota(FairqueueError):
    """A quota name with no row in the quotas table."""


class UnknownGroup(FairqueueError):
    """A group id that no job of the tenant has ever had, given where only a known one will do."""


class DuplicateJob(FairqueueError):
    """An open job of the tenant already has the dedupe key."""


class UnknownJob(FairqueueError):
    """A job id that does not exist, or belongs to another tenant or lane."""


class UpstreamRejected(FairqueueError):
    """The upstream service refused the work as invalid: an error of the caller's input."""


class UpstreamUnavailable(FairqueueError):
    """The upstream service could not be reached or failed; the same call may work later."""


class InvalidDoorbell(FairqueueError):
    """A message body that is not a doorbell; the message says what was wrong."""


class InsufficientCredit(FairqueueError):
    """The tenant's balance cannot pay for the job."""


class JobNotFinished(FairqueueError):
    """A result was saved for a job that is not done."""


class JobNotCancellable(FairqueueError):
    """Only a queued or pending job can be cancelled; this one is running or finished."""


class JobNotRetryable(FairqueueError):
    """Only a failed job can be retried, and not one whose credits or held work went back."""


class ArgumentOutOfBounds(FairqueueError):
    """A door of the database refused an argument past its bounds (docs/tenancy.md); the
    message names the door, the argument and the bounds."""


class InvalidSchedule(FairqueueError):
    """A schedule's rule that cannot be kept: a cron expression that does not parse, an
    unknown timezone, an ``every`` under a minute, an unknown catch_up."""


class UnknownSchedule(FairqueueError):
    """A schedule name the tenant has none of."""


class DuplicateSchedule(FairqueueError):
    """The tenant already has a schedule of that name."""


class TenantMismatch(FairqueueError):
    """A transaction clamped to one tenant was asked to work for another."""


def describe(error: BaseException) -> str:
    """An exception as the one line a job or a run row keeps of it."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return text[:4000]

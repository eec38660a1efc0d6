"""Stage lists named by FAIRQUEUE_STAGES / --stages in test_cron_function.py and test_cli.py.

Importable as ``cron_stages`` because pytest puts tests/ on the path. Each handler records what
it saw in ``SEEN`` so a test can tell which jobs ran, and with which attempt.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from uuid import UUID

from fairqueue import Defer, Job, Stage

SEEN: list[tuple[str, UUID, int]] = []
_lock = threading.Lock()

QUOTA = "cronfn_units"


def reset() -> None:
    with _lock:
        SEEN.clear()


def seen(job_type: str | None = None) -> list[tuple[str, UUID, int]]:
    with _lock:
        return [s for s in SEEN if job_type is None or s[0] == job_type]


def _record(job: Job) -> None:
    with _lock:
        SEEN.append((job.type, job.id, job.attempts))


def echo(job: Job) -> None:
    _record(job)


def spend_two(job: Job) -> None:
    _record(job)
    job.spend(QUOTA, 2)


def broken(job: Job) -> None:
    _record(job)
    raise RuntimeError(f"job {job.id} cannot be done")


def later(job: Job) -> None:
    _record(job)
    raise Defer(timedelta(hours=1), reason="not yet")


ECHO = Stage("cronfn_echo", handler=echo, batch=5)
SPEND = Stage("cronfn_spend", handler=spend_two, batch=5, quota=QUOTA)
BROKEN = Stage("cronfn_broken", handler=broken, max_attempts=1)
LATER = Stage("cronfn_later", handler=later)
# A stage whose jobs may take 5 s each: a run with less than 5 s left must not start it.
SLOW = Stage("cronfn_slow", handler=echo, batch=1, job_timeout_s=5)

# One of every outcome: done, done with quota units, failed, deferred.
STAGES = [ECHO, SPEND, BROKEN, LATER]
SLOW_STAGES = [SLOW]
# The slow stage first (with no work of its own), then a stage whose batch fits any budget.
SLOW_FIRST_STAGES = [SLOW, ECHO]

CLI_ECHO = Stage("cli_echo", handler=echo)
CLI_STAGES = [CLI_ECHO]

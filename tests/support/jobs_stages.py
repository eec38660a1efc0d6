"""Stage lists named by --stages in tests/operating/test_cli_jobs.py."""

from __future__ import annotations

from typing import Any

from fairqueue import Job, Stage

QUOTA = "jobs_cli_units"


def echo(job: Job) -> dict[str, Any]:
    return {"echo": job.payload}


def spend(job: Job) -> None:
    job.spend(QUOTA)


def fail(job: Job) -> None:
    raise ValueError("the upstream said no")


LOOKED_AT = Stage("looked_at", handler=echo, render_result=dict)
RATIONED = Stage("rationed", handler=spend, quota=QUOTA)
DOOMED = Stage("doomed", handler=fail, max_attempts=1)
SERIAL = Stage("serial_look", handler=echo)
TENANT_FAIR = Stage("tenant_fair_look", handler=echo, fair_share="tenant")
TENANT_QUANTA = Stage("tenant_quanta_look", handler=echo, fair_share="tenant", quantum=4)
PAID = Stage("paid_look", handler=echo, credit_cost=2)
JOBS_STAGES = [LOOKED_AT, RATIONED, DOOMED, SERIAL, TENANT_FAIR, TENANT_QUANTA, PAID]

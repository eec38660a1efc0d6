"""The dashboard's pages and actions: each reads through the CLI's own functions and doors (and
the dashboard's, fairqueue.dashboard.reads) and names the template that shows it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final
from uuid import UUID

from ..cancelling import cancel_job
from ..db import Connection
from ..errors import InvalidPayload
from ..groups import pause_group, resume_group
from ..job_info import STATUSES, JobInfo, find_jobs, get_job
from ..overview import split_group_key
from ..quotas import list_quotas
from ..retrying import retry_job
from ..runs import get_run, recent_runs
from ..schedules.stored import database_now, find_schedules
from ..stage import Stage
from ..waiting import why_waiting
from . import charts, reads
from .request import Request

# What an action's redirect says on the page it lands on.
NOTES: Final = {
    "retried": "The job was made ready to run again.",
    "cancelled": "The job was cancelled.",
    "paused": "The group was paused: its jobs stay pending.",
    "resumed": "The group was resumed.",
}


@dataclass(frozen=True)
class Context:
    """What a page handler gets: an autocommit application-role connection, the request and
    the stages by type (None when the server was given none)."""

    conn: Connection
    request: Request
    stages: dict[str, Stage] | None


@dataclass(frozen=True)
class Page:
    """A page to render: its template and values."""

    template: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Redirect:
    """An action done: where the browser goes next (a path under the dashboard)."""

    path: str


Handler = Callable[..., Page | Redirect]


@dataclass(frozen=True)
class Route:
    """A handler and the arguments the path gave it."""

    handler: Handler
    args: tuple[Any, ...]


def _page(template: str, ctx: Context, **values: Any) -> Page:
    note = NOTES.get(ctx.request.query.get("done", ""))
    return Page(template, {"note": note, **values})


def show_overview(ctx: Context) -> Page:
    """Backlog by type and plan, the day's runs by stop reason and the throughput per hour."""
    now = database_now(ctx.conn)
    hours = reads.run_hours(ctx.conn)
    return _page(
        "overview.html",
        ctx,
        now=now,
        types=reads.backlog(ctx.conn),
        runs=recent_runs(ctx.conn, 10),
        plans=reads.service(ctx.conn, 1).plans,
        runs_chart=charts.runs_by_hour(hours, now),
        throughput_chart=charts.throughput(hours, now),
    )


def show_fairness(ctx: Context) -> Page:
    """Service per tenant and group, Jain's index, the longest waiting groups, plan shares."""
    served = reads.service(ctx.conn)
    most_served = reads.most_served(ctx.conn, charts.CHARTED)
    return _page(
        "fairness.html",
        ctx,
        fairness=served.fairness,
        tenants=served.tenants,
        waiting=reads.longest_waiting(ctx.conn, 20),
        plans=served.plans,
        tenants_chart=charts.tenant_service(served.tenants),
        groups_chart=charts.group_service(most_served),
        plans_chart=charts.plan_shares(served.plans),
    )


def show_jobs(ctx: Context) -> Page:
    """The newest jobs; a POST filters them by tenant, type, status and group."""
    filters = {name: ctx.request.form.get(name, "").strip() for name in FILTERS}
    status = filters["status"] or None
    if status is not None and status not in STATUSES:
        raise InvalidPayload(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
    jobs = find_jobs(
        ctx.conn,
        status=status,
        job_type=filters["type"] or None,
        tenant_id=filters["tenant"] or None,
        group_id=filters["group"] or None,
        limit=reads.SHOWN,
    )
    return _page("jobs.html", ctx, jobs=jobs, filters=filters, statuses=STATUSES)


FILTERS: Final = ("tenant", "type", "status", "group")


def show_failed(ctx: Context) -> Page:
    """The failed jobs, newest first, each with a retry."""
    jobs = find_jobs(ctx.conn, status="failed", limit=reads.SHOWN)
    return _page("failed.html", ctx, jobs=jobs)


def show_job(ctx: Context, job_id: UUID) -> Page:
    """One job: its attempts, last error, why it waits, its output and its run."""
    job = get_job(ctx.conn, job_id)
    stage = None if ctx.stages is None else ctx.stages.get(job.type)
    waiting = why_waiting(ctx.conn, job, stage) if ctx.stages is not None else None
    run = get_run(ctx.conn, job.run_id) if job.run_id is not None else None
    return _page(
        "job.html",
        ctx,
        job=job,
        waiting=waiting,
        run=run,
        stages_known=ctx.stages is not None,
        cancellable=job.status in ("queued", "pending"),
        retryable=_retryable(job),
    )


def _retryable(job: JobInfo) -> bool:
    return job.status == "failed" and not job.credit_cost and job.upstream_id is None


def retry(ctx: Context, job_id: UUID) -> Redirect:
    """Run a failed job again; the note on the job says it was retried by hand."""
    job = get_job(ctx.conn, job_id)
    retry_job(ctx.conn, job.id, tenant_id=job.tenant_id)
    return Redirect(f"/jobs/{job.id}?done=retried")


def cancel(ctx: Context, job_id: UUID) -> Redirect:
    """Cancel a job that has not started; the job's last error says it was cancelled."""
    job = get_job(ctx.conn, job_id)
    cancel_job(ctx.conn, job.id, tenant_id=job.tenant_id)
    return Redirect(f"/jobs/{job.id}?done=cancelled")


def show_groups(ctx: Context) -> Page:
    """Groups across tenants, paused ones first, each with a pause or a resume."""
    return _page("groups.html", ctx, groups=reads.group_rows(ctx.conn))


def pause(ctx: Context) -> Redirect:
    """Pause the group the form names by its key."""
    tenant_id, group_id = _group_of(ctx)
    pause_group(ctx.conn, group_id, tenant_id=tenant_id, create=False)
    return Redirect("/groups?done=paused")


def resume(ctx: Context) -> Redirect:
    """Resume the group the form names by its key."""
    tenant_id, group_id = _group_of(ctx)
    resume_group(ctx.conn, group_id, tenant_id=tenant_id, create=False)
    return Redirect("/groups?done=resumed")


def _group_of(ctx: Context) -> tuple[str | None, str]:
    key = ctx.request.form.get("group_key", "")
    tenant_id, group_id = split_group_key(key)
    if not key or group_id is None:
        raise InvalidPayload("a group to pause or resume is named by its key, tenant/group")
    return tenant_id, group_id


def show_quotas(ctx: Context) -> Page:
    """Every quota as it is now, and every tenant's credits."""
    return _page(
        "quotas.html", ctx, quotas=list_quotas(ctx.conn), balances=reads.balances(ctx.conn)
    )


def show_runs(ctx: Context) -> Page:
    """The newest runs with their summaries."""
    return _page("runs.html", ctx, runs=recent_runs(ctx.conn, reads.SHOWN))


def show_schedules(ctx: Context) -> Page:
    """Every tenant's schedules, by tenant and name."""
    return _page("schedules.html", ctx, schedules=find_schedules(ctx.conn, limit=reads.SHOWN))


_PAGES: Final[dict[tuple[str, str], Handler]] = {
    ("GET", "/"): show_overview,
    ("GET", "/fairness"): show_fairness,
    ("GET", "/jobs"): show_jobs,
    ("POST", "/jobs"): show_jobs,
    ("GET", "/failed"): show_failed,
    ("GET", "/groups"): show_groups,
    ("POST", "/groups/pause"): pause,
    ("POST", "/groups/resume"): resume,
    ("GET", "/quotas"): show_quotas,
    ("GET", "/runs"): show_runs,
    ("GET", "/schedules"): show_schedules,
}
_JOB_PATH = re.compile(r"/jobs/([0-9a-fA-F-]{36})(?:/(retry|cancel))?")
_JOB_PAGES: Final[dict[tuple[str, str | None], Handler]] = {
    ("GET", None): show_job,
    ("POST", "retry"): retry,
    ("POST", "cancel"): cancel,
}


def route_of(method: str, path: str) -> Route | None:
    """The handler of a method and path, with the job id a job's path names; None: no page."""
    handler = _PAGES.get((method, path))
    if handler is not None:
        return Route(handler, ())
    found = _JOB_PATH.fullmatch(path)
    if found is None:
        return None
    try:
        job_id = UUID(found[1])
    except ValueError:
        return None
    handler = _JOB_PAGES.get((method, found[2]))
    return None if handler is None else Route(handler, (job_id,))

"""``fairqueue jobs``: find jobs across tenants and look at one, with why it has not run."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from ..cancelling import cancel_job
from ..db import Connection
from ..errors import FairqueueError, InvalidPayload
from ..job_info import MAX_LISTED, STATUSES, JobInfo, find_jobs, get_job
from ..results import read_result
from ..retrying import retry_job
from ..roles import function
from ..schedules import schedule_of_job
from ..settings import settings
from ..stage import Stage
from ..waiting import Waiting, why_waiting
from .common import app_connection, count_argument, text_table, visible

SHOWN_CHARS = 400


def add_commands(
    command: Callable[[str, str], argparse.ArgumentParser],
    database: argparse.ArgumentParser,
) -> None:
    jobs = command("jobs", "find jobs and look at one")
    verbs = jobs.add_subparsers(dest="jobs_command", required=True)

    p = verbs.add_parser(
        "show",
        parents=[database],
        help="everything about one job and, if it has not run, why",
        description="everything about one job and, if it has not run, why",
    )
    p.add_argument("id", type=job_id_argument, nargs="+", help="the job's id (a UUID)")
    p.add_argument(
        "--stages",
        help="module:attribute of the stage list (default FAIRQUEUE_STAGES; with neither, it does"
        " not say which stage applies)",
    )
    p.set_defaults(func=cmd_show)

    p = verbs.add_parser(
        "cancel",
        parents=[database],
        help="cancel queued or pending jobs (credits refunded, lanes move on)",
        description="cancel queued or pending jobs: each becomes cancelled, its lane starts its"
        " next job and its credits are refunded; running and finished jobs are refused",
    )
    p.add_argument("id", type=job_id_argument, nargs="+", help="the job's id (a UUID)")
    p.set_defaults(func=cmd_cancel)

    p = verbs.add_parser(
        "retry",
        parents=[database],
        help="run failed jobs again with fresh attempts",
        description="run failed jobs again with fresh attempts, noted on each row: the ones given"
        " by id, or with --failed every failed job that --type, --tenant and --group match (up to"
        " --limit)",
    )
    p.add_argument("id", type=job_id_argument, nargs="*", help="the job's id (a UUID)")
    p.add_argument("--failed", action="store_true", help="every failed job that matches")
    _filters(p)
    p.add_argument("--limit", type=count_argument, default=100, help=_limit_help(100))
    p.set_defaults(func=cmd_retry)

    p = verbs.add_parser(
        "list", parents=[database], help="jobs newest first", description="jobs newest first"
    )
    p.add_argument("--status", choices=STATUSES, help="only jobs of this status")
    _filters(p)
    p.add_argument("--limit", type=count_argument, default=20, help=_limit_help(20))
    p.set_defaults(func=cmd_list)


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", dest="job_type", help="only jobs of this type")
    p.add_argument("--tenant", help="only jobs of this tenant")
    p.add_argument("--group", help="only jobs of this group (of any tenant, unless --tenant)")


def _limit_help(default: int) -> str:
    return f"how many at most, from 1 to {MAX_LISTED:,} (default {default})"


def job_id_argument(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (a UUID)") from None


def cmd_list(args: argparse.Namespace) -> int:
    with app_connection(args, autocommit=True) as conn:
        jobs = find_jobs(
            conn,
            status=args.status,
            job_type=args.job_type,
            tenant_id=args.tenant,
            group_id=args.group,
            limit=args.limit,
        )
    header = ("id", "type", "status", "tenant", "group", "attempts", "created", "last error")
    rows = [
        (
            str(j.id),
            visible(j.type),
            j.status,
            None if j.tenant_id is None else visible(j.tenant_id),
            None if j.group_id is None else visible(j.group_id),
            f"{j.attempts}/{j.max_attempts}",
            _time(j.created_at),
            None if j.last_error is None else _short(_last_line(j.last_error), 60),
        )
        for j in jobs
    ]
    print(text_table(header, rows))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    stages = _stages(args.stages)
    with app_connection(args, autocommit=True) as conn:
        for index, job_id in enumerate(args.id):
            if index:
                print()
            job = get_job(conn, job_id)
            stage = None if stages is None else stages.get(job.type)
            _print_job(conn, job)
            _print_waiting(why_waiting(conn, job, stage) if stages is not None else None, job)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    def cancel(conn: Connection, job: JobInfo) -> str:
        done = cancel_job(conn, job.id, tenant_id=job.tenant_id)
        extra = [f"{done.refunded} credit(s) refunded"] if done.refunded else []
        if done.promoted is not None:
            extra.append(f"job {done.promoted} now holds lane {job.lane!r}")
        return f"cancelled {job.id}" + "".join(f"; {e}" for e in extra)

    with app_connection(args, autocommit=True) as conn:
        return _each_job(conn, args.id, cancel)


def cmd_retry(args: argparse.Namespace) -> int:
    if bool(args.id) == bool(args.failed):
        raise InvalidPayload(
            "give the ids of the jobs to retry, or --failed (narrowed by --type, --tenant and"
            " --group), not both"
        )

    def retry(conn: Connection, job: JobInfo) -> str:
        return f"retried {job.id}: {retry_job(conn, job.id, tenant_id=job.tenant_id).status}"

    with app_connection(args, autocommit=True) as conn:
        if args.failed:
            failed = find_jobs(
                conn,
                status="failed",
                job_type=args.job_type,
                tenant_id=args.tenant,
                group_id=args.group,
                limit=args.limit,
            )
            if not failed:
                print("no failed job matches")
            return _each_job(conn, failed, retry)
        return _each_job(conn, args.id, retry)


def _each_job(
    conn: Connection,
    jobs: Sequence[UUID | JobInfo],
    act: Callable[[Connection, JobInfo], str],
) -> int:
    """Act on each job in a transaction of its own, so that one refused does not keep the others
    from going through; each refusal is a line on stderr, and any makes the exit code 2."""
    refused = 0
    for job in jobs:
        try:
            print(act(conn, get_job(conn, job) if isinstance(job, UUID) else job))
        except FairqueueError as exc:
            print(f"fairqueue: {visible(str(exc))}", file=sys.stderr)
            refused += 1
    return 2 if refused else 0


def _stages(spec: str | None) -> dict[str, Stage] | None:
    """The stage list by type, or None when none was given (--stages, FAIRQUEUE_STAGES) or it
    cannot be loaded (said on stderr): then the explanation leaves out what only the stages
    know (quotas, which stage handles a type). The example's stages are never assumed: against
    them a job of the caller's own type would read as one nothing claims."""
    if spec is None and "stages" not in settings().model_fields_set:
        return None
    try:
        return {s.name: s for s in function.load_stages(spec)}
    except FairqueueError as exc:
        print(
            f"fairqueue: without the stage list ({visible(str(exc))}), quotas are not checked",
            file=sys.stderr,
        )
        return None


def _print_job(conn: Connection, job: JobInfo) -> None:
    fields: list[tuple[str, Any]] = [
        ("job", job.id),
        ("type", visible(job.type)),
        ("status", job.status),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("tenant", _label(job.tenant_id, "(none)")),
        ("group", _label(job.group_id, "(default)")),
        ("lane", _label(job.lane, None)),
        ("dedupe key", _label(job.dedupe_key, None)),
        ("schedule", _label(schedule_of_job(conn, job.dedupe_key, job.tenant_id), None)),
        ("re-check of", job.delta_of),
        ("credits", job.credit_cost or None),
        ("upstream id", _label(job.upstream_id, None)),
        ("created", _time(job.created_at)),
        ("due", _time(job.run_after)),
        (
            "claimed",
            _time(job.locked_at) + (f" by {visible(job.locked_by)}" if job.locked_by else ""),
        ),
        ("lease until", _time(job.lease_until)),
        ("finished", _time(job.finished_at)),
        ("run", job.run_id),
        ("error", _label(job.last_error, None, keep_newlines=True)),
        ("payload", _short(json.dumps(job.payload), SHOWN_CHARS)),
        ("output", None if job.output is None else _short(json.dumps(job.output), SHOWN_CHARS)),
    ]
    result = read_result(conn, job.id, tenant_id=job.tenant_id)
    if result is not None:
        fields.append(
            (
                "result",
                f"saved by {visible(result.saved_by or 'client')} at {_time(result.saved_at)}: "
                + _short(json.dumps(result.body), SHOWN_CHARS),
            )
        )
    for name, value in fields:
        if value not in (None, ""):
            print(f"{name + ':':<13}{value}")


def _print_waiting(waiting: Waiting | None, job: JobInfo) -> None:
    if job.status not in ("queued", "pending"):
        return
    if waiting is None:
        print(
            "why waiting: cannot tell which stage applies without the stage list"
            " (--stages module:attribute or FAIRQUEUE_STAGES)"
        )
        return
    print("why waiting:")
    for reason in waiting.reasons:
        print(f"  - {visible(reason)}")
    if waiting.standing is None:
        return
    level = waiting.level
    rows = [
        (f"its {level}", w.place + 1, w.plan or "(none)", w.served, _time(w.oldest_created_at))
        for w in [waiting.standing]
    ] + [
        ("ahead", w.place + 1, w.plan or "(none)", w.served, _time(w.oldest_created_at))
        for w in waiting.ahead
    ]
    table = text_table((level, "in line", "plan", "served (day)", "oldest due job"), rows)
    print("\n".join("  " + line for line in table.splitlines()))


def _label(value: str | None, absent: str | None, *, keep_newlines: bool = False) -> str | None:
    return absent if value is None else visible(value, keep_newlines=keep_newlines)


def _last_line(text: str) -> str:
    lines = text.splitlines()
    return visible(lines[-1] if lines else text)


def _time(value: datetime | None) -> str:
    return "" if value is None else f"{value:%Y-%m-%d %H:%M:%S %Z}".rstrip()


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""``fairqueue schedules``: list the schedules, show one, pause, resume or remove one."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime

from ..schedules import (
    ScheduleInfo,
    find_schedules,
    get_schedule,
    pause_schedule,
    remove_schedule,
    resume_schedule,
)
from .common import app_connection, count_argument, text_table, visible

COLUMNS = ("tenant", "name", "type", "rule", "catch_up", "state", "next tick", "last job")
NO_SCHEDULES = "no schedules (add_schedule in Python, or declare them in FAIRQUEUE_SCHEDULES)"


def add_commands(
    command: Callable[[str, str], argparse.ArgumentParser], database: argparse.ArgumentParser
) -> None:
    schedules = command(
        "schedules", "the schedules: list (the default), show, pause, resume, remove"
    )
    schedules.set_defaults(func=cmd_list, tenant=None, limit=1000)
    verbs = schedules.add_subparsers(dest="schedules_command")
    what = "every schedule (or one tenant's): its rule, its next tick (UTC) and its last job"
    p = verbs.add_parser("list", parents=[database], help=what, description=what)
    p.add_argument("--tenant", help="only this tenant's schedules")
    p.add_argument(
        "--limit", type=count_argument, default=1000, help="at most this many (default 1000)"
    )
    p.set_defaults(func=cmd_list)
    for verb, func, text in (
        ("show", cmd_show, "one schedule in full"),
        ("pause", cmd_pause, "pause a schedule: it makes no job until resumed"),
        ("resume", cmd_resume, "resume a schedule at its next tick; what fell due is not made"),
        ("remove", cmd_remove, "remove a schedule; the jobs it made stay"),
    ):
        p = verbs.add_parser(verb, parents=[database], help=text, description=text)
        p.add_argument("name", help="the schedule's name")
        p.add_argument("--tenant", help="the tenant the schedule is of (default: no tenant)")
        p.set_defaults(func=func)


def _owner(tenant_id: str | None) -> str:
    return "(none)" if tenant_id is None else visible(tenant_id)


def _time(value: datetime | None) -> str | None:
    return None if value is None else f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def _rule(s: ScheduleInfo) -> str:
    if s.cron is not None:
        return f"cron {visible(s.cron)} {visible(s.timezone)}"
    return f"every {s.every_s} s"


def _last_job(s: ScheduleInfo) -> str | None:
    if s.last_job_id is None:
        return None
    return f"{s.last_job_id} ({s.last_job_status or 'gone'})"


def cmd_list(args: argparse.Namespace) -> int:
    with app_connection(args, autocommit=True) as conn:
        found = find_schedules(conn, tenant_id=args.tenant, limit=args.limit)
    rows = [
        (
            _owner(s.tenant_id),
            visible(s.name),
            visible(s.job_type),
            _rule(s),
            s.catch_up,
            "paused" if s.paused else "active",
            _time(s.next_tick_at),
            _last_job(s),
        )
        for s in found
    ]
    print(text_table(COLUMNS, rows))
    if not found:
        print(NO_SCHEDULES)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with app_connection(args, autocommit=True) as conn:
        s = get_schedule(conn, args.name, tenant_id=args.tenant)
    fields = [
        ("schedule", visible(s.name)),
        ("id", s.id),
        ("tenant", _owner(s.tenant_id)),
        ("type", visible(s.job_type)),
        ("rule", _rule(s)),
        ("catch_up", s.catch_up),
        ("group", None if s.group_id is None else visible(s.group_id)),
        ("payload", visible(json.dumps(s.payload))),
        ("state", "paused" if s.paused else "active"),
        ("declared", "in code (FAIRQUEUE_SCHEDULES)" if s.declared else "at run time"),
        ("next tick", _time(s.next_tick_at) if not s.paused else None),
        ("last tick", _time(s.last_tick_at)),
        ("last job", _last_job(s)),
        ("created", _time(s.created_at)),
    ]
    for name, value in fields:
        if value is not None:
            print(f"{name + ':':<11}{value}")
    return 0


def _act(args: argparse.Namespace, act: Callable[..., None], done: str) -> int:
    with app_connection(args, autocommit=True) as conn:
        act(conn, args.name, tenant_id=args.tenant)
    print(f"{done} schedule {visible(args.name)!s} of tenant {_owner(args.tenant)}")
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    return _act(args, pause_schedule, "paused")


def cmd_resume(args: argparse.Namespace) -> int:
    return _act(args, resume_schedule, "resumed")


def cmd_remove(args: argparse.Namespace) -> int:
    return _act(args, remove_schedule, "removed")

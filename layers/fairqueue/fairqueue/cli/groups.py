"""``fairqueue groups`` and ``fairqueue quotas``: pause and resume a tenant's group, look at the
quotas and define one."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ..groups import pause_group, resume_group
from ..quotas import MAX_PERIOD, MAX_UNITS, QuotaState, define_quota, list_quotas, read_quota
from .common import app_connection, text_table, visible, whole_number_argument

QUOTA_COLUMNS = ("name", "capacity", "remaining", "reserve", "resets_at", "state")
NO_QUOTAS = "no quotas defined (define_quota in Python, or: fairqueue quotas define NAME ...)"
STATES = {None: "ok", "quota_reserve": "at reserve", "quota_exhausted": "exhausted"}
units_argument = whole_number_argument(0, MAX_UNITS)
period_argument = whole_number_argument(1, int(MAX_PERIOD.total_seconds()))


def add_commands(
    command: Callable[[str, str], argparse.ArgumentParser], database: argparse.ArgumentParser
) -> None:
    groups = command("groups", "pause or resume a tenant's group")
    verbs = groups.add_subparsers(dest="groups_command", required=True)
    for verb, func, what in (
        ("pause", cmd_pause, "pause a group: its jobs stay pending, unclaimed"),
        ("resume", cmd_resume, "resume a group: its jobs are claimed again"),
    ):
        p = verbs.add_parser(
            verb,
            parents=[database],
            help=what,
            description=what + "; a group that no job has ever had is refused (a typo pauses"
            " nothing)" + (", unless --create is given" if verb == "pause" else ""),
        )
        p.add_argument("group", help="the group's id (as enqueue's --group gave it)")
        p.add_argument("--tenant", help="the tenant the group is of (default: no tenant)")
        if verb == "pause":
            p.add_argument(
                "--create",
                action="store_true",
                help="pause the group even though no job has had it yet: its first jobs wait",
            )
        p.set_defaults(func=func)

    quotas = command("quotas", "the quotas: list them (the default) or define one")
    quotas.set_defaults(func=cmd_quotas_list)
    verbs = quotas.add_subparsers(dest="quotas_command")
    what = "every quota: what it has left, when it resets (UTC), whether it stops claims"
    p = verbs.add_parser("list", parents=[database], help=what, description=what)
    p.set_defaults(func=cmd_quotas_list)
    what = "create a quota full, or change one's capacity, reserve and period (remaining is kept)"
    p = verbs.add_parser("define", parents=[database], help=what, description=what)
    p.add_argument("name", help="the quota's name, as the stages that spend it give it")
    p.add_argument(
        "--capacity",
        type=units_argument,
        required=True,
        help=f"units per period, from 0 to {MAX_UNITS:,}",
    )
    p.add_argument(
        "--period",
        type=period_argument,
        required=True,
        help=f"whole seconds between resets, from 1 to {int(MAX_PERIOD.total_seconds()):,}"
        f" ({MAX_PERIOD.days} days)",
    )
    p.add_argument(
        "--reserve",
        type=units_argument,
        default=0,
        help="units spending leaves untouched, at most the capacity (default 0)",
    )
    p.set_defaults(func=cmd_quotas_define)


def _group(group_id: str, tenant_id: str | None) -> str:
    return f"group {group_id!r} " + (
        f"of tenant {tenant_id!r}" if tenant_id is not None else "(no tenant)"
    )


def cmd_pause(args: argparse.Namespace) -> int:
    # Autocommit: pause_group clamps a transaction of its own to the tenant and commits it.
    with app_connection(args, autocommit=True) as conn:
        pause_group(conn, args.group, tenant_id=args.tenant, create=args.create)
    print("paused " + _group(args.group, args.tenant))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    # A known group never paused is resumed all the same: its row says active, as no row does.
    with app_connection(args, autocommit=True) as conn:
        resume_group(conn, args.group, tenant_id=args.tenant, create=False)
    print("resumed " + _group(args.group, args.tenant))
    return 0


def _time(value: datetime) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def _row(q: QuotaState) -> tuple[str, int, int, int, str, str]:
    return (
        visible(q.name),
        q.capacity,
        q.remaining,
        q.reserve,
        _time(q.resets_at),
        STATES[q.stop_reason()],
    )


def cmd_quotas_list(args: argparse.Namespace) -> int:
    with app_connection(args, autocommit=True) as conn:
        quotas = list_quotas(conn)
    print(text_table(QUOTA_COLUMNS, [_row(q) for q in quotas]))
    if not quotas:
        print(NO_QUOTAS)
    return 0


def cmd_quotas_define(args: argparse.Namespace) -> int:
    with app_connection(args, autocommit=True) as conn:
        define_quota(
            conn,
            args.name,
            capacity=args.capacity,
            period=timedelta(seconds=args.period),
            reserve=args.reserve,
        )
        state = read_quota(conn, args.name)
    print(
        f"defined quota {state.name!r}: capacity {state.capacity}, reserve {state.reserve},"
        f" period {args.period} s; remaining {state.remaining},"
        f" resets {_time(state.resets_at)} UTC ({STATES[state.stop_reason()]})"
    )
    return 0

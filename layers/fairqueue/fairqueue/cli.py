"""The ``fairqueue`` command."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import api, cron, function, local, serve
from .backstop import Backstop
from .db import Connection, connect
from .embedded import embedded_dsn
from .errors import DatabaseUnavailable, FairqueueError
from .example import STAGES, TENANTS, play_clients, seed_workload
from .jobs import enqueue
from .lanes import lane_history
from .migrate import migrate
from .plans import PLANS
from .results import ResultSettings, results_by_writer
from .runs import RunRow, get_run, recent_runs
from .settings import DEFAULT_STAGES, settings
from .status import missing_results, open_jobs, queue_status
from .stopping import stop_on_signals

EMBEDDED_DATA_DIR = Path(".pgdata")


def resolve_database(args: argparse.Namespace) -> str:
    """--database-url, else DATABASE_URL, else (outside production) the embedded Postgres."""
    url: str | None = args.database_url or settings().database_url
    if url:
        return url
    if settings().production:
        raise DatabaseUnavailable("FAIRQUEUE_ENV=production needs DATABASE_URL or --database-url")
    print(f"no DATABASE_URL: using the embedded Postgres in {EMBEDDED_DATA_DIR}/", file=sys.stderr)
    return embedded_dsn(EMBEDDED_DATA_DIR)


def cmd_migrate(args: argparse.Namespace) -> int:
    with connect(resolve_database(args)) as conn:
        applied = migrate(conn)
    print("applied: " + ", ".join(applied) if applied else "up to date")
    return 0


def cmd_enqueue(args: argparse.Namespace) -> int:
    function.load_stages(args.stages)  # declaring the stages makes their types known
    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as exc:
        raise FairqueueError(f"the payload is not valid JSON: {exc}") from None
    with connect(resolve_database(args), as_app_role=True) as conn:
        job_id = enqueue(
            conn,
            args.type,
            payload,
            tenant_id=args.tenant,
            group_id=args.group,
            dedupe_key=args.dedupe_key,
        )
    print(job_id if job_id is not None else "deduplicated: an open job has that key")
    return 0


def cmd_tick(args: argparse.Namespace) -> int:
    dsn = resolve_database(args)
    stages = function.load_stages(args.stages)
    cache = function.ConnectionCache(lambda: dsn)
    event = function.ScheduledEvent.parse(local.scheduled_event())
    try:
        result = cron.invoke(cache, stages, event, local.LocalContext())
    finally:
        cache.close()
    print(json.dumps(cron.CronAnswer.of(result).model_dump(), indent=2))
    return 0 if result.stop_reason != "error" else 1


def cmd_run(args: argparse.Namespace) -> int:
    dsn = resolve_database(args)
    os.environ["DATABASE_URL"] = dsn
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "fairqueue-cron")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "fairqueue")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    if args.stages:
        os.environ["FAIRQUEUE_STAGES"] = args.stages
    with connect(dsn) as conn:
        migrate(conn)
    example = settings().stages == DEFAULT_STAGES
    if example and not args.no_seed:
        # Autocommit: each tenant's jobs are written in a transaction clamped to that tenant.
        with connect(dsn, autocommit=True, as_app_role=True) as conn:
            seeded = seed_workload(conn, seed=args.seed)
        if seeded:
            print(f"enqueued the example workload: {seeded} documents (seed {args.seed})")
    handler = local.load_handler(args.handler)
    _stop_on_signals()
    print_run_header()
    while True:
        answer = cron.CronAnswer.model_validate(
            handler(local.scheduled_event(), local.LocalContext())
        )
        with connect(dsn, as_app_role=True) as conn:
            run = get_run(conn, answer.run_id)
            assert run is not None, f"the handler answered with an unknown run {answer.run_id}"
            print_run(run)
            drained = is_drained(conn)
        if cron.stop_requested.is_set():
            print("stopped: the job in flight finished and its run row is written")
            return 0
        if drained:
            with connect(dsn, as_app_role=True) as conn:
                print_status(conn)
            if example:
                with connect(dsn, autocommit=True, as_app_role=True) as conn:
                    print_lanes(conn)
                    show_results(conn, dsn)
            return 0
        _sleep_unless_stopped(args.interval)


def is_drained(conn: Connection) -> bool:
    """Nothing due, nothing running, nothing that comes due within the next minute."""
    return open_jobs(conn, due_within=timedelta(minutes=1)) == 0


def _stop_on_signals() -> None:
    def abort(signum: int) -> None:
        # The run in flight closes its row as an abort on the way out.
        raise KeyboardInterrupt

    stop_on_signals(cron.stop_requested, "stopping after the job in flight", abort)


def _sleep_unless_stopped(seconds: float) -> None:
    cron.stop_requested.wait(seconds)


RUN_COLUMNS = ("started", "trigger", "stop_reason", "done", "failed", "deferred", "units", "secs")


def print_run_header() -> None:
    print("{:<19} {:<9} {:<16} {:>5} {:>6} {:>8} {:>5} {:>6}".format(*RUN_COLUMNS))


def print_run(run: RunRow) -> None:
    seconds = (run.finished_at - run.started_at).total_seconds() if run.finished_at else 0.0
    print(
        f"{run.started_at:%Y-%m-%d %H:%M:%S} {run.trigger:<9} {run.stop_reason or 'open':<16}"
        f" {run.jobs_done:>5} {run.jobs_failed:>6} {run.jobs_deferred:>8} {run.quota_units:>5}"
        f" {seconds:>6.1f}" + (f"  error: {run.error}" if run.error else "")
    )


def print_status(conn: Any) -> None:
    rows = queue_status(conn)
    header = ("type", "queued", "backlog", "scheduled", "running", "stuck", "failed", "done")
    print("{:<12} {:>6} {:>7} {:>9} {:>7} {:>5} {:>6} {:>6}".format(*header))
    for r in rows:
        print(
            f"{r.type:<12} {r.queued:>6} {r.backlog:>7} {r.scheduled:>9} {r.running:>7}"
            f" {r.stuck:>5} {r.failed:>6} {r.done:>6}"
        )
    missing = missing_results(conn, grace_s=ResultSettings.from_env().grace_s)
    print(
        f"results missing: {missing.within_grace} within the grace window,"
        f" {missing.under_an_hour} under an hour, {missing.under_a_day} under a day,"
        f" {missing.older} older"
    )


# The demo waits this long for a client before its backstop sweep rescues a result.
DEMO_RESULT_GRACE_S = 2.0


def show_results(conn: Connection, dsn: str) -> None:
    """The example's summaries: the watching client saves its results, the backstop rescues
    the rest once the grace window has passed."""
    saved = play_clients(conn)
    print(f"\nthe watching client saved {saved} summary results; the others wait for the backstop")
    _sleep_unless_stopped(DEMO_RESULT_GRACE_S + 0.5)
    swept = Backstop(dsn, STAGES, ResultSettings(grace_s=DEMO_RESULT_GRACE_S)).rescue()
    if swept is not None:
        print(f"the backstop sweep rescued {swept.written} after {DEMO_RESULT_GRACE_S:.0f} s")
    print("{:<8} {:>7} {:>7}".format("tenant", "client", "worker"))
    owners: list[str | None] = [*TENANTS, None]
    for tenant in owners:
        counts = results_by_writer(conn, tenant, "summarize")
        name = tenant or "(system)"
        print(f"{name:<8} {counts.get('client', 0):>7} {counts.get('worker', 0):>7}")


def print_lanes(conn: Connection) -> None:
    """The example's admitted analyses: each user's clicks ran one at a time, in click order."""
    rows = [row for tenant in TENANTS for row in lane_history(conn, tenant, "analyze")]
    if not rows:
        return
    origin = min(row["created_at"] for row in rows)

    def offset(at: datetime | None) -> str:
        return f"+{(at - origin).total_seconds():.3f}s" if at else "-"

    print("\nanalyses, one lane per user (times from the first click)")
    print(
        "{:<8} {:<20} {:>10} {:>10} {:>10}  {}".format(
            "lane", "document", "clicked", "started", "finished", "status"
        )
    )
    for row in sorted(rows, key=lambda r: (r["started_at"] or r["created_at"], r["id"])):
        print(
            f"{row['lane']:<8} {row['payload']['doc']:<20} {offset(row['created_at']):>10}"
            f" {offset(row['started_at']):>10} {offset(row['finished_at']):>10}  {row['status']}"
        )


def cmd_serve(args: argparse.Namespace) -> int:
    role = args.role or settings().role
    serve.roles_of(role)
    dsn = resolve_database(args)
    stages = function.load_stages(args.stages)
    stop = threading.Event()

    def abort(signum: int) -> None:
        # Each role is a thread that cannot be interrupted: the process ends here, its jobs
        # left to their leases and its open run rows to the sweeper.
        print(f"fairqueue serve: {signal.Signals(signum).name}: aborted", file=sys.stderr)
        sys.stderr.flush()
        os._exit(128 + signum)

    stop_on_signals(stop, "fairqueue serve: finishing the work in flight", abort)
    print(f"fairqueue serve: role {role}", file=sys.stderr, flush=True)
    ok = serve.serve(
        role,
        dsn,
        stages,
        stop,
        cron_interval_s=args.cron_interval,
        sweep_interval_s=args.sweep_interval,
    )
    return 0 if ok else 1


def cmd_token(args: argparse.Namespace) -> int:
    token = api.mint_token(
        api.api_secret(),
        tenant_id=args.tenant,
        lane=args.lane,
        ttl_s=args.ttl,
        names=api.ClaimNames.from_env(),
    )
    print(token)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with connect(resolve_database(args), as_app_role=True) as conn:
        print_status(conn)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    with connect(resolve_database(args), as_app_role=True) as conn:
        print_run_header()
        for run in recent_runs(conn, args.limit):
            print_run(run)
    return 0


def cmd_plans(args: argparse.Namespace) -> int:
    print(PLANS.table())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairqueue", description=__doc__)
    parser.add_argument("--database-url", help="default: DATABASE_URL, else the embedded Postgres")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("migrate", help="apply the schema migrations").set_defaults(func=cmd_migrate)

    p = sub.add_parser("enqueue", help="enqueue one job")
    p.add_argument("type")
    p.add_argument("payload", help="a JSON object")
    p.add_argument("--tenant")
    p.add_argument("--group")
    p.add_argument("--dedupe-key")
    p.add_argument("--stages", help="module:attribute of the stage list (FAIRQUEUE_STAGES)")
    p.set_defaults(func=cmd_enqueue)

    p = sub.add_parser("tick", help="one invocation, as the scheduled Lambda runs it")
    p.add_argument("--stages", help="module:attribute of the stage list (FAIRQUEUE_STAGES)")
    p.set_defaults(func=cmd_tick)

    p = sub.add_parser("run", help="the local loop: invoke the cron handler until drained")
    p.add_argument("--handler", default="functions/cron.py:handler")
    p.add_argument("--stages", help="module:attribute of the stage list (FAIRQUEUE_STAGES)")
    p.add_argument("--interval", type=float, default=3.0, help="seconds between invocations")
    p.add_argument("--seed", type=int, default=7, help="seed of the example workload")
    p.add_argument("--no-seed", action="store_true", help="do not enqueue the example workload")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("serve", help="run the cron, worker, sweeper and API roles as one process")
    p.add_argument(
        "--role",
        help="cron, worker, sweeper, api or all (default FAIRQUEUE_ROLE, else all; all includes"
        " api when FAIRQUEUE_API_SECRET is set)",
    )
    p.add_argument("--stages", help="module:attribute of the stage list (FAIRQUEUE_STAGES)")
    p.add_argument("--cron-interval", type=float, default=serve.CRON_INTERVAL_S, help="seconds")
    p.add_argument("--sweep-interval", type=float, default=serve.SWEEP_INTERVAL_S, help="seconds")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("token", help="print a token for the local API (FAIRQUEUE_API_SECRET)")
    p.add_argument("--tenant", required=True, help="the tenant the token acts for")
    p.add_argument("--lane", required=True, help="the caller's lane")
    p.add_argument("--ttl", type=int, default=api.DEFAULT_TOKEN_TTL_S, help="seconds it is valid")
    p.set_defaults(func=cmd_token)

    sub.add_parser("status", help="backlog, stuck and failed per type").set_defaults(
        func=cmd_status
    )

    p = sub.add_parser("runs", help="the last runs, newest first")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(func=cmd_runs)

    sub.add_parser("plans", help="the plans and how they rank").set_defaults(func=cmd_plans)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except FairqueueError as exc:
        print(f"fairqueue: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

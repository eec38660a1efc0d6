"""``fairqueue run``: the local loop, and what it shows of the example once drained.

The example is imported here alone, and this module only when ``run`` is the command, so that
no other command loads the example's stages (production refuses its development upstream).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timedelta

from ..db import Connection, connect, release_embedded
from ..dev import lambda_loop
from ..dev.example import STAGES, TENANTS, play_clients, seed_workload
from ..lanes import lane_history
from ..migrate import migrate
from ..results import ResultSettings, results_by_writer
from ..roles import cron
from ..roles.backstop import Backstop
from ..roles.stopping import stop_on_signals
from ..runs import get_run
from ..settings import DEFAULT_STAGES, settings
from ..status import open_jobs
from .common import print_run, print_run_header, print_status, resolve_database, visible

# The demo waits this long for a client before its backstop sweep rescues a result.
DEMO_RESULT_GRACE_S = 2.0


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
        # What this invocation shows at the end is what it did, not what earlier ones did.
        started = conn.execute("select now() as now").fetchone()
    since: datetime = started["now"] if started else datetime.now().astimezone()
    example = settings().stages == DEFAULT_STAGES
    if example and not args.no_seed:
        # Autocommit: each tenant's jobs are written in a transaction clamped to that tenant.
        with connect(dsn, autocommit=True, as_app_role=True) as conn:
            seeded = seed_workload(conn, seed=args.seed)
            waiting = 0 if seeded else open_jobs(conn)
        if seeded:
            print(f"enqueued the example workload: {seeded} documents (seed {args.seed})")
        else:
            # seed_workload seeds an empty queue only: it never piles a second workload on one.
            print(
                f"did not enqueue the example workload: the queue holds {waiting} open job(s)"
                " from earlier; this run drains them, and the tables at the end count only what"
                " it did (seeding starts again once the queue is empty)"
            )
    handler = lambda_loop.load_handler(args.handler)
    _stop_on_signals()
    try:
        return _drain(args, dsn, handler, since, example=example)
    except KeyboardInterrupt:
        # An abort: the run row is closed and the unstarted jobs given back. Handlers still
        # running on the pool's threads are not waited for (an exit would join them): their
        # jobs are left to their leases.
        print("aborted: the jobs whose handlers had started are left to their leases")
        sys.stdout.flush()
        sys.stderr.flush()
        release_embedded()
        os._exit(130)


def _drain(
    args: argparse.Namespace,
    dsn: str,
    handler: lambda_loop.Handler,
    since: datetime,
    *,
    example: bool,
) -> int:
    """Invoke the handler until the queue is drained or a stop is requested; a row per run,
    with the jobs still open in the queue after it (the drain's progress)."""
    print_run_header(open_left=True)
    while True:
        answer = cron.CronAnswer.model_validate(
            handler(lambda_loop.scheduled_event(), lambda_loop.LocalContext())
        )
        with connect(dsn, as_app_role=True) as conn:
            run = get_run(conn, answer.run_id)
            assert run is not None, f"the handler answered with an unknown run {answer.run_id}"
            print_run(run, open_jobs(conn))
            drained = is_drained(conn)
        if cron.stop_requested.is_set():
            print("stopped: the job in flight finished and its run row is written")
            return 0
        if drained:
            with connect(dsn, as_app_role=True) as conn:
                print("\nthe queue now, with what earlier runs left in it:")
                print_status(conn)
            if example:
                with connect(dsn, autocommit=True, as_app_role=True) as conn:
                    print_lanes(conn, since)
                    show_results(conn, dsn, since)
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


def show_results(conn: Connection, dsn: str, since: datetime | None = None) -> None:
    """The example's summaries saved ``since`` (this invocation's start): the watching client
    saves its results, the backstop rescues the rest once the grace window has passed."""
    saved = play_clients(conn)
    print(f"\nthe watching client saved {saved} summary results; the others wait for the backstop")
    _sleep_unless_stopped(DEMO_RESULT_GRACE_S + 0.5)
    swept = Backstop(dsn, STAGES, ResultSettings(grace_s=DEMO_RESULT_GRACE_S)).rescue()
    if swept is not None:
        print(f"the backstop sweep rescued {swept.written} after {DEMO_RESULT_GRACE_S:.0f} s")
    print("{:<8} {:>7} {:>7}".format("tenant", "client", "worker"))
    owners: list[str | None] = [*TENANTS, None]
    for tenant in owners:
        counts = results_by_writer(conn, tenant, "summarize", since=since)
        name = tenant or "(system)"
        print(f"{name:<8} {counts.get('client', 0):>7} {counts.get('worker', 0):>7}")


def print_lanes(conn: Connection, since: datetime | None = None) -> None:
    """The example's analyses admitted ``since`` (this invocation's start): each user's clicks
    ran one at a time, in click order."""
    rows = [row for tenant in TENANTS for row in lane_history(conn, tenant, "analyze", since=since)]
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
            f"{visible(row['lane']):<8} {visible(str(row['payload'].get('doc'))):<20}"
            f" {offset(row['created_at']):>10}"
            f" {offset(row['started_at']):>10} {offset(row['finished_at']):>10}  {row['status']}"
        )

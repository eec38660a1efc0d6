"""fairqueue: a fair job queue on Postgres, from the command line."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from .. import api
from ..db import connect, release_embedded
from ..dev import lambda_loop
from ..errors import FairqueueError
from ..job_info import MAX_LISTED
from ..jobs import enqueue
from ..migrate import migrate
from ..plans import PLANS
from ..roles import cron, function, serve
from ..roles.stopping import say, stop_on_signals
from ..runs import recent_runs
from ..settings import settings
from . import credits, groups, jobs, schedules, top
from .common import (
    RUN_COLUMNS,
    app_connection,
    count_argument,
    migrated_database,
    print_run,
    print_run_header,
    print_status,
    read_payload,
    resolve_database,
    seconds_argument,
    visible,
    whole_number_argument,
)
from .log_lines import json_logs

__all__ = ["RUN_COLUMNS", "build_parser", "main"]


def cmd_migrate(args: argparse.Namespace) -> int:
    with connect(resolve_database(args)) as conn:
        applied = migrate(conn)
    for name in applied:
        print(f"applied {name}")
    print(f"{len(applied)} migration(s) applied" if applied else "up to date")
    return 0


def cmd_enqueue(args: argparse.Namespace) -> int:
    function.load_stages(args.stages)  # declaring the stages makes their types known
    payload = read_payload(args.payload)
    with app_connection(args) as conn:
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
    from ..roles import startup  # tick and serve alone prepare their stages' database

    json_logs("fairqueue-tick")
    dsn = migrated_database(args)
    stages = function.load_stages(args.stages)
    startup.prepare(stages, dsn)
    cache = function.ConnectionCache(lambda: dsn)
    event = function.ScheduledEvent.parse(lambda_loop.scheduled_event())
    try:
        result = cron.invoke(cache, stages, event, lambda_loop.LocalContext())
    finally:
        cache.close()
    print(json.dumps(cron.CronAnswer.of(result).model_dump(), indent=2))
    return 0 if result.stop_reason != "error" else 1


def cmd_serve(args: argparse.Namespace) -> int:
    from ..roles import startup  # tick and serve alone prepare their stages' database

    role = args.role or settings().role
    serve.roles_of(role)
    dsn = migrated_database(args)
    stages = function.load_stages(args.stages)
    startup.prepare(stages, dsn)
    stop = threading.Event()

    def abort(signum: int) -> None:
        # Each role is a thread that cannot be interrupted: the process ends here, its jobs
        # left to their leases and its open run rows to the sweeper.
        say(f"fairqueue serve: {signal.Signals(signum).name}: aborted")
        release_embedded()
        os._exit(128 + signum)

    json_logs(f"fairqueue-serve-{role}")
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
    with app_connection(args) as conn:
        print_status(conn)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    with app_connection(args) as conn:
        print_run_header()
        for run in recent_runs(conn, args.limit):
            print_run(run)
    return 0


def cmd_plans(args: argparse.Namespace) -> int:
    print(PLANS.table())
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    # Only the local loop loads the example, so no other command imports its stages.
    from .demo import cmd_run as run_loop

    return run_loop(args)


class Parser(argparse.ArgumentParser):
    """Refuses what it cannot parse in one line (the usage is what --help is for), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {visible(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    # --database-url is taken before or after the command: each subcommand shares it, and a
    # value given in either place is kept (SUPPRESS: an absent one does not overwrite it).
    database = Parser(add_help=False)
    database.add_argument(
        "--database-url",
        default=argparse.SUPPRESS,
        help="default: DATABASE_URL, else the embedded Postgres",
    )
    stages_help = "module:attribute of the stage list (default FAIRQUEUE_STAGES, else the example)"
    parser = Parser(prog="fairqueue", description=__doc__, parents=[database])
    parser.add_argument("--version", action="version", version=f"fairqueue {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=[database])

    command("migrate", "apply the schema migrations, one line per file applied").set_defaults(
        func=cmd_migrate
    )

    p = command("enqueue", "enqueue one job")
    p.add_argument("type", help="the job's type: the name of a stage in the stage list")
    p.add_argument("payload", help="a JSON object, @FILE for a file's content, or - for stdin")
    p.add_argument("--tenant", help="the tenant the job is of (default: no tenant)")
    p.add_argument(
        "--group", help="the tenant's group it is counted in (default: its default group)"
    )
    p.add_argument(
        "--dedupe-key", help="while an open job of the tenant has this key, no other is enqueued"
    )
    p.add_argument("--stages", help=stages_help)
    p.set_defaults(func=cmd_enqueue)

    p = command("tick", "one invocation, as the scheduled Lambda runs it")
    p.add_argument("--stages", help=stages_help)
    p.set_defaults(func=cmd_tick)

    p = command("run", "the local loop: invoke the cron handler until drained")
    p.add_argument(
        "--handler",
        default="functions/cron.py:handler",
        help="file.py:function of the handler invoked (default functions/cron.py:handler)",
    )
    p.add_argument("--stages", help=stages_help)
    p.add_argument(
        "--interval",
        type=seconds_argument(0.1, 3600),
        default=3.0,
        help="seconds between invocations, from 0.1 to 3600 (default 3)",
    )
    p.add_argument(
        "--seed",
        type=whole_number_argument(0, MAX_SEED),
        default=7,
        help=f"seed of the example workload, from 0 to {MAX_SEED:,} (default 7)",
    )
    p.add_argument("--no-seed", action="store_true", help="do not enqueue the example workload")
    p.set_defaults(func=cmd_run)

    p = command("serve", "run the cron, worker, sweeper, backstop and API roles as one process")
    p.add_argument(
        "--role",
        help="cron, worker, sweeper, backstop, api, dashboard or all (default FAIRQUEUE_ROLE,"
        " else all; all includes api when FAIRQUEUE_API_SECRET is set and dashboard when"
        " FAIRQUEUE_DASHBOARD_SECRET is set)",
    )
    p.add_argument("--stages", help=stages_help)
    p.add_argument(
        "--cron-interval",
        type=seconds_argument(0.1, MAX_SERVE_INTERVAL_S),
        default=serve.CRON_INTERVAL_S,
        help=f"seconds between cron passes, from 0.1 to {MAX_SERVE_INTERVAL_S:g}"
        f" (default {serve.CRON_INTERVAL_S:g})",
    )
    p.add_argument(
        "--sweep-interval",
        type=seconds_argument(0.1, MAX_SERVE_INTERVAL_S),
        default=serve.SWEEP_INTERVAL_S,
        help=f"seconds between sweeps and backstop passes, from 0.1 to {MAX_SERVE_INTERVAL_S:g}"
        f" (default {serve.SWEEP_INTERVAL_S:g})",
    )
    p.set_defaults(func=cmd_serve)

    p = command("token", "print a token for the local API (FAIRQUEUE_API_SECRET)")
    p.add_argument("--tenant", required=True, help="the tenant the token acts for")
    p.add_argument("--lane", required=True, help="the caller's lane")
    p.add_argument(
        "--ttl",
        type=whole_number_argument(1, MAX_TOKEN_TTL_S),
        default=api.DEFAULT_TOKEN_TTL_S,
        help=f"seconds it is valid, from 1 to {MAX_TOKEN_TTL_S:,} (default"
        f" {api.DEFAULT_TOKEN_TTL_S})",
    )
    p.set_defaults(func=cmd_token)

    command("status", "backlog, stuck and failed per type").set_defaults(func=cmd_status)

    p = command("runs", "the last runs, newest first")
    p.add_argument(
        "--limit",
        type=count_argument,
        default=20,
        help=f"how many, from 1 to {MAX_LISTED:,} (default 20)",
    )
    p.set_defaults(func=cmd_runs)

    command("plans", "the plans and how they rank").set_defaults(func=cmd_plans)
    jobs.add_commands(command, database)
    top.add_commands(command)
    credits.add_commands(command, database)
    groups.add_commands(command, database)
    schedules.add_commands(command, database)
    return parser


# The bounds of the numbers only the command line takes (the others are the library's own).
MAX_SEED = 2**32 - 1
MAX_SERVE_INTERVAL_S = 86_400.0
MAX_TOKEN_TTL_S = 30 * 86_400


def package_version() -> str:
    """The installed package's version; a copy not installed as a package (a Lambda layer's)
    has none to tell."""
    try:
        return metadata.version("fairqueue")
    except metadata.PackageNotFoundError:
        return "(version unknown: not installed as a package)"


def main(argv: Sequence[str] | None = None) -> int:
    find_modules_in_current_folder()
    args = build_parser().parse_args(argv)
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a reader gone shows here, where it is caught, not at exit
        return status
    except FairqueueError as exc:
        print(f"fairqueue: {visible(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return reader_gone()


# A command whose reader has gone (`fairqueue runs | head -1`) ends as a Unix tool killed by
# SIGPIPE would: quietly, with 128 + SIGPIPE.
PIPE_CLOSED_STATUS = 128 + signal.SIGPIPE


def reader_gone() -> int:
    """Stop writing to a standard output whose reader has gone: what is still buffered would
    fail again when Python flushes it on the way out, so the descriptor is pointed at
    /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return PIPE_CLOSED_STATUS


def find_modules_in_current_folder() -> None:
    """Let ``--stages mystages:STAGES`` name a module of the current folder. The installed
    ``fairqueue`` command starts with its own folder on ``sys.path``, not the current one (as
    ``python -m`` has it); the current folder goes last, so an installed module of the same
    name still wins."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


if __name__ == "__main__":
    sys.exit(main())

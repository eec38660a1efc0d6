"""The soak (``make soak``): drain pipelines, a sweeper and a fault injector on a private
cluster, then the exact outcome.

    python tests/soak.py [--jobs 50000] [--minutes 10] [--workers 3] [--handler-ms 30]

It starts a Postgres cluster of its own (tests/private_cluster.py), enqueues the jobs over 200
tenants and 1,000 groups, and runs drain processes and a sweeper process while the injector,
every one to four seconds, kills a drain process with SIGKILL (and starts another), terminates
one of the library's connections, or restarts the cluster. Handlers write one row per attempt
through job.conn and fail one attempt in thirty. When every job is done or the time is up, it
stops the faults, drains what is left, closes the runs the killed processes left open the way the
sweeper does, and prints the figures. It exits 1 on any job lost, any job written twice, any run
row left open, or fewer faults than --min-faults.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for the support package

from fairqueue import Job, NewJob, Stage, connect, enqueue_many, run_pipeline  # noqa: E402
from fairqueue.db import Connection  # noqa: E402
from fairqueue.errors import FairqueueError  # noqa: E402
from fairqueue.migrate import migrate  # noqa: E402
from fairqueue.roles.sweeper import sweep  # noqa: E402
from support.private_cluster import private_cluster  # noqa: E402

JOB_TYPE = "soak"


def soak_stage(handler_ms: float) -> Stage:
    chance = random.Random()

    def handler(job: Job) -> None:
        assert job.conn is not None
        job.conn.execute("insert into public.effects values (%s, %s)", (job.id, job.attempts))
        time.sleep(handler_ms / 1000)
        if chance.random() < 1 / 30:
            raise RuntimeError("a failed attempt, for the soak")

    return Stage(
        JOB_TYPE, handler=handler, batch=20, lease_s=2.0, max_attempts=1000, backoff_unit_s=0.01
    )


def worker(dsn: str, role: str, handler_ms: float) -> int:
    """One drain or sweeper process: runs until killed, riding out the faults."""
    stage = soak_stage(handler_ms)
    while True:
        try:
            if role == "sweeper":
                sweep(dsn, [stage])
                time.sleep(1.0)
            elif run_pipeline(dsn, [stage], time_budget_s=20).stop_reason == "no_work":
                time.sleep(0.2)
        except (FairqueueError, OSError, psycopg.Error) as exc:
            print(f"{role}: {exc}", file=sys.stderr, flush=True)
            time.sleep(0.5)


def prepare(dsn: str, jobs: int) -> None:
    with connect(dsn, autocommit=True) as admin:
        migrate(admin)
        admin.execute("create table public.effects (job_id uuid not null, attempt integer)")
        admin.execute("grant select, insert on public.effects to fairqueue_app")
        soak_stage(0)
        for start in range(0, jobs, 1000):
            tenant = f"t{start // 1000 % 200}"
            with admin.transaction():
                enqueue_many(
                    admin,
                    JOB_TYPE,
                    [
                        NewJob({"n": n}, group_id=f"g{n % 5}")
                        for n in range(start, min(start + 1000, jobs))
                    ],
                    tenant_id=tenant,
                )


def left(admin: Connection) -> int:
    row = admin.execute(
        "select count(*) as n from fairqueue.jobs where type = %s and status <> 'done'",
        (JOB_TYPE,),
    ).fetchone()
    assert row is not None
    return int(row["n"])


def spawn(dsn: str, role: str, handler_ms: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(HERE),
            "--worker",
            role,
            "--dsn",
            dsn,
            "--handler-ms",
            str(handler_ms),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def inject(args: argparse.Namespace, cluster_dsn: str, restart: Callable[[], None]) -> Counter[str]:
    faults: Counter[str] = Counter()
    chance = random.Random(args.seed)
    drains = [spawn(cluster_dsn, "drain", args.handler_ms) for _ in range(args.workers)]
    sweeper = spawn(cluster_dsn, "sweeper", args.handler_ms)
    deadline = time.monotonic() + args.minutes * 60
    try:
        while time.monotonic() < deadline:
            time.sleep(chance.uniform(1.0, 4.0))
            try:
                with connect(cluster_dsn, autocommit=True) as admin:
                    if left(admin) == 0:
                        break
                    kind = chance.choices(["kill", "terminate", "restart"], [5, 4, 1])[0]
                    if kind == "terminate":
                        admin.execute(
                            "select pg_terminate_backend(pid) from pg_stat_activity"
                            " where datname = current_database() and pid <> pg_backend_pid()"
                            "   and backend_type = 'client backend'"
                            " order by random() limit 1"
                        )
            except (FairqueueError, psycopg.Error):
                continue  # the cluster is coming back from a restart
            if kind == "kill":
                victim = chance.randrange(len(drains))
                drains[victim].send_signal(signal.SIGKILL)
                drains[victim].wait()
                drains[victim] = spawn(cluster_dsn, "drain", args.handler_ms)
            elif kind == "restart":
                restart()
            faults[kind] += 1
    finally:
        for process in [*drains, sweeper]:
            process.send_signal(signal.SIGKILL)
            process.wait()
    return faults


def killed_backends_gone(admin: Connection, timeout_s: float = 30.0) -> None:
    """Wait until no other client backend is left. A process killed in the middle of a
    statement leaves its backend to finish it: a run row it was opening can commit after the
    kill, and one committed after the runs are dated back below would stay open."""
    deadline = time.monotonic() + timeout_s
    while True:
        row = admin.execute(
            "select count(*) as n from pg_stat_activity where datname = current_database()"
            " and pid <> pg_backend_pid() and backend_type = 'client backend'"
        ).fetchone()
        assert row is not None
        if int(row["n"]) == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{row['n']} backends of killed processes still running")
        time.sleep(0.1)


def finish(dsn: str, handler_ms: float) -> None:
    """Drain what the faults left, then close the runs killed processes left open."""
    stage = soak_stage(handler_ms)
    with connect(dsn, autocommit=True) as admin:
        killed_backends_gone(admin)
        while left(admin):
            admin.execute("update fairqueue.jobs set lease_until = now() where status = 'running'")
            run_pipeline(dsn, [stage], time_budget_s=60)
        admin.execute(
            "update fairqueue.runs set started_at = now() - interval '1 day'"
            " where finished_at is null"
        )
    sweep(dsn, [stage])


def figures(dsn: str, jobs: int) -> dict[str, int]:
    with connect(dsn, autocommit=True) as admin:

        def one(sql: str) -> int:
            row = admin.execute(sql).fetchone()  # type: ignore[arg-type]
            assert row is not None
            return int(row["n"])

        return {
            "jobs": jobs,
            "done": one("select count(*) as n from fairqueue.all_jobs where status = 'done'"),
            "lost": jobs
            - one("select count(*) as n from fairqueue.all_jobs where status = 'done'"),
            "written twice": one(
                "select count(*) as n from (select job_id from public.effects"
                " group by job_id having count(*) > 1) d"
            ),
            "done without its write": one(
                "select count(*) as n from fairqueue.all_jobs j where j.status = 'done'"
                " and not exists (select 1 from public.effects e where e.job_id = j.id)"
            ),
            "runs": one("select count(*) as n from fairqueue.runs"),
            "runs left open": one(
                "select count(*) as n from fairqueue.runs where finished_at is null"
            ),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--handler-ms", type=float, default=30.0)
    parser.add_argument("--min-faults", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--worker", choices=["drain", "sweeper"], help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.dsn, args.worker, args.handler_ms)
    started = time.monotonic()
    with private_cluster() as cluster:
        prepare(cluster.dsn, args.jobs)
        faults = inject(args, cluster.dsn, cluster.restart)
        finish(cluster.dsn, args.handler_ms)
        found = figures(cluster.dsn, args.jobs)
    found.update({f"faults: {kind}": n for kind, n in sorted(faults.items())})
    found["faults"] = sum(faults.values())
    found["seconds"] = round(time.monotonic() - started)
    width = max(len(name) for name in found)
    for name, value in found.items():
        print(f"{name:<{width}}  {value:>8,}")
    broken = (
        found["lost"]
        or found["written twice"]
        or found["done without its write"]
        or found["runs left open"]
        or found["faults"] < args.min_faults
    )
    print("support.soak: FAILED" if broken else "support.soak: passed")
    return 1 if broken else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

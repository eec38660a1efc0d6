"""Doorbells in milliseconds: the time from an enqueue's commit to its handler's first line, for
fairqueue's Postgres doorbells and pgqueuer's NOTIFY path, one after the other on one server.

Each system runs its worker in a process of its own and is enqueued to from this one, each
enqueue its own transaction on one connection opened beforehand:

- paced: ``doorbell_jobs`` jobs, one every ``doorbell_pace_s`` (50 ms in the full run) on a fixed
  schedule, after ``doorbell_warmup`` such jobs that are not counted. Each job's latency runs
  from the moment its enqueue's commit returned here to its handler's first line there, both on
  ``time.monotonic`` (the machine's one monotonic clock); p50, p95, p99 and the longest.
- burst: ``doorbell_burst`` jobs enqueued by one call in one transaction (``enqueue_many``;
  pgqueuer's ``Queries.enqueue`` given lists); the time from its commit until the last handler
  started, and the jobs per second that makes.

fairqueue: ``fairqueue serve --role worker`` with ``FAIRQUEUE_DOORBELLS=postgres`` and one
doorbell stage (bench/doorbell_stage.py: batch 100, one handler at a time); its jobs are of one
tenant. pgqueuer: bench/peers/pgqueuer_notify.py. Both handlers only take the time. Every job
must start exactly once, or the run fails. ``python -m bench.doorbells`` runs this workload
alone and prints its table; ``make bench`` runs it with the rest.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from fairqueue import NewJob, enqueue, enqueue_many
from fairqueue.db import Connection, connect
from fairqueue.doorbells import PostgresDoorbells, ringing

from . import database, doorbell_stage
from .errors import BenchError
from .latency import percentile
from .peers import PGQUEUER
from .peers import pgqueuer_notify as notify
from .sizes import FULL, SMOKE, Sizes

FAIRQUEUE = "fairqueue"
TENANT = "bench-doorbells"
ROOT = Path(__file__).resolve().parents[1]
FAIRQUEUE_SETTINGS = (
    "`fairqueue serve --role worker`, Postgres doorbells (LISTEN/NOTIFY), one doorbell stage,"
    f" batch {doorbell_stage.BATCH}, concurrency 1"
)
LISTENING = (
    "select count(*) as n from pg_stat_activity"
    " where datname = current_database() and query ilike 'listen%%'"
)
START_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 120.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DoorbellLatency:
    system: str
    settings: str
    paced_jobs: int
    pace_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    burst_jobs: int
    # From the burst's commit until its last handler started.
    burst_last_start_ms: float

    @property
    def burst_per_s(self) -> float:
        return self.burst_jobs / (self.burst_last_start_ms / 1000.0)


def summary(
    system: str,
    settings: str,
    sizes: Sizes,
    paced: dict[Any, float],
    burst_commit: float,
    burst: Sequence[Any],
    starts: dict[Any, float],
) -> DoorbellLatency:
    """The figures of one system's run, once every job it was given started exactly once."""
    expected = set(paced) | set(burst)
    if set(starts) != expected:
        raise BenchError(
            f"{system}: {len(expected - set(starts))} jobs never started,"
            f" {len(set(starts) - expected)} unexpected starts"
        )
    waits = [(starts[key] - committed) * 1000.0 for key, committed in paced.items()]
    return DoorbellLatency(
        system=system,
        settings=settings,
        paced_jobs=len(waits),
        pace_ms=sizes.doorbell_pace_s * 1000.0,
        p50_ms=percentile(waits, 50),
        p95_ms=percentile(waits, 95),
        p99_ms=percentile(waits, 99),
        max_ms=max(waits),
        burst_jobs=len(burst),
        burst_last_start_ms=(max(starts[key] for key in burst) - burst_commit) * 1000.0,
    )


def paced(
    sizes: Sizes, count: int, enqueue_one: Callable[[int], tuple[Any, float]]
) -> dict[Any, float]:
    """``count`` enqueues on a fixed schedule, ``doorbell_pace_s`` apart: each job's key and the
    time its commit returned."""
    commits: dict[Any, float] = {}
    began = time.monotonic()
    for n in range(count):
        time.sleep(max(0.0, began + n * sizes.doorbell_pace_s - time.monotonic()))
        key, committed = enqueue_one(n)
        commits[key] = committed
    return commits


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = RUN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.01)


def listeners(conn: Connection) -> int:
    row = conn.execute(LISTENING).fetchone()
    assert row is not None
    return int(row["n"])


# fairqueue


def read_starts(path: Path) -> dict[UUID, float]:
    """The starts file: one line per handler start. A job started twice is an error."""
    found: dict[UUID, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        job_id, at = line.split()
        if UUID(job_id) in found:
            raise BenchError(f"fairqueue: job {job_id} started twice")
        found[UUID(job_id)] = float(at)
    return found


@contextmanager
def fairqueue_worker(dsn: str, starts: Path) -> Iterator[None]:
    """``fairqueue serve --role worker`` in a process of its own, listening when the block
    starts; stopped with SIGTERM after it."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "FAIRQUEUE_DOORBELLS": "postgres",
        "FAIRQUEUE_STAGES": "bench.doorbell_stage:STAGES",
        doorbell_stage.STARTS_VARIABLE: str(starts),
    }
    command = [
        sys.executable,
        "-m",
        "fairqueue",
        "--database-url",
        dsn,
        "serve",
        "--role",
        "worker",
    ]
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            with connect(dsn, autocommit=True) as conn:
                wait_for(
                    lambda: listeners(conn) > 0 or process.poll() is not None,
                    "the fairqueue worker to listen",
                    START_TIMEOUT_S,
                )
            if process.poll() is not None:
                output.seek(0)
                raise BenchError(f"the fairqueue worker exited: {output.read()[-2000:]!r}")
            yield
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=notify.STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_fairqueue(dsn: str, sizes: Sizes) -> DoorbellLatency:
    with connect(dsn, autocommit=True) as admin:
        database.reset(admin)
    with tempfile.TemporaryDirectory() as folder:
        starts_file = Path(folder) / "starts"
        starts_file.touch()

        def started(count: int) -> Callable[[], bool]:
            # Counting lines, not reading them: the bench shares the machine with the worker.
            return lambda: starts_file.read_bytes().count(b"\n") >= count

        with (
            fairqueue_worker(dsn, starts_file),
            connect(dsn, autocommit=True, as_app_role=True) as conn,
        ):
            ringing.use_doorbells(PostgresDoorbells(conn))
            try:

                def one(_: int) -> tuple[UUID, float]:
                    job_id = enqueue(conn, doorbell_stage.JOB_TYPE, {}, tenant_id=TENANT)
                    return job_id, time.monotonic()

                warm = paced(sizes, sizes.doorbell_warmup, one)
                wait_for(started(len(warm)), "fairqueue's warm-up jobs to start")
                counted = paced(sizes, sizes.doorbell_jobs, one)
                wait_for(started(len(warm) + len(counted)), "fairqueue's paced jobs to start")
                jobs = [NewJob({}) for _ in range(sizes.doorbell_burst)]
                enqueued = enqueue_many(conn, doorbell_stage.JOB_TYPE, jobs, tenant_id=TENANT)
                burst_commit = time.monotonic()
                burst = [e.job_id for e in enqueued if e.job_id is not None]
                everything = len(warm) + len(counted) + len(burst)
                wait_for(started(everything), "fairqueue's burst to start")
            finally:
                ringing.use_doorbells(None)
        starts = read_starts(starts_file)
    for job_id in warm:
        del starts[job_id]
    return summary(FAIRQUEUE, FAIRQUEUE_SETTINGS, sizes, counted, burst_commit, burst, starts)


# pgqueuer


def run_pgqueuer(peer_dsn: str, sizes: Sizes) -> DoorbellLatency:
    PGQUEUER.reset(peer_dsn)
    enqueuer = notify.Enqueuer(peer_dsn)
    try:
        with notify.running_worker(peer_dsn) as stopped, connect(peer_dsn, autocommit=True) as conn:

            def one(n: int) -> tuple[int, float]:
                return n, enqueuer.one(n)

            def drained() -> bool:
                row = conn.execute(PGQUEUER.work_left).fetchone()
                return row is not None and not any(row.values())

            warm = sizes.doorbell_warmup
            # Its LISTEN does not show in pg_stat_activity: the warm-up's jobs, run before its
            # LISTEN or after, make sure it is listening before the counted ones.
            paced(sizes, warm, one)
            wait_for(drained, "pgqueuer's warm-up jobs")
            counted = paced(sizes, sizes.doorbell_jobs, lambda n: one(warm + n))
            wait_for(drained, "pgqueuer's paced jobs")
            first = warm + sizes.doorbell_jobs
            burst = range(first, first + sizes.doorbell_burst)
            burst_commit = enqueuer.burst(burst)
            wait_for(drained, "pgqueuer's burst")
            starts = _once(stopped())
    finally:
        enqueuer.close()
    for n in range(warm):
        del starts[n]
    return summary(PGQUEUER.name, notify.SETTINGS, sizes, counted, burst_commit, burst, starts)


def _once(starts: list[tuple[int, float]]) -> dict[int, float]:
    found: dict[int, float] = {}
    for index, at in starts:
        if index in found:
            raise BenchError(f"pgqueuer: job {index} started twice")
        found[index] = at
    return found


def measure(dsn: str, peer_dsn: str, sizes: Sizes, progress: Progress) -> list[DoorbellLatency]:
    """fairqueue, then pgqueuer, on the same server; fairqueue's tables are left empty."""
    found = []
    for system, step in ((FAIRQUEUE, run_fairqueue), (PGQUEUER.name, run_pgqueuer)):
        progress(
            f"doorbells: {system}, {sizes.doorbell_jobs} jobs"
            f" {sizes.doorbell_pace_s * 1000:g} ms apart, then a burst of {sizes.doorbell_burst:,}"
        )
        result = step(dsn if system == FAIRQUEUE else peer_dsn, sizes)
        found.append(result)
        progress(f"doorbells: {line(result)}")
    with connect(dsn, autocommit=True) as admin:
        database.reset(admin)
    return found


def line(found: DoorbellLatency) -> str:
    return (
        f"{found.system}: p50 {found.p50_ms:.1f} ms, p95 {found.p95_ms:.1f} ms, p99"
        f" {found.p99_ms:.1f} ms, max {found.max_ms:.1f} ms; burst of {found.burst_jobs:,}: last"
        f" start after {found.burst_last_start_ms:.0f} ms, {found.burst_per_s:,.0f} jobs/s"
    )


def by_system(found: Sequence[DoorbellLatency], system: str) -> DoorbellLatency | None:
    return next((f for f in found if f.system == system), None)


def as_json(found: Sequence[DoorbellLatency]) -> list[dict[str, Any]]:
    return [{**asdict(f), "burst_per_s": round(f.burst_per_s, 1)} for f in found]


def section(found: Sequence[DoorbellLatency]) -> list[str]:
    """The report's doorbell section."""
    if not found:
        return []
    return [
        "### Doorbells: from an enqueue's commit to its handler's first line",
        "",
        "Each system's worker in a process of its own, enqueued to one job at a time on a fixed"
        " schedule (after uncounted warm-up jobs), then a burst in one transaction"
        " (bench/doorbells.py). " + "; ".join(f"{f.system}: {f.settings}" for f in found) + ".",
        "",
        *table(found),
    ]


def table(found: Sequence[DoorbellLatency]) -> list[str]:
    """The workload's table, in Markdown."""
    if not found:
        return []
    first = found[0]
    lines = [
        f"| system ({first.paced_jobs} jobs {first.pace_ms:g} ms apart; a burst of"
        f" {first.burst_jobs:,}) | p50 | p95 | p99 | max | burst: last start | burst jobs/s |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    lines += [
        f"| {f.system} | {f.p50_ms:.1f} ms | {f.p95_ms:.1f} ms | {f.p99_ms:.1f} ms |"
        f" {f.max_ms:.1f} ms | {f.burst_last_start_ms:,.0f} ms | {f.burst_per_s:,.0f} |"
        for f in found
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.doorbells", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    parser.add_argument(
        "--database-url",
        help="the server to create the bench databases on (default: DATABASE_URL, else embedded)",
    )
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    server, origin = database.resolve_server(args.database_url)
    with database.own_database(server) as dsn:
        database.prepare(dsn)
        name = f"{database.database_name(dsn)}_{PGQUEUER.name}"
        with database.own_database(dsn, name) as peer_dsn:
            PGQUEUER.install(peer_dsn)
            progress(f"doorbells on the server from {origin}")
            found = measure(dsn, peer_dsn, sizes, progress)
    print("\n".join(table(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""procrastinate: installed by its own schema manager, drained by its workers.

Its best settings here: an async no-op task and a worker concurrency of 10, with a connection
pool big enough that every concurrent job has a connection (its default pool holds 4). A worker
fetches one job per query; a finished job stays in procrastinate_jobs as `succeeded` (its
default), so the work left is the jobs still `todo` or `doing`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from itertools import groupby
from multiprocessing.synchronize import Barrier, Event
from typing import Any

import procrastinate
import psycopg
from procrastinate.types import JSONDict

from ..arrivals import Arrival
from .peer import Peer
from .workers import WorkerReport, failed, until_set

TASK = "bench_noop"
CONCURRENCY = 10
# One connection per concurrent job, one for its LISTEN, one for its heartbeat and polls.
POOL_SIZE = 5
# Jobs per batch_defer call when preloading.
DEFER_CHUNK = 5_000

TABLES = (
    "procrastinate_jobs",
    "procrastinate_events",
    "procrastinate_periodic_defers",
    "procrastinate_workers",
)


def make_app(dsn: str, pool_size: int = 1) -> procrastinate.App:
    connector = procrastinate.PsycopgConnector(conninfo=dsn, min_size=pool_size, max_size=pool_size)
    return procrastinate.App(connector=connector)


def install(dsn: str) -> None:
    """`procrastinate schema --apply`, through its Python API."""

    async def run() -> None:
        async with make_app(dsn).open_async() as app:
            await app.schema_manager.apply_schema_async()

    asyncio.run(run())


def enqueue(dsn: str, arrivals: Sequence[Arrival]) -> None:
    """In bulk, in arrival order within each priority (the order the worker takes them in);
    each job's only argument is its group."""

    async def run() -> None:
        async with make_app(dsn).open_async() as app:
            task = app.task(name=TASK)(noop)
            by_priority = sorted(arrivals, key=lambda a: -a.priority)  # stable: arrival order
            for priority, same in groupby(by_priority, key=lambda a: a.priority):
                jobs: list[JSONDict] = [{"group": a.group} for a in same]
                deferrer = task.configure(priority=priority)
                for first in range(0, len(jobs), DEFER_CHUNK):
                    await deferrer.batch_defer_async(*jobs[first : first + DEFER_CHUNK])

    asyncio.run(run())


async def noop(group: str) -> None:
    """The task; a worker registers its own, which also counts and records."""


def reset(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"truncate {', '.join(TABLES)}")


def worker(dsn: str, name: str, barrier: Barrier, stop: Event, results: Any, record: bool) -> None:
    try:
        report = asyncio.run(_work(dsn, name, barrier, stop, record))
    except BaseException as exc:
        report = failed(name, exc, barrier)
    results.put(report)


async def _work(dsn: str, name: str, barrier: Barrier, stop: Event, record: bool) -> WorkerReport:
    served: list[tuple[str, float]] = []
    handled = 0

    async def run_noop(group: str) -> None:
        nonlocal handled
        handled += 1
        if record:
            served.append((group, time.monotonic()))

    async with make_app(dsn, POOL_SIZE).open_async() as app:
        app.task(name=TASK)(run_noop)
        barrier.wait(timeout=60)
        started = time.monotonic()
        running = asyncio.create_task(
            app.run_worker_async(name=name, concurrency=CONCURRENCY, install_signal_handlers=False)
        )
        await until_set(stop)
        # Cancelling is how procrastinate asks a worker started this way to stop gracefully.
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    return WorkerReport(name=name, started=started, handled=handled, served=served)


PEER = Peer(
    name="procrastinate",
    settings=(
        f"psycopg connector (pool of {POOL_SIZE}), concurrency {CONCURRENCY} per worker"
        " process, async task"
    ),
    install=install,
    enqueue=enqueue,
    reset=reset,
    # Through its partial index on the jobs still todo or doing.
    work_left="select exists (select 1 from procrastinate_jobs"
    " where status in ('todo', 'doing')) as work_left",
    # A job's row stays (as `succeeded`); its triggers log each status change as an event.
    tables=("procrastinate_jobs", "procrastinate_events"),
    worker=worker,
)

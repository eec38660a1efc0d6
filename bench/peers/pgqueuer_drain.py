"""pgqueuer: installed by its own installer, drained by its QueueManagers on its asyncpg driver.

Its best settings on two cores: the asyncpg driver (its psycopg driver is several times slower
here), queue managers side by side in each worker process, each on its own connection (one and
two per process drained 100k jobs alike, four and eight slower), and a dequeue batch of 100,
on uvloop as its own CLI runs them. A finished job leaves the queue table for
pgqueuer_log, so the work left is what the queue table still holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from multiprocessing.synchronize import Barrier, Event
from typing import Any

import asyncpg
import psycopg
import uvloop
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
from pgqueuer.domain.settings import db_settings
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..arrivals import Arrival
from .peer import Peer
from .workers import WorkerReport, failed, until_set

ENTRYPOINT = "bench_noop"
QUEUE_MANAGERS_PER_WORKER = 2
BATCH_SIZE = 100
# Jobs per enqueue statement when preloading.
ENQUEUE_CHUNK = 10_000

TABLES = db_settings()


def connect_kwargs(dsn: str) -> dict[str, Any]:
    """asyncpg takes no libpq connection string: the same settings as keywords."""
    params = conninfo_to_dict(dsn)
    port = params.get("port")
    return {
        "host": params.get("host"),
        "port": int(port) if port else None,
        "user": params.get("user"),
        "password": params.get("password"),
        "database": params.get("dbname"),
    }


async def _with_queries(dsn: str, use: Callable[[Queries], Awaitable[None]]) -> None:
    conn = await asyncpg.connect(**connect_kwargs(dsn))
    try:
        await use(Queries(AsyncpgDriver(conn)))
    finally:
        await conn.close()


def install(dsn: str) -> None:
    """`pgq install`, through its Python API."""

    async def run(queries: Queries) -> None:
        await queries.install()

    asyncio.run(_with_queries(dsn, run))


def enqueue(dsn: str, arrivals: Sequence[Arrival]) -> None:
    """In bulk, in arrival order: each job's payload is its group, its priority the plan's."""

    async def run(queries: Queries) -> None:
        for first in range(0, len(arrivals), ENQUEUE_CHUNK):
            chunk = arrivals[first : first + ENQUEUE_CHUNK]
            await queries.enqueue(
                [ENTRYPOINT] * len(chunk),
                [a.group.encode() for a in chunk],
                [a.priority for a in chunk],
            )

    asyncio.run(_with_queries(dsn, run))


def reset(dsn: str) -> None:
    tables = (TABLES.queue_table, TABLES.queue_table_log, TABLES.statistics_table)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("truncate {}").format(sql.SQL(", ").join(map(sql.Identifier, tables))))


def worker(dsn: str, name: str, barrier: Barrier, stop: Event, results: Any, record: bool) -> None:
    try:
        report = uvloop.run(_work(dsn, name, barrier, stop, record))
    except BaseException as exc:
        report = failed(name, exc, barrier)
    results.put(report)


async def _work(dsn: str, name: str, barrier: Barrier, stop: Event, record: bool) -> WorkerReport:
    conns = [await asyncpg.connect(**connect_kwargs(dsn)) for _ in range(QUEUE_MANAGERS_PER_WORKER)]
    served: list[tuple[str, float]] = []
    handled = 0

    async def noop(job: Job) -> None:
        nonlocal handled
        handled += 1
        if record:
            served.append(((job.payload or b"").decode(), time.monotonic()))

    managers = []
    for conn in conns:
        manager = QueueManager(Queries(AsyncpgDriver(conn)))
        manager.entrypoint(ENTRYPOINT)(noop)
        managers.append(manager)
    try:
        barrier.wait(timeout=60)
        started = time.monotonic()
        runs = [asyncio.create_task(m.run(batch_size=BATCH_SIZE)) for m in managers]
        await until_set(stop)
        for manager in managers:
            manager.shutdown.set()
        await asyncio.gather(*runs)
    finally:
        for conn in conns:
            await conn.close()
    return WorkerReport(name=name, started=started, handled=handled, served=served)


_QUEUE = sql.Identifier(TABLES.queue_table)

PEER = Peer(
    name="pgqueuer",
    settings=(
        f"asyncpg driver, {QUEUE_MANAGERS_PER_WORKER} QueueManagers per worker process"
        f" (a connection each), batch {BATCH_SIZE}, uvloop"
    ),
    install=install,
    enqueue=enqueue,
    reset=reset,
    # Through its partial indexes by status, so polling skips the rows already deleted.
    work_left=sql.SQL(
        "select exists (select 1 from {q} where status = 'queued')"
        " or exists (select 1 from {q} where status = 'picked')"
    )
    .format(q=_QUEUE)
    .as_string(None),
    # A finished job is deleted from the queue table and logged in the log table.
    tables=(TABLES.queue_table, TABLES.queue_table_log),
    worker=worker,
)

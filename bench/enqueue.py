"""Enqueue: the same no-op jobs of one tenant put into each system, one at a time and in batches.

Each way starts from its system's emptied tables and enqueues `enqueue_jobs` jobs, the payload
of job i being ``{"n": i}``; the clock runs from the first call to the last commit (the
connection, the peers' app or driver, are opened before it starts), and the rows are counted
afterwards. The ways:

- ``fairqueue_each``: ``enqueue`` with one job per transaction (an autocommit connection, so
  each call opens, clamps and commits its own), as the application role.
- ``fairqueue_one_transaction``: ``enqueue`` for every job inside one transaction, one commit.
- ``fairqueue_many``: ``enqueue_many`` with `enqueue_batch` jobs per call, each call its own
  transaction.
- ``pgqueuer_each``: ``Queries.enqueue`` with one job per call (asyncpg autocommits each).
- ``pgqueuer_batch``: ``Queries.enqueue`` given lists of `enqueue_batch` jobs per call.
- ``procrastinate_batch``: ``Task.batch_defer_async`` with `enqueue_batch` jobs per call.

Repeats interleave the ways, and each figure is the median of the repeats (the lower middle).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg
import psycopg
import uvloop
from pgqueuer import AsyncpgDriver, Queries
from psycopg import sql

from fairqueue import NewJob, enqueue, enqueue_many
from fairqueue.db import Connection, connect
from fairqueue.stage import Job, Stage

from . import database, load
from .errors import BenchError
from .formats import table
from .peers import PGQUEUER, PROCRASTINATE, pgqueuer_drain, procrastinate_drain
from .sizes import Sizes

Way = Literal[
    "fairqueue_each",
    "fairqueue_one_transaction",
    "fairqueue_many",
    "pgqueuer_each",
    "pgqueuer_batch",
    "procrastinate_batch",
]
WAYS: tuple[Way, ...] = (
    "fairqueue_each",
    "fairqueue_one_transaction",
    "fairqueue_many",
    "pgqueuer_each",
    "pgqueuer_batch",
    "procrastinate_batch",
)
# The pair the target compares: fairqueue's batch enqueue against pgqueuer's.
OURS: Way = "fairqueue_many"
THEIRS: Way = "pgqueuer_batch"

JOB_TYPE = "bench_enqueue"
TENANT = load.tenant_id(0)


def title(way: Way, batch: int) -> str:
    return {
        "fairqueue_each": "fairqueue enqueue, one job per transaction",
        "fairqueue_one_transaction": "fairqueue enqueue, every job in one transaction",
        "fairqueue_many": f"fairqueue enqueue_many, {batch:,} jobs per call",
        "pgqueuer_each": "pgqueuer Queries.enqueue, one job per call",
        "pgqueuer_batch": f"pgqueuer Queries.enqueue, {batch:,} jobs per call",
        "procrastinate_batch": f"procrastinate batch_defer_async, {batch:,} jobs per call",
    }[way]


def system_of(way: Way) -> str:
    return way.split("_", 1)[0]


def per_call(way: Way, sizes: Sizes) -> int:
    return 1 if way.endswith(("_each", "_one_transaction")) else sizes.enqueue_batch


def transactions(way: Way, sizes: Sizes) -> int:
    """How many commits the way makes for its jobs."""
    if way == "fairqueue_one_transaction":
        return 1
    return -(-sizes.enqueue_jobs // per_call(way, sizes))


@dataclass(frozen=True)
class EnqueueRun:
    way: Way
    repeat: int
    jobs: int
    per_call: int
    transactions: int
    seconds: float

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds


def payload(n: int) -> dict[str, int]:
    return {"n": n}


def noop(job: Job) -> None:
    """The stage's handler; never run here."""


# fairqueue: each way on a connection of the application role, as the library's own are.


def _fairqueue_each(dsn: str, sizes: Sizes) -> float:
    with connect(dsn, autocommit=True, as_app_role=True) as conn:
        started = time.perf_counter()
        for n in range(sizes.enqueue_jobs):
            enqueue(conn, JOB_TYPE, payload(n), tenant_id=TENANT)
        return time.perf_counter() - started


def _fairqueue_one_transaction(dsn: str, sizes: Sizes) -> float:
    with connect(dsn, as_app_role=True) as conn:
        started = time.perf_counter()
        for n in range(sizes.enqueue_jobs):
            enqueue(conn, JOB_TYPE, payload(n), tenant_id=TENANT)
        conn.commit()
        return time.perf_counter() - started


def _fairqueue_many(dsn: str, sizes: Sizes) -> float:
    with connect(dsn, autocommit=True, as_app_role=True) as conn:
        started = time.perf_counter()
        for first in range(0, sizes.enqueue_jobs, sizes.enqueue_batch):
            last = min(first + sizes.enqueue_batch, sizes.enqueue_jobs)
            jobs = [NewJob(payload(n)) for n in range(first, last)]
            enqueue_many(conn, JOB_TYPE, jobs, tenant_id=TENANT)
        return time.perf_counter() - started


# pgqueuer: its Queries on its asyncpg driver, on uvloop as its own CLI runs it.


def _pgqueuer(dsn: str, sizes: Sizes, batch: int) -> float:
    entrypoint = pgqueuer_drain.ENTRYPOINT

    async def run() -> float:
        conn = await asyncpg.connect(**pgqueuer_drain.connect_kwargs(dsn))
        try:
            queries = Queries(AsyncpgDriver(conn))
            started = time.perf_counter()
            # Its payload is bytes: encoding the JSON is the caller's part of the work.
            bodies = [json.dumps(payload(n)).encode() for n in range(sizes.enqueue_jobs)]
            if batch == 1:
                for body in bodies:
                    await queries.enqueue(entrypoint, body)
            else:
                for first in range(0, len(bodies), batch):
                    chunk = bodies[first : first + batch]
                    await queries.enqueue([entrypoint] * len(chunk), chunk, [0] * len(chunk))
            return time.perf_counter() - started
        finally:
            await conn.close()

    return uvloop.run(run())


async def _procrastinate_noop(n: int) -> None:
    """The task its jobs name; never run here."""


def _procrastinate_batch(dsn: str, sizes: Sizes) -> float:
    async def run() -> float:
        async with procrastinate_drain.make_app(dsn).open_async() as app:
            task = app.task(name=procrastinate_drain.TASK)(_procrastinate_noop)
            started = time.perf_counter()
            for first in range(0, sizes.enqueue_jobs, sizes.enqueue_batch):
                last = min(first + sizes.enqueue_batch, sizes.enqueue_jobs)
                await task.batch_defer_async(*(payload(n) for n in range(first, last)))
            return time.perf_counter() - started

    return asyncio.run(run())


_TIMED: dict[Way, Callable[[str, Sizes], float]] = {
    "fairqueue_each": _fairqueue_each,
    "fairqueue_one_transaction": _fairqueue_one_transaction,
    "fairqueue_many": _fairqueue_many,
    "pgqueuer_each": lambda dsn, sizes: _pgqueuer(dsn, sizes, 1),
    "pgqueuer_batch": lambda dsn, sizes: _pgqueuer(dsn, sizes, sizes.enqueue_batch),
    "procrastinate_batch": _procrastinate_batch,
}

PEERS_BY_NAME = {PGQUEUER.name: PGQUEUER, PROCRASTINATE.name: PROCRASTINATE}
# Where each system keeps its queued jobs: counted after each way.
_JOB_TABLE = {
    "fairqueue": "fairqueue.jobs",
    "pgqueuer": pgqueuer_drain.TABLES.queue_table,
    "procrastinate": "procrastinate_jobs",
}


def _emptied(way: Way, conn: Connection, dsn: str, peer_dsns: Mapping[str, str]) -> str:
    """Empty the way's system; the DSN its jobs go to."""
    system = system_of(way)
    if system == "fairqueue":
        database.reset(conn)
        return dsn
    PEERS_BY_NAME[system].reset(peer_dsns[system])
    return peer_dsns[system]


def _rows(dsn: str, system: str) -> int:
    schema, _, name = _JOB_TABLE[system].rpartition(".")
    table_name = sql.Identifier(schema, name) if schema else sql.Identifier(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql.SQL("select count(*) from {}").format(table_name)).fetchone()
    assert row is not None
    return int(row[0])


def run_way(
    way: Way, conn: Connection, dsn: str, peer_dsns: Mapping[str, str], sizes: Sizes, repeat: int
) -> EnqueueRun:
    """One timed enqueue of `enqueue_jobs` jobs the given way, into emptied tables."""
    target = _emptied(way, conn, dsn, peer_dsns)
    seconds = _TIMED[way](target, sizes)
    found = _rows(target, system_of(way))
    if found != sizes.enqueue_jobs:
        raise BenchError(f"enqueue {way}: {found} of {sizes.enqueue_jobs} jobs in the table")
    return EnqueueRun(
        way=way,
        repeat=repeat,
        jobs=sizes.enqueue_jobs,
        per_call=per_call(way, sizes),
        transactions=transactions(way, sizes),
        seconds=seconds,
    )


def measure(
    conn: Connection,
    dsn: str,
    peer_dsns: Mapping[str, str],
    sizes: Sizes,
    progress: Callable[[str], None],
) -> list[EnqueueRun]:
    """Every way, `sizes.enqueue_repeats` times, interleaved; fairqueue's tables are left empty."""
    Stage(JOB_TYPE, noop)  # makes the type known to enqueue in this process
    runs: list[EnqueueRun] = []
    for repeat in range(sizes.enqueue_repeats):
        for way in WAYS:
            run = run_way(way, conn, dsn, peer_dsns, sizes, repeat)
            runs.append(run)
            progress(
                f"enqueue {repeat + 1}/{sizes.enqueue_repeats}: {title(way, sizes.enqueue_batch)}:"
                f" {run.jobs_per_s:,.0f} jobs/s"
            )
    database.reset(conn)
    for name, peer in PEERS_BY_NAME.items():
        peer.reset(peer_dsns[name])
    return runs


def medians(runs: list[EnqueueRun]) -> dict[Way, EnqueueRun]:
    """The median run (by jobs/s) of each way, the lower middle of an even number, in WAYS
    order."""
    by_way: dict[Way, list[EnqueueRun]] = {}
    for run in runs:
        by_way.setdefault(run.way, []).append(run)
    picked = {}
    for way in WAYS:
        if way in by_way:
            ordered = sorted(by_way[way], key=lambda r: r.jobs_per_s)
            picked[way] = ordered[(len(ordered) - 1) // 2]
    return picked


def batch_ratio(runs: list[EnqueueRun]) -> float | None:
    """fairqueue's batch enqueue over pgqueuer's, in jobs/s."""
    found = medians(runs)
    if OURS not in found or THEIRS not in found:
        return None
    return found[OURS].jobs_per_s / found[THEIRS].jobs_per_s


def as_json(runs: list[EnqueueRun], sizes: Sizes) -> dict[str, Any]:
    found = medians(runs)
    theirs = found.get(THEIRS)
    return {
        "jobs": sizes.enqueue_jobs,
        "batch": sizes.enqueue_batch,
        "tenant": TENANT,
        "ratio_batch_to_pgqueuer_batch": _rounded(batch_ratio(runs)),
        "rows": [
            {
                "way": way,
                "title": title(way, sizes.enqueue_batch),
                "system": system_of(way),
                "per_call": run.per_call,
                "transactions": run.transactions,
                "seconds": round(run.seconds, 4),
                "jobs_per_s": round(run.jobs_per_s, 1),
                "ratio_to_pgqueuer_batch": _rounded(
                    run.jobs_per_s / theirs.jobs_per_s if theirs else None
                ),
                "jobs_per_s_all_runs": [round(r.jobs_per_s, 1) for r in runs if r.way == way],
            }
            for way, run in found.items()
        ],
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def section(runs: list[EnqueueRun], sizes: Sizes) -> list[str]:
    """The report's enqueue table."""
    found = medians(runs)
    theirs = found.get(THEIRS)
    repeats = (
        "one run" if sizes.enqueue_repeats == 1 else f"the median of {sizes.enqueue_repeats} runs"
    )
    rows = [
        [
            title(way, sizes.enqueue_batch),
            f"{run.per_call:,}",
            f"{run.transactions:,}",
            f"{run.seconds:.3f}",
            f"{run.jobs_per_s:,.0f}",
            f"{run.jobs_per_s / theirs.jobs_per_s:.2f}" if theirs else "-",
        ]
        for way, run in found.items()
    ]
    return [
        f"### Enqueue: {sizes.enqueue_jobs:,} no-op jobs of one tenant",
        "",
        "Each way from its system's emptied tables, timed from the first call to the last"
        " commit with its connection already open (bench/enqueue.py); fairqueue as the"
        f" application role, under the tenant clamp. Each figure is {repeats}.",
        "",
        *table(
            [
                "way",
                "jobs per call",
                "transactions",
                "seconds",
                "jobs/s",
                f"vs pgqueuer, {sizes.enqueue_batch:,} per call",
            ],
            "lrrrrr",
            rows,
        ),
    ]

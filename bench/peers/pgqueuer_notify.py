"""pgqueuer's NOTIFY path for the doorbell bench: one QueueManager on asyncpg in a process of its
own, and the enqueues it answers.

The worker's entrypoint takes the time at its first line (``time.monotonic``, the machine's one
monotonic clock) against the job's payload, the index the enqueuer gave it, and puts the list on
its results queue when it stops. It runs with the drain's batch (bench/peers/pgqueuer_drain.py)
on uvloop, as pgqueuer's own CLI runs it.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Event
from typing import Any

import asyncpg
import uvloop
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager

from ..errors import BenchError
from .pgqueuer_drain import BATCH_SIZE, ENTRYPOINT, connect_kwargs
from .workers import until_set

SETTINGS = f"one QueueManager on asyncpg (its NOTIFY path), batch {BATCH_SIZE}, uvloop"
STOP_TIMEOUT_S = 60.0


def worker(dsn: str, stop: Event, results: Any) -> None:
    try:
        results.put(uvloop.run(_work(dsn, stop)))
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")


async def _work(dsn: str, stop: Event) -> list[tuple[int, float]]:
    conn = await asyncpg.connect(**connect_kwargs(dsn))
    starts: list[tuple[int, float]] = []

    async def started(job: Job) -> None:
        starts.append((int(job.payload or b"-1"), time.monotonic()))

    manager = QueueManager(Queries(AsyncpgDriver(conn)))
    manager.entrypoint(ENTRYPOINT)(started)
    try:
        running = asyncio.create_task(manager.run(batch_size=BATCH_SIZE))
        await until_set(stop)
        manager.shutdown.set()
        await running
    finally:
        await conn.close()
    return starts


@contextmanager
def running_worker(dsn: str) -> Iterator[Callable[[], list[tuple[int, float]]]]:
    """A worker process; the block gets a function that stops it and returns its starts."""
    context = mp.get_context("spawn")
    stop = context.Event()
    results = context.Queue()
    process = context.Process(target=worker, args=(dsn, stop, results), name="pgqueuer-notify")
    process.start()

    def stopped() -> list[tuple[int, float]]:
        stop.set()
        found = results.get(timeout=STOP_TIMEOUT_S)
        if isinstance(found, str):
            raise BenchError(f"the pgqueuer worker failed: {found}")
        return list(found)

    try:
        yield stopped
    finally:
        stop.set()
        process.join(timeout=STOP_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()


class Enqueuer:
    """Enqueues on one asyncpg connection, each call its own transaction; returns the time its
    commit returned."""

    def __init__(self, dsn: str) -> None:
        self._loop = uvloop.new_event_loop()
        self._conn = self._loop.run_until_complete(asyncpg.connect(**connect_kwargs(dsn)))
        self._queries = Queries(AsyncpgDriver(self._conn))

    def one(self, index: int) -> float:
        self._loop.run_until_complete(self._queries.enqueue(ENTRYPOINT, str(index).encode()))
        return time.monotonic()

    def burst(self, indexes: range) -> float:
        bodies = [str(i).encode() for i in indexes]
        self._loop.run_until_complete(
            self._queries.enqueue([ENTRYPOINT] * len(bodies), bodies, [0] * len(bodies))
        )
        return time.monotonic()

    def close(self) -> None:
        self._loop.run_until_complete(self._conn.close())
        self._loop.close()

"""A peer's worker processes: started together, stopped when the parent sees no work left.

Each worker is a process started with ``spawn``, as bench/throughput.py starts fairqueue's, so
none shares a GIL or a connection with another. The workers and the parent meet at a barrier;
from there the parent asks the peer's database every POLL_S seconds whether work is left, and
when none is, notes the time and sets the stop event. A drain's time runs from the first worker
leaving the barrier (just before its first claim) to that moment (just after the last
completion committed, within one poll).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier, Event

import psycopg
from psycopg import sql

from ..arrivals import Arrival, no_op_jobs
from ..errors import BenchError
from ..throughput import collect
from .peer import Peer

POLL_S = 0.02
# Longest a drain may take before it counts as hung, and a worker may take to start or stop.
DRAIN_TIMEOUT_S = 900.0
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class WorkerReport:
    name: str
    started: float
    handled: int
    # With `record`: (group, time.monotonic()) of each job as its handler ran, in that order.
    served: list[tuple[str, float]] = field(default_factory=list)
    # Why the worker could not run the drain.
    error: str | None = None


def failed(name: str, error: BaseException, barrier: Barrier) -> WorkerReport:
    """A worker that could not run: the others stop waiting for it at the barrier."""
    barrier.abort()
    text = "".join(traceback.format_exception_only(error)).strip()
    return WorkerReport(name=name, started=0.0, handled=0, error=text[-500:])


@dataclass(frozen=True)
class WorkerRun:
    peer: str
    workers: int
    jobs: int
    started: float
    drained: float
    handled: int
    # With `record`: every worker's served list, merged in time order.
    served: list[tuple[str, float]]

    @property
    def seconds(self) -> float:
        return self.drained - self.started


async def until_set(stop: Event, poll_s: float = 0.01) -> None:
    """Returns once the parent's stop event is set, without blocking the worker's event loop."""
    while not stop.is_set():
        await asyncio.sleep(poll_s)


def run_workers(
    peer: Peer, dsn: str, workers: int, jobs: int, *, record: bool = False
) -> WorkerRun:
    """Drain what is enqueued in `dsn` with `workers` processes of the peer's worker."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    stop = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=peer.worker,
            args=(dsn, f"bench:{peer.name}:{k}", barrier, stop, results, record),
            name=f"bench-{peer.name}-{k}",
        )
        for k in range(workers)
    ]
    for p in procs:
        p.start()
    drained: float | None = None
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            barrier.wait(timeout=START_TIMEOUT_S)
            drained = _wait_until_drained(conn, peer, procs)
    except threading.BrokenBarrierError:
        pass  # a worker failed before the start; its report says why
    finally:
        stop.set()
    reports = collect(procs, results, timeout_s=STOP_TIMEOUT_S)
    errors = sorted({r.error for r in reports if r.error})
    if drained is None or len(reports) != workers or errors:
        raise BenchError(
            f"{peer.name} x{workers}: {len(reports)} of {workers} workers reported"
            f" (exit codes {[p.exitcode for p in procs]}); errors: {errors}"
        )
    handled = sum(r.handled for r in reports)
    if handled != jobs:
        raise BenchError(f"{peer.name} x{workers}: {handled} of {jobs} jobs handled")
    return WorkerRun(
        peer=peer.name,
        workers=workers,
        jobs=jobs,
        started=min(r.started for r in reports),
        drained=drained,
        handled=handled,
        served=sorted((s for r in reports for s in r.served), key=lambda s: s[1]),
    )


def _wait_until_drained(
    conn: psycopg.Connection[tuple[bool]], peer: Peer, procs: Sequence[mp.process.BaseProcess]
) -> float | None:
    """The time the peer's queue was first seen empty; None when its workers died first."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        row = conn.execute(peer.work_left).fetchone()
        now = time.monotonic()
        if row is not None and not row[0]:
            return now
        if not any(p.is_alive() for p in procs):
            return None
        time.sleep(POLL_S)
    raise BenchError(f"{peer.name}: not drained after {DRAIN_TIMEOUT_S:.0f} s")


def drain(
    peer: Peer, dsn: str, arrivals: Sequence[Arrival], workers: int, *, record: bool = False
) -> WorkerRun:
    """Empty the peer's tables, enqueue `arrivals`, then drain them with `workers` processes."""
    peer.reset(dsn)
    peer.enqueue(dsn, arrivals)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # What autovacuum would eventually do, done before timing, as for fairqueue's tables.
        for table in peer.tables:
            conn.execute(sql.SQL("vacuum (analyze) {}").format(sql.Identifier(table)))
    return run_workers(peer, dsn, workers, len(arrivals), record=record)


@dataclass(frozen=True)
class PeerDrain:
    peer: str
    workers: int
    repeat: int
    jobs: int
    seconds: float
    done: int

    @property
    def done_per_s(self) -> float:
        return self.done / self.seconds


def timed_drain(peer: Peer, dsn: str, jobs: int, workers: int, repeat: int = 0) -> PeerDrain:
    """The drain workload: `jobs` no-op jobs preloaded, then drained by `workers` processes."""
    run = drain(peer, dsn, no_op_jobs(jobs), workers)
    return PeerDrain(
        peer=peer.name,
        workers=workers,
        repeat=repeat,
        jobs=jobs,
        seconds=run.seconds,
        done=run.handled,
    )

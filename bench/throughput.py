"""Throughput: drain a preloaded backlog with 1..N concurrent invocations, each its own process.

The loops drain the same number of no-op jobs with the same batch size:

- ``fairqueue``: `fairqueue.run_pipeline` with a no-op Stage (concurrency 1), as a cron
  invocation runs it: fair claim, then the handlers, then the jobs marked done. Its jobs are
  the peers' jobs: no tenant, no group.
- ``fairqueue_groups``: the same, over jobs spread across every tenant and group of the load
  (1,000 groups of 200 tenants in the full run): what many groups and tenants cost the claim
  and the per-tenant statements; ``fairqueue_groups_q4`` with a quantum of 4.
- ``fairqueue_widest_q4``: quantum 4 over the widest load (100,000 groups of 20,000 tenants in
  the full run, a job a group): every job its group's last, so a batch writes a standing a job.
- ``bare``: this machine's ceiling. A minimal table (bench.bare_jobs), ``FOR UPDATE SKIP
  LOCKED`` in ``run_after`` order through a partial index, no fairness, the batch completed by
  one UPDATE.
- ``bare on fairqueue.jobs``: the same bare loop on the library's table (its indexes and the
  served trigger), to split the gap between schema cost and claim/completion cost.

Invocations are processes started with ``spawn`` (no GIL shared, no inherited connections).
Each connects, waits at a barrier, then drains until its claim comes back empty; the wall
time is from the first start to the last finish (``time.monotonic`` is system-wide on Linux).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.synchronize import Barrier
from typing import Any, Literal

import psycopg

from fairqueue.db import Connection, connect
from fairqueue.pipeline import run_pipeline
from fairqueue.stage import FairShare, Job, Stage

from . import database, load
from .errors import BenchError
from .sizes import Sizes

Loop = Literal[
    "bare",
    "bare_jobs",
    "fairqueue",
    "fairqueue_groups",
    "fairqueue_groups_q4",
    "fairqueue_widest_q4",
]
# In the order they run and are shown: the ceiling first.
LOOPS: tuple[Loop, ...] = (
    "bare",
    "bare_jobs",
    "fairqueue",
    "fairqueue_groups",
    "fairqueue_groups_q4",
    "fairqueue_widest_q4",
)
FAIRQUEUE_LOOPS: tuple[Loop, ...] = (
    "fairqueue",
    "fairqueue_groups",
    "fairqueue_groups_q4",
    "fairqueue_widest_q4",
)
# The loops over many groups, and the quantum each one's stage takes.
GROUP_LOOPS: dict[Loop, int] = {
    "fairqueue_groups": 1,
    "fairqueue_groups_q4": 4,
    "fairqueue_widest_q4": 4,
}
LOOP_TITLES: dict[Loop, str] = {
    "fairqueue": "fairqueue run_pipeline",
    "fairqueue_groups": "fairqueue run_pipeline, jobs in many groups and tenants",
    "fairqueue_groups_q4": "the same, Stage(quantum=4)",
    "fairqueue_widest_q4": "the same over the widest load (a job or so a group), quantum 4",
    "bare": "bare SKIP LOCKED loop (ceiling)",
    "bare_jobs": "bare loop on fairqueue.jobs",
}

JOB_TYPE = "bench_noop"


def settings(batch: int, sizes: Sizes) -> dict[str, str]:
    """How the loops run, for the report."""
    return {
        "bare": f"psycopg, batch {batch}: FOR UPDATE SKIP LOCKED through a partial index on a"
        " minimal table, no fairness, the batch completed by one UPDATE",
        "bare_jobs": f"the bare loop (batch {batch}) on fairqueue.jobs",
        "fairqueue": f"run_pipeline with a no-op Stage (batch {batch}, concurrency 1), one"
        " invocation after another per worker process: fair claim (plan, served, age) and"
        " tenant clamps, as a cron invocation runs it; the jobs have no tenant and no group,"
        " like the peers'",
        "fairqueue_groups": f"the same over jobs spread evenly across {sizes.groups:,} groups"
        f" of {sizes.tenants:,} tenants (mixed plans): each claim ranks every group with work,"
        " and a batch is read and marked done under each of its tenants' clamps in turn",
        "fairqueue_groups_q4": "the same with Stage(quantum=4): the group at the top of the"
        " order gives up to 4 jobs in a row",
        "fairqueue_widest_q4": f"the same (quantum 4) over {widest(sizes).groups:,} groups of"
        f" {widest(sizes).tenants:,} tenants: about a job a group, so every claimed job is its"
        " group's last and a batch writes a standing for each",
    }


LEASE_S = 300.0
# Longest a drain may take before it counts as hung.
DRAIN_TIMEOUT_S = 600.0
# Runs of one invocation that may stop on an error before the drain counts as failed.
MAX_RUN_ERRORS = 100

BARE_CLAIM = """
with picked as (
    select id from bench.bare_jobs
     where status = 'pending' and run_after <= now()
     order by run_after
     limit %(batch)s
       for update skip locked
)
update bench.bare_jobs b
   set status = 'running', attempts = b.attempts + 1, locked_at = now(), locked_by = %(by)s
  from picked
 where b.id = picked.id
returning b.id
"""

BARE_COMPLETE = """
update bench.bare_jobs set status = 'done', finished_at = now()
 where id = any(%(ids)s) and status = 'running' and locked_by = %(by)s
"""

BARE_JOBS_CLAIM = """
with picked as (
    select id from fairqueue.jobs
     where type = %(type)s and status = 'pending' and run_after <= now()
     order by run_after
     limit %(batch)s
       for update skip locked
)
update fairqueue.jobs j
   set status = 'running', attempts = j.attempts + 1, locked_at = now(),
       lease_until = now() + %(lease_s)s * interval '1 second', locked_by = %(by)s
  from picked
 where j.id = picked.id
returning j.id
"""

BARE_JOBS_COMPLETE = """
update fairqueue.jobs set status = 'done', finished_at = now(), lease_until = null
 where id = any(%(ids)s::uuid[]) and status = 'running' and locked_by = %(by)s
"""

BARE_PRELOAD = f"""
insert into bench.bare_jobs (payload, run_after)
select jsonb_build_object('n', i), {load.CREATED_AT}
  from generate_series(1, %(count)s::bigint) as i
"""


@dataclass(frozen=True)
class WorkerResult:
    name: str
    started: float
    finished: float
    claimed: int
    done: int
    claims: int
    # fairqueue: seconds spent running batches (the handlers and marking the jobs done).
    batch_seconds: float
    # fairqueue: errors of runs that stopped on one (the invocation then started another).
    run_errors: list[str] = field(default_factory=list)
    # Why the invocation could not finish the drain at all.
    error: str | None = None


@dataclass(frozen=True)
class Drain:
    loop: Loop
    invocations: int
    repeat: int
    jobs: int
    batch: int
    seconds: float
    claimed: int
    done: int
    claims: int
    # fairqueue only: share of the invocations' time spent running batches (handlers and
    # marking jobs done); the rest is claiming (and opening/closing the run).
    completion_share: float | None
    # fairqueue only: runs that stopped on an error (and were followed by another), and one of
    # those errors.
    run_errors: int = 0
    run_error_example: str | None = None

    @property
    def claimed_per_s(self) -> float:
        return self.claimed / self.seconds

    @property
    def done_per_s(self) -> float:
        return self.done / self.seconds


def noop(job: Job) -> None:
    """The work of a no-op job: none."""


def _bare_drain(
    conn: psycopg.Connection[Any], claim: str, complete: str, params: dict[str, Any]
) -> tuple[int, int, int]:
    """Claim a batch, complete it in one statement, until a claim comes back empty."""
    claimed = done = claims = 0
    while True:
        ids = [row[0] for row in conn.execute(claim, params).fetchall()]
        claims += 1
        if not ids:
            return claimed, done, claims
        claimed += len(ids)
        done += conn.execute(complete, {**params, "ids": ids}).rowcount


def _fairqueue_invocation(
    dsn: str, batch: int, name: str, barrier: Barrier, quantum: int, fair_share: FairShare
) -> WorkerResult:
    """run_pipeline until the backlog is drained, the stage's quantum and level of the fair
    order (Stage.fair_share) as given. A run that stops
    on an error is followed by another on the same connection, as the next cron tick would start
    one; its error is kept."""
    # The pipeline logs a run's error with its traceback; the result carries it instead.
    logging.getLogger("fairqueue").setLevel(logging.CRITICAL)
    stage = Stage(
        JOB_TYPE,
        noop,
        batch=batch,
        concurrency=1,
        lease_s=LEASE_S,
        quantum=quantum,
        fair_share=fair_share,
    )
    claimed = done = batches = 0
    batch_seconds = 0.0
    run_errors: list[str] = []
    with connect(dsn, autocommit=True) as conn:
        barrier.wait(timeout=60)
        started = time.monotonic()
        while True:
            run = run_pipeline(
                dsn, [stage], conn=conn, time_budget_s=DRAIN_TIMEOUT_S, trigger="bench"
            )
            tally = run.summary["stages"].get(JOB_TYPE, {})
            claimed += int(tally.get("claimed", 0))
            done += run.jobs_done
            batches += int(tally.get("batches", 0))
            batch_seconds += float(tally.get("seconds", 0.0))
            if run.stop_reason == "no_work":
                break
            fatal = run.stop_reason != "error" or len(run_errors) >= MAX_RUN_ERRORS
            if fatal:
                why = f"run stopped with {run.stop_reason}: {run.error}"
                return WorkerResult(name, 0.0, 0.0, 0, 0, 0, 0.0, error=why)
            run_errors.append(_first_lines(run.error or "error"))
        finished = time.monotonic()
    return WorkerResult(
        name=name,
        started=started,
        finished=finished,
        claimed=claimed,
        done=done,
        claims=batches + 1,  # the last claim found nothing
        batch_seconds=batch_seconds,
        run_errors=run_errors,
    )


def _first_lines(text: str, lines: int = 2) -> str:
    return "\n".join(text.strip().splitlines()[:lines])


def _bare_invocation(loop: Loop, dsn: str, batch: int, name: str, barrier: Barrier) -> WorkerResult:
    if loop == "bare":
        claim, complete = BARE_CLAIM, BARE_COMPLETE
    else:
        claim, complete = BARE_JOBS_CLAIM, BARE_JOBS_COMPLETE
    params = {"batch": batch, "by": name, "type": JOB_TYPE, "lease_s": LEASE_S}
    with psycopg.connect(dsn, autocommit=True) as conn:
        barrier.wait(timeout=60)
        started = time.monotonic()
        claimed, done, claims = _bare_drain(conn, claim, complete, params)
        finished = time.monotonic()
    return WorkerResult(name, started, finished, claimed, done, claims, batch_seconds=0.0)


def worker(
    loop: Loop,
    dsn: str,
    batch: int,
    name: str,
    barrier: Barrier,
    results: Any,
    quantum: int = 1,
    fair_share: FairShare = "group",
) -> None:
    """One invocation, in its own process: connect, wait for the others, drain, report."""
    try:
        if loop in FAIRQUEUE_LOOPS:
            turn = GROUP_LOOPS.get(loop, quantum)
            result = _fairqueue_invocation(dsn, batch, name, barrier, turn, fair_share)
        else:
            result = _bare_invocation(loop, dsn, batch, name, barrier)
    except BaseException as exc:
        text = "".join(traceback.format_exception(exc))[-2000:]
        result = WorkerResult(name, 0.0, 0.0, 0, 0, 0, 0.0, error=text)
    results.put(result)


def widest(sizes: Sizes) -> Sizes:
    """The owners of the widest drain: ``widest_tenants`` tenants of the load's groups each."""
    return replace(sizes, tenants=sizes.widest_tenants)


def preload(conn: Connection, sizes: Sizes, loop: Loop) -> None:
    database.reset(conn)
    if loop == "bare":
        conn.execute(BARE_PRELOAD, {"count": sizes.throughput_jobs})
        database.vacuum_analyze(conn, "bench.bare_jobs")
        return
    if loop == "fairqueue_widest_q4":
        owners = widest(sizes)
        load.insert_owners(conn, owners)
        load.insert_pending(conn, owners, JOB_TYPE, sizes.throughput_jobs)
    elif loop in GROUP_LOOPS:
        load.create_owners(conn, sizes)
        load.insert_pending(conn, sizes, JOB_TYPE, sizes.throughput_jobs)
    else:
        load.insert_pending_unowned(conn, JOB_TYPE, sizes.throughput_jobs)
    database.vacuum_analyze(
        conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants", "fairqueue.groups"
    )


def collect(
    procs: Sequence[mp.process.BaseProcess],
    results: Any,
    timeout_s: float = DRAIN_TIMEOUT_S + 60,
) -> list[Any]:
    """What each process put on `results`, until all have or `timeout_s` has passed."""
    found: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(found) < len(procs):
        try:
            found.append(results.get(timeout=1.0))
        except queue.Empty:
            gone = time.monotonic() > deadline or not any(p.is_alive() for p in procs)
            if gone and results.empty():
                break
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.terminate()
    return found


def run_invocations(
    dsn: str,
    loop: Loop,
    batch: int,
    invocations: int,
    jobs: int,
    quantum: int = 1,
    fair_share: FairShare = "group",
) -> list[WorkerResult]:
    """Drain what is already enqueued with `invocations` processes (fairqueue's stage with the
    given quantum and level); check all `jobs` got done."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(invocations)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=worker,
            args=(loop, dsn, batch, f"bench:{loop}:{k}", barrier, results, quantum, fair_share),
            name=f"bench-{loop}-{k}",
        )
        for k in range(invocations)
    ]
    for p in procs:
        p.start()
    found: list[WorkerResult] = collect(procs, results)
    errors = [f"{r.name}: {r.error}" for r in found if r.error]
    if len(found) != invocations or errors:
        codes = [p.exitcode for p in procs]
        raise BenchError(
            f"{loop} x{invocations}: {len(found)} of {invocations} invocations reported"
            f" (exit codes {codes}); errors: {errors}"
        )
    done = sum(r.done for r in found)
    if done != jobs:
        raise BenchError(f"{loop} x{invocations}: {done} of {jobs} jobs done")
    return found


def drain(
    conn: Connection, dsn: str, sizes: Sizes, loop: Loop, invocations: int, repeat: int = 0
) -> Drain:
    """Preload the backlog, drain it with `invocations` processes, check every job is done."""
    preload(conn, sizes, loop)
    return drain_preloaded(dsn, sizes, loop, invocations, repeat)


def drain_preloaded(
    dsn: str,
    sizes: Sizes,
    loop: Loop,
    invocations: int,
    repeat: int = 0,
    quantum: int = 1,
    fair_share: FairShare = "group",
) -> Drain:
    """Drain the backlog already loaded with `invocations` processes, check every job is done."""
    found = run_invocations(
        dsn, loop, sizes.throughput_batch, invocations, sizes.throughput_jobs, quantum, fair_share
    )
    seconds = max(r.finished for r in found) - min(r.started for r in found)
    busy = sum(r.finished - r.started for r in found)
    return Drain(
        loop=loop,
        invocations=invocations,
        repeat=repeat,
        jobs=sizes.throughput_jobs,
        batch=sizes.throughput_batch,
        seconds=seconds,
        claimed=sum(r.claimed for r in found),
        done=sum(r.done for r in found),
        claims=sum(r.claims for r in found),
        completion_share=(sum(r.batch_seconds for r in found) / busy)
        if loop in FAIRQUEUE_LOOPS
        else None,
        run_errors=sum(len(r.run_errors) for r in found),
        run_error_example=next((e for r in found for e in r.run_errors), None),
    )


def medians(drains: list[Drain]) -> list[Drain]:
    """The median run (by completed/s) of each loop and invocation count; the lower of the two
    middle runs when there is an even number."""
    runs: dict[tuple[Loop, int], list[Drain]] = {}
    for d in drains:
        runs.setdefault((d.loop, d.invocations), []).append(d)
    picked = []
    for group in runs.values():
        ordered = sorted(group, key=lambda d: d.done_per_s)
        picked.append(ordered[(len(ordered) - 1) // 2])
    return picked

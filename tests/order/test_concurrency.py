"""Overlapping invocations: the database decides who runs a job, and every job runs once.

Each thread has its own connection; nothing is mocked. Overlapping runs are normal in
production (a slow run and the next tick), so they must end healthy, not just correct.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from uuid import UUID

from fairqueue import Job, RunResult, Stage, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.groups import pause_group
from fairqueue.pipeline.claim import ClaimedJob, claim_batch
from fairqueue.plans import set_plan
from support.rows import age_job, count_all, runs

JOIN_TIMEOUT_S = 60


def add(conn: Connection, job_type: str, payload: dict[str, Any], **options: Any) -> UUID:
    """Enqueue a job that must be new; its id."""
    job_id = enqueue(conn, job_type, payload, **options)
    assert job_id is not None
    return job_id


def run_threads(targets: list[Callable[[], Any]]) -> list[Any]:
    """Start every target at once (a barrier), wait for all; re-raise the first error."""
    barrier = threading.Barrier(len(targets))
    results: list[Any] = [None] * len(targets)
    errors: list[BaseException] = []

    def wrap(i: int, target: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(i, t)) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]
    return results


class Recorder:
    """A thread-safe list of the job ids a handler saw."""

    def __init__(self) -> None:
        self.ids: list[UUID] = []
        self._lock = threading.Lock()

    def __call__(self, job: Job) -> None:
        with self._lock:
            self.ids.append(job.id)
        time.sleep(0.001)  # long enough for the other runs to interleave


def test_concurrent_pipelines_run_every_job_exactly_once_and_stop_healthy(
    dsn: str, conn: Connection
) -> None:
    # Tenants of different plans, jobs spread over several groups.
    workers, jobs = 4, 300
    record = Recorder()
    stage = Stage("conc_each_once", handler=record, batch=10, concurrency=2)
    for tenant, plan in (("t-free", "free"), ("t-pro", "pro")):
        set_plan(conn, tenant, plan)
    enqueued = {
        add(
            conn,
            stage.name,
            {"n": n},
            tenant_id=("t-free", "t-pro", None)[n % 3],
            group_id=f"g{n % 8}",
        )
        for n in range(jobs)
    }

    def one_run() -> RunResult:
        return run_pipeline(dsn, [stage], trigger="manual")

    results: list[RunResult] = run_threads([one_run] * workers)

    executed = Counter(record.ids)
    assert set(executed) == enqueued
    assert [i for i, n in executed.items() if n > 1] == []
    assert count_all(conn, "status = 'done'") == jobs
    assert count_all(conn, "attempts <> 1") == 0
    assert sum(r.jobs_done for r in results) == jobs
    rows = runs(conn)
    assert len(rows) == workers
    assert {r["id"] for r in rows} == {r.run_id for r in results}
    assert all(r["finished_at"] is not None for r in rows)
    assert [(r["stop_reason"], r["error"]) for r in rows] == [("no_work", None)] * workers
    assert sum(r["jobs_done"] for r in rows) == jobs


def test_two_overlapping_claimers_split_what_is_claimable(conn: Connection, dsn: str) -> None:
    stage = Stage("conc_split", handler=lambda job: None, max_attempts=2)
    claimable = {add(conn, stage.name, {"n": n}) for n in range(36)}
    # Running with an expired lease and an attempt left: claimable again.
    rescued = add(conn, stage.name, {"rescue": True})
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_by = 'gone',"
        " lease_until = now() - interval '1 minute' where id = %s",
        (rescued,),
    )
    claimable.add(rescued)
    # Not claimable: not due, running under a live lease, lease expired on the last attempt,
    # paused group, finished, another type.
    later = add(conn, stage.name, {"later": True})
    age_job(conn, later, run_after=-3600)
    live, last = (add(conn, stage.name, {"k": k}) for k in ("live", "last"))
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_by = 'other',"
        " lease_until = now() + interval '1 hour' where id = %s",
        (live,),
    )
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 2, locked_by = 'gone',"
        " lease_until = now() - interval '1 minute' where id = %s",
        (last,),
    )
    pause_group(conn, "conc-paused")
    add(conn, stage.name, {"paused": True}, group_id="conc-paused")
    finished = add(conn, stage.name, {"done": True})
    conn.execute("update fairqueue.jobs set status = 'done' where id = %s", (finished,))
    Stage("conc_split_other", handler=lambda job: None)
    add(conn, "conc_split_other", {})
    before = {
        r["id"]: (r["status"], r["attempts"])
        for r in conn.execute("select id, status, attempts from fairqueue.jobs").fetchall()
    }

    def claimer(name: str) -> Callable[[], list[ClaimedJob]]:
        def claim() -> list[ClaimedJob]:
            with connect(dsn, autocommit=True) as own:
                # Each may take 25 of the 37: together they could take 50, so nothing claimable
                # may be left over, and neither may take what the other took.
                return claim_batch(own, stage.name, batch=25, lease_s=60, locked_by=name)

        return claim

    first, second = run_threads([claimer("claimer-a"), claimer("claimer-b")])

    a = {j.id for j in first}
    b = {j.id for j in second}
    assert len(a) == len(first)
    assert len(b) == len(second)
    assert a & b == set()
    assert a | b == claimable
    by_id = {j.id: j for j in [*first, *second]}
    for job_id in claimable:
        assert by_id[job_id].attempts == before[job_id][1] + 1
    owners = {
        r["id"]: r["locked_by"]
        for r in conn.execute(
            "select id, locked_by from fairqueue.jobs where id = any(%s)", (list(claimable),)
        ).fetchall()
    }
    assert {i for i, o in owners.items() if o == "claimer-a"} == a
    assert {i for i, o in owners.items() if o == "claimer-b"} == b
    after = {
        r["id"]: (r["status"], r["attempts"])
        for r in conn.execute("select id, status, attempts from fairqueue.jobs").fetchall()
    }
    untouched = set(before) - claimable
    assert {i: after[i] for i in untouched} == {i: before[i] for i in untouched}


def test_overlapping_claimers_over_many_groups_do_not_deadlock(conn: Connection, dsn: str) -> None:
    # Each claim bumps a served counter row per group it took from. Two claims taking from the
    # same groups in a different order must not wait on each other in a cycle.
    stage = Stage("conc_groups", handler=lambda job: None)
    claimers, rounds = 4, 6
    for _ in range(rounds):
        conn.execute("delete from fairqueue.jobs")
        for n in range(200):
            add(conn, stage.name, {"n": n}, group_id=f"grp-{n % 8}")

        def drain(name: str) -> Callable[[], list[UUID]]:
            def claim_until_empty() -> list[UUID]:
                taken: list[UUID] = []
                with connect(dsn, autocommit=True) as own:
                    while batch := claim_batch(
                        own, stage.name, batch=10, lease_s=60, locked_by=name
                    ):
                        taken.extend(j.id for j in batch)
                return taken

            return claim_until_empty

        taken = run_threads([drain(f"c{i}") for i in range(claimers)])
        flat = [i for t in taken for i in t]
        assert len(flat) == len(set(flat)) == 200
    served = conn.execute(
        "select group_key, n from fairqueue.served where type = %s order by 1", (stage.name,)
    ).fetchall()
    assert [(r["group_key"], r["n"]) for r in served] == [(f"/grp-{g}", 25) for g in range(8)]


def test_a_stage_never_runs_more_handlers_at_once_than_its_concurrency(
    dsn: str, conn: Connection
) -> None:
    lock = threading.Lock()
    in_flight = 0
    peak = 0
    ran: list[UUID] = []

    def handler(job: Job) -> None:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
            ran.append(job.id)
        try:
            time.sleep(0.05)
        finally:
            with lock:
                in_flight -= 1

    stage = Stage("conc_limit", handler=handler, concurrency=3, batch=9)
    ids = {add(conn, stage.name, {"n": n}) for n in range(18)}

    result = run_pipeline(dsn, [stage], trigger="manual")

    assert result.stop_reason == "no_work"
    assert result.jobs_done == 18
    assert set(ran) == ids
    assert len(ran) == 18
    assert peak == 3
    assert result.summary["stages"][stage.name]["batches"] == 2
    assert count_all(conn, "status = 'done'") == 18

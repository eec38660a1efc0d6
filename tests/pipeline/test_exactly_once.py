"""A job's writes through job.conn land once: they commit in the transaction that marks the job
done, and roll back when the run no longer holds the job, however often the job ran."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from fairqueue import Job, RunResult, Stage, enqueue, run_pipeline
from fairqueue.db import Connection
from support.rows import job

WAIT_S = 30.0


@pytest.fixture
def effects(conn: Connection) -> Iterator[None]:
    """An application table that handlers write to, as the application role."""
    conn.execute(
        "create table public.effects (job_id uuid not null, attempt integer not null,"
        " tenant_id text)"
    )
    conn.execute("grant select, insert on public.effects to fairqueue_app")
    yield
    conn.execute("drop table public.effects")


def written(conn: Connection) -> list[tuple[UUID, int]]:
    rows = conn.execute("select job_id, attempt from public.effects order by attempt").fetchall()
    return [(r["job_id"], r["attempt"]) for r in rows]


def wait_until_lease_ran_out(conn: Connection, job_id: UUID) -> None:
    deadline = time.monotonic() + WAIT_S
    while not conn.execute(
        "select lease_until < now() as out from fairqueue.jobs where id = %s", (job_id,)
    ).fetchone()["out"]:
        assert time.monotonic() < deadline, "the lease never ran out"
        time.sleep(0.05)


class SlowFirstAttempt:
    """Writes a row per attempt through job.conn and enqueues a follow-up; the first attempt
    then waits, past its timeout and its lease, until the test lets it return."""

    def __init__(self) -> None:
        self.first_wrote = threading.Event()
        self.release = threading.Event()

    def __call__(self, job: Job) -> None:
        assert job.conn is not None
        job.conn.execute(
            "insert into public.effects values (%s, %s, %s)", (job.id, job.attempts, job.tenant_id)
        )
        job.enqueue("once_follow_up", {"after": str(job.id), "attempt": job.attempts})
        if job.attempts == 1:
            self.first_wrote.set()
            assert self.release.wait(WAIT_S)


FOLLOW_UP = Stage("once_follow_up", handler=lambda job: None)


def first_run_in_background(dsn: str, stage: Stage) -> tuple[threading.Thread, list[RunResult]]:
    results: list[RunResult] = []
    thread = threading.Thread(target=lambda: results.append(run_pipeline(dsn, [stage])))
    thread.start()
    return thread, results


@pytest.mark.timeout(120)
def test_a_handler_past_its_timeout_writes_nothing_once_another_run_finished_its_job(
    dsn: str, conn: Connection, effects: None
) -> None:
    handler = SlowFirstAttempt()
    # Past its job_timeout_s the run stops keeping the job's lease, so another run may take it.
    stage = Stage("once_slow", handler=handler, lease_s=1.0, job_timeout_s=0.5, max_attempts=3)
    job_id = enqueue(conn, stage.name, {}, tenant_id="acme")
    assert job_id is not None

    thread, first = first_run_in_background(dsn, stage)
    try:
        assert handler.first_wrote.wait(WAIT_S)
        wait_until_lease_ran_out(conn, job_id)
        second = run_pipeline(dsn, [stage])
    finally:
        handler.release.set()
        thread.join(WAIT_S)

    assert (second.jobs_done, second.stop_reason) == (1, "no_work")
    (first_result,) = first
    assert first_result.jobs_done == 0
    assert first_result.summary["stages"]["once_slow"]["lost"] == 1
    # The first attempt's row and follow-up went back with its lost completion.
    assert written(conn) == [(job_id, 2)]
    follow_ups = conn.execute(
        "select payload, tenant_id, status from fairqueue.jobs where type = 'once_follow_up'"
    ).fetchall()
    assert follow_ups == [
        {"payload": {"after": str(job_id), "attempt": 2}, "tenant_id": "acme", "status": "pending"}
    ]
    done = job(conn, job_id)
    assert (done["status"], done["attempts"], done["run_id"]) == ("done", 2, second.run_id)


@pytest.mark.timeout(120)
def test_a_last_attempt_given_up_while_its_handler_still_ran_writes_nothing(
    dsn: str, conn: Connection, effects: None
) -> None:
    handler = SlowFirstAttempt()
    gave_up: list[tuple[UUID, str]] = []
    stage = Stage(
        "once_last",
        handler=handler,
        lease_s=1.0,
        job_timeout_s=0.5,
        max_attempts=1,
        on_give_up=lambda given, error: gave_up.append((given.id, error)),
    )
    job_id = enqueue(conn, stage.name, {}, tenant_id="acme")
    assert job_id is not None

    thread, first = first_run_in_background(dsn, stage)
    try:
        assert handler.first_wrote.wait(WAIT_S)
        wait_until_lease_ran_out(conn, job_id)
        # No attempt left: the next run's sweep fails the job and calls its give-up hook.
        sweep = run_pipeline(dsn, [stage])
    finally:
        handler.release.set()
        thread.join(WAIT_S)

    assert sweep.jobs_failed == 1
    assert [given for given, _ in gave_up] == [job_id]
    (first_result,) = first
    assert (first_result.jobs_done, first_result.jobs_failed) == (0, 0)
    assert first_result.summary["stages"]["once_last"]["lost"] == 1
    assert written(conn) == []
    assert (
        conn.execute(
            "select count(*) as n from fairqueue.jobs where type = 'once_follow_up'"
        ).fetchone()["n"]
        == 0
    )
    assert job(conn, job_id)["status"] == "failed"


@pytest.mark.timeout(60)
def test_a_handlers_writes_commit_with_its_jobs_completion(
    dsn: str, conn: Connection, effects: None
) -> None:
    seen: list[Any] = []

    def write_and_look(job: Job) -> dict[str, Any]:
        assert job.conn is not None
        job.conn.execute(
            "insert into public.effects values (%s, %s, %s)", (job.id, job.attempts, job.tenant_id)
        )
        # Inside the handler's transaction the job is still running: its completion comes
        # after the handler returns, in the same transaction.
        seen.append(
            job.conn.execute(
                "select status from fairqueue.jobs where id = %s", (job.id,)
            ).fetchone()["status"]
        )
        return {"wrote": 1}

    stage = Stage("once_plain", handler=write_and_look, concurrency=4)
    ids = [enqueue(conn, stage.name, {}, tenant_id=f"t{i % 3}") for i in range(12)]
    result = run_pipeline(dsn, [stage])

    assert (result.jobs_done, result.stop_reason) == (12, "no_work")
    assert seen == ["running"] * 12
    assert sorted(j for j, _ in written(conn)) == sorted(ids)
    rows = conn.execute(
        "select id, status, output, run_id from fairqueue.jobs where type = %s", (stage.name,)
    ).fetchall()
    assert {r["id"] for r in rows} == set(ids)
    assert all(
        (r["status"], r["output"], r["run_id"]) == ("done", {"wrote": 1}, result.run_id)
        for r in rows
    )


@pytest.mark.timeout(60)
def test_a_handler_slower_than_its_lease_keeps_its_job_while_it_runs(
    dsn: str, conn: Connection, effects: None
) -> None:
    handler = SlowFirstAttempt()
    stage = Stage("once_kept", handler=handler, lease_s=1.0, max_attempts=3)
    job_id = enqueue(conn, stage.name, {}, tenant_id="acme")
    assert job_id is not None

    thread, first = first_run_in_background(dsn, stage)
    try:
        assert handler.first_wrote.wait(WAIT_S)
        # Three leases long, while the handler runs: the lease is kept alive all along, and
        # other runs find nothing to take.
        others: list[RunResult] = []
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            others.append(run_pipeline(dsn, [stage]))
            held = conn.execute(
                "select lease_until > now() as live from fairqueue.jobs where id = %s", (job_id,)
            ).fetchone()
            assert held["live"]
            time.sleep(0.2)
    finally:
        handler.release.set()
        thread.join(WAIT_S)

    assert others and all((r.jobs_done, r.stop_reason) == (0, "no_work") for r in others)
    (first_result,) = first
    assert first_result.jobs_done == 1
    assert written(conn) == [(job_id, 1)]
    done = job(conn, job_id)
    assert (done["status"], done["attempts"], done["run_id"]) == ("done", 1, first_result.run_id)


@pytest.mark.timeout(60)
def test_each_batch_of_a_run_keeps_its_leases_while_it_runs(dsn: str, conn: Connection) -> None:
    # One keeper thread serves the run's batches one after another: the second batch's lease is
    # kept as the first one's was.
    attempts: list[tuple[UUID, int]] = []
    started = threading.Event()

    def slow(job: Job) -> None:
        attempts.append((job.id, job.attempts))
        started.set()
        time.sleep(1.6)

    stage = Stage("kept_each_batch", handler=slow, batch=1, lease_s=1.0)
    ids = {enqueue(conn, stage.name, {"n": n}) for n in range(2)}
    results: list[RunResult] = []
    run = threading.Thread(target=lambda: results.append(run_pipeline(dsn, [stage])))
    run.start()
    try:
        assert started.wait(WAIT_S)
        while run.is_alive():
            running = conn.execute(
                "select id, lease_until > now() as live from fairqueue.jobs"
                " where type = %s and status = 'running'",
                (stage.name,),
            ).fetchall()
            assert all(r["live"] for r in running), running
            time.sleep(0.1)
    finally:
        run.join(WAIT_S)
    (result,) = results
    assert (result.jobs_done, result.stop_reason) == (2, "no_work")
    assert sorted(attempts) == sorted((job_id, 1) for job_id in ids)

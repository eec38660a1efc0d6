"""A run whose own connection is killed mid-batch loses no finished work: it starts no handler
whose outcome it could not record, reconnects, records what finished, and stops with an error
that names the fault."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fairqueue import Job, Stage, connect, define_quota, enqueue, run_pipeline
from fairqueue.db import Connection
from support.rows import job, runs

pytestmark = pytest.mark.direct_only(
    "the pooler keeps the client's connection when its backend is killed and gives the next"
    " transaction another one, so the run never sees the fault"
)


def statuses(conn: Connection, ids: list) -> list[tuple[str, int]]:
    return [(job(conn, i)["status"], job(conn, i)["attempts"]) for i in ids]


@pytest.mark.timeout(60)
def test_handlers_that_finished_before_the_fault_are_recorded_once(
    dsn: str, conn: Connection
) -> None:
    calls: list[int] = []
    with connect(dsn, autocommit=True) as run_conn:
        backend = run_conn.info.backend_pid

        def handler(job: Job) -> None:
            calls.append(job.payload["n"])
            if job.payload["n"] == 2:
                conn.execute("select pg_terminate_backend(%s)", (backend,))

        stage = Stage("dropped_all_ran", handler=handler, batch=10)
        ids = [enqueue(conn, stage.name, {"n": n}) for n in range(10)]
        result = run_pipeline(dsn, [stage], conn=run_conn)

    # Nothing used the run's connection while the handlers ran, so all ten ran; the batch's
    # completion found it lost, reconnected and recorded them.
    assert calls == list(range(10))
    assert (result.stop_reason, result.jobs_done) == ("error", 10)
    assert result.error is not None and "ConnectionLost" in result.error
    assert statuses(conn, ids) == [("done", 1)] * 10
    (row,) = runs(conn)
    assert (row["stop_reason"], row["jobs_done"]) == ("error", 10)
    assert "ConnectionLost" in row["error"]

    again = run_pipeline(dsn, [stage])
    assert (again.stop_reason, again.jobs_done) == ("no_work", 0)
    assert calls == list(range(10))


@pytest.mark.timeout(60)
def test_follow_ups_survive_the_fault_that_their_completion_finds(
    dsn: str, conn: Connection
) -> None:
    # The batch's completion, with its follow-ups, meets the lost connection first; the run
    # reconnects and records it again, follow-ups included.
    Stage("dropped_follow_up", handler=lambda job: None)
    with connect(dsn, autocommit=True) as run_conn:
        backend = run_conn.info.backend_pid

        def handler(job: Job) -> None:
            job.enqueue("dropped_follow_up", {"after": job.payload["n"]})
            if job.payload["n"] == 2:
                conn.execute("select pg_terminate_backend(%s)", (backend,))

        stage = Stage("dropped_with_follow_ups", handler=handler, batch=5)
        ids = [enqueue(conn, stage.name, {"n": n}) for n in range(5)]
        result = run_pipeline(dsn, [stage], conn=run_conn)

    assert (result.stop_reason, result.jobs_done) == ("error", 5)
    assert statuses(conn, ids) == [("done", 1)] * 5
    follow_ups = conn.execute(
        "select payload from fairqueue.jobs where type = 'dropped_follow_up' order by payload"
    ).fetchall()
    assert [row["payload"] for row in follow_ups] == [{"after": n} for n in range(5)]


@pytest.mark.timeout(60)
def test_no_handler_starts_once_the_run_knows_its_connection_is_lost(
    dsn: str, conn: Connection
) -> None:
    define_quota(conn, "dropped_quota", capacity=100, period=timedelta(hours=1))
    calls: list[int] = []
    with connect(dsn, autocommit=True) as run_conn:
        backend = run_conn.info.backend_pid

        def handler(job: Job) -> None:
            calls.append(job.payload["n"])
            if job.payload["n"] == 2:
                conn.execute("select pg_terminate_backend(%s)", (backend,))
            # Spending goes through the run's own connection: here it finds it lost.
            job.spend("dropped_quota")

        stage = Stage("dropped_stops", handler=handler, batch=10)
        ids = [enqueue(conn, stage.name, {"n": n}) for n in range(10)]
        result = run_pipeline(dsn, [stage], conn=run_conn)

    assert calls == [0, 1, 2]
    assert (result.stop_reason, result.jobs_done) == ("error", 2)
    assert result.error is not None and "ConnectionLost" in result.error
    tally = result.summary["stages"]["dropped_stops"]
    assert (tally["done"], tally["retried"], tally["given_back"]) == (2, 1, 7)
    # The two that finished are done; the one whose spend failed retries later; the seven
    # never started are back as they were, their attempt undone.
    assert statuses(conn, ids) == [("done", 1)] * 2 + [("pending", 1)] + [("pending", 0)] * 7


@pytest.mark.timeout(60)
def test_a_handlers_connection_killed_before_it_returned_rolls_its_writes_back_and_retries(
    dsn: str, conn: Connection
) -> None:
    conn.execute("create table public.dropped_effects (job_id uuid, attempt integer)")
    conn.execute("grant select, insert on public.dropped_effects to fairqueue_app")
    calls: list[int] = []

    def handler(job: Job) -> None:
        calls.append(job.attempts)
        assert job.conn is not None
        job.conn.execute(
            "insert into public.dropped_effects values (%s, %s)", (job.id, job.attempts)
        )
        if job.attempts == 1:
            conn.execute("select pg_terminate_backend(%s)", (job.conn.info.backend_pid,))

    stage = Stage("dropped_handler", handler=handler)
    job_id = enqueue(conn, stage.name, {}, tenant_id="acme")
    first = run_pipeline(dsn, [stage])
    # The run's own connection is fine: the attempt fails and is retried, its write gone.
    assert (first.jobs_done, first.summary["stages"][stage.name]["retried"]) == (0, 1)
    assert job(conn, job_id)["status"] == "pending"
    conn.execute("update fairqueue.jobs set run_after = now() where id = %s", (job_id,))
    second = run_pipeline(dsn, [stage])
    assert (second.jobs_done, calls) == (1, [1, 2])
    rows = conn.execute("select job_id, attempt from public.dropped_effects").fetchall()
    assert rows == [{"job_id": job_id, "attempt": 2}]
    conn.execute("drop table public.dropped_effects")

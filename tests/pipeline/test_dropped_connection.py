"""A run whose own connection is killed mid-batch loses no finished work: it starts no handler
whose outcome it could not record, reconnects, records what finished, and stops with an error
that names the fault."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fairqueue import Job, Stage, connect, define_quota, enqueue, run_pipeline
from fairqueue.db import Connection
from support import job, runs


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

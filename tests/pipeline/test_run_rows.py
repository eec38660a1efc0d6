"""Every run row is closed: by its own process, which tries again while the database is away and
returns its result even when it cannot, else by the sweeper once the row is older than any
invocation lives."""

from __future__ import annotations

import signal
import threading
from typing import Any

import psycopg
import pytest
from psycopg import sql

from fairqueue import Job, Stage, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.pipeline.connections import RETRY_DELAYS_S
from fairqueue.pipeline.run import ABORTED
from fairqueue.roles.sweeper import sweep
from support.databases import database_name
from support.rows import job, runs

SWEPT = Stage("run_rows_swept", handler=lambda job: None)


def open_run_started(conn: Connection, dsn: str, minutes_ago: float) -> Any:
    """A run row opened through the door and dated back, as a process that died leaves it."""
    with connect(dsn, autocommit=True) as app:
        row = app.execute("select id from fairqueue.open_run('died', '{}')").fetchone()
    conn.execute(
        "update fairqueue.runs set started_at = now() - %s * interval '1 minute' where id = %s",
        (minutes_ago, row["id"]),
    )
    return row["id"]


def by_id(conn: Connection) -> dict[Any, dict[str, Any]]:
    return {r["id"]: r for r in runs(conn)}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("setting", "closed_at", "kept_at"),
    [(None, 21.0, 19.0), ("300", 6.0, 4.0)],
)
def test_the_sweeper_closes_the_runs_left_open_past_the_window_and_no_other(
    dsn: str,
    conn: Connection,
    monkeypatch: pytest.MonkeyPatch,
    setting: str | None,
    closed_at: float,
    kept_at: float,
) -> None:
    if setting is not None:
        monkeypatch.setenv("FAIRQUEUE_RUN_ABANDONED_AFTER_S", setting)
    abandoned = open_run_started(conn, dsn, closed_at)
    live = open_run_started(conn, dsn, kept_at)
    finished = run_pipeline(dsn, [SWEPT])
    conn.execute(
        "update fairqueue.runs set started_at = now() - interval '2 days' where id = %s",
        (finished.run_id,),
    )
    before = by_id(conn)

    result = sweep(dsn, [SWEPT])

    assert result.abandoned_runs_closed == 1
    after = by_id(conn)
    closed = after[abandoned]
    assert closed["stop_reason"] == "error"
    assert closed["finished_at"] is not None
    assert closed["error"].startswith("abandoned: the run was still open")
    assert (closed["jobs_done"], closed["jobs_failed"]) == (0, 0)
    assert after[live] == before[live]
    assert after[live]["finished_at"] is None
    assert after[finished.run_id] == before[finished.run_id]
    own = after[result.run_id]
    assert (own["stop_reason"], own["summary"]["abandoned_runs_closed"]) == ("no_work", 1)

    assert sweep(dsn, [SWEPT]).abandoned_runs_closed == 0
    assert by_id(conn)[abandoned] == closed


@pytest.mark.timeout(90)
@pytest.mark.direct_only(
    "the pooler keeps the client's connection when its backend is killed and gives the next"
    " transaction another one, so the run never sees the fault"
)
def test_a_run_whose_database_went_away_returns_its_result_and_the_sweeper_closes_its_row(
    dsn: str, conn: Connection, server_dsn: str
) -> None:
    database = database_name(dsn)
    # Only a connection to another database may turn this one's connections away.
    with (
        psycopg.connect(server_dsn, autocommit=True) as server,
        connect(dsn, autocommit=True) as run_conn,
    ):
        backend = run_conn.info.backend_pid

        def drop_the_runs_connection(_job: Job) -> None:
            # New connections to the database are refused from now on; the ones open stay.
            server.execute(
                sql.SQL("alter database {} with allow_connections false").format(
                    sql.Identifier(database)
                )
            )
            conn.execute("select pg_terminate_backend(%s)", (backend,))

        stage = Stage("run_rows_dropped", handler=drop_the_runs_connection)
        job_id = enqueue(conn, stage.name, {})
        assert job_id is not None

        # The run's own connection dies under it, and a fresh one cannot be had: the run
        # tries for the whole of its retries, then returns instead of raising.
        try:
            result = run_pipeline(dsn, [stage], conn=run_conn)
        finally:
            server.execute(
                sql.SQL("alter database {} with allow_connections true").format(
                    sql.Identifier(database)
                )
            )

    assert result.stop_reason == "error"
    assert result.error is not None
    assert "cannot reach the database" in result.summary["run_row_left_open"]
    assert sum(RETRY_DELAYS_S) >= 5.0  # long enough to ride out a restart
    (row,) = runs(conn)
    assert row["id"] == result.run_id
    assert row["finished_at"] is None
    # The job's lease holds it for a later run; nothing finished it.
    assert job(conn, job_id)["status"] == "running"

    conn.execute(
        "update fairqueue.runs set started_at = now() - interval '1 hour' where id = %s",
        (result.run_id,),
    )
    swept = sweep(dsn, [stage])
    assert swept.abandoned_runs_closed == 1
    closed = by_id(conn)[result.run_id]
    assert closed["stop_reason"] == "error"
    assert closed["error"].startswith("abandoned:")
    assert all(r["finished_at"] is not None for r in runs(conn))


@pytest.mark.timeout(60)
def test_an_aborted_run_closes_its_row_as_an_error_and_gives_back_what_never_started(
    dsn: str, conn: Connection
) -> None:
    def aborted(_job: Job) -> None:
        # What a second Ctrl-C raises on the main thread, where a stage of one handler at a
        # time runs its handlers.
        raise KeyboardInterrupt

    stage = Stage("run_rows_aborted", batch=3, handler=aborted)
    first, *rest = [enqueue(conn, stage.name, {"n": n}) for n in range(3)]
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(dsn, [stage])
    (row,) = runs(conn)
    assert (row["stop_reason"], row["error"], row["jobs_done"]) == ("error", ABORTED, 0)
    assert row["finished_at"] is not None
    assert row["summary"]["stages"][stage.name]["given_back"] == 2
    assert job(conn, first)["status"] == "running"  # its handler started: left to its lease
    assert [(job(conn, i)["status"], job(conn, i)["attempts"]) for i in rest] == [
        ("pending", 0)
    ] * 2


@pytest.mark.timeout(60)
def test_an_abort_does_not_wait_for_handlers_running_on_other_threads(
    dsn: str, conn: Connection
) -> None:
    let_go = threading.Event()
    started: list[int] = []
    finished: list[int] = []

    def slow(job: Job) -> None:
        started.append(job.payload["n"])
        if len(started) == 2:
            # Both threads hold a handler: a second Ctrl-C reaches the main thread, which is
            # waiting for them.
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        let_go.wait(30)
        finished.append(job.payload["n"])

    stage = Stage("run_rows_abort_pool", batch=5, concurrency=2, handler=slow)
    ids = [enqueue(conn, stage.name, {"n": n}) for n in range(5)]
    try:
        with pytest.raises(KeyboardInterrupt):
            run_pipeline(dsn, [stage])
        assert finished == []  # it returned while both handlers were still running
    finally:
        let_go.set()
    (row,) = runs(conn)
    assert (row["stop_reason"], row["error"]) == ("error", ABORTED)
    assert row["summary"]["stages"][stage.name]["given_back"] == 3
    states = {i: (job(conn, i)["status"], job(conn, i)["attempts"]) for i in ids}
    running = {i for i, state in states.items() if state == ("running", 1)}
    pending = {i for i, state in states.items() if state == ("pending", 0)}
    assert len(running) == 2 and running | pending == set(ids)
    assert {job(conn, i)["payload"]["n"] for i in running} == set(started)

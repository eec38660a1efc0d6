"""A batch's plain completion trails the next claim: it is recorded on a second connection of the
run while the run's own connection claims and runs the next batch. Held back here by locking the
first batch's rows from the test, so each order of events is forced, not hoped for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest

from fairqueue import Job, Stage, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from support.rows import runs

BATCH = 3


def statuses(conn: Connection, ids: list[UUID]) -> list[tuple[str, int]]:
    rows = conn.execute(
        "select id, status, attempts from fairqueue.all_jobs where id = any(%s)", (ids,)
    ).fetchall()
    found = {row["id"]: (row["status"], row["attempts"]) for row in rows}
    return [found[i] for i in ids]


def enqueue_two_batches(conn: Connection, stage: Stage) -> list[UUID]:
    ids = []
    for n in range(2 * BATCH):
        job_id = enqueue(conn, stage.name, {"n": n})
        assert job_id is not None
        ids.append(job_id)
    return ids


def hold_first_batch(locker: Connection, job_type: str) -> None:
    """Lock the first batch's rows in the locker's open transaction, as a superuser (whom no
    policy hides them from): that batch's completion waits until the locker commits."""
    locker.execute(
        "select id from fairqueue.jobs where type = %s and (payload->>'n')::int < %s for update",
        (job_type, BATCH),
    )


def holding_first_batch(
    locker: Connection, at_second_batch: Callable[[], None]
) -> Callable[[Job], None]:
    """A handler that holds the first batch's rows once its last job runs (hold_first_batch),
    then, at the second batch's first job, calls ``at_second_batch`` and lets them go."""

    def handler(job: Job) -> None:
        n = job.payload["n"]
        if n == BATCH - 1:
            hold_first_batch(locker, job.type)
        if n == BATCH:
            at_second_batch()
            locker.commit()

    return handler


def waiting_completion(conn: Connection) -> int:
    """The backend of the trailing completion once it waits for the test's row locks."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = conn.execute(
            "select pid from pg_stat_activity"
            " where datname = current_database() and wait_event_type = 'Lock'"
            " and query like '%%complete_claimed%%'"
        ).fetchone()
        if row is not None:
            return int(row["pid"])
        time.sleep(0.02)
    raise AssertionError("the first batch's completion never waited for the test's locks")


@pytest.mark.timeout(60)
def test_the_next_batch_is_claimed_and_run_while_the_completion_trails(
    dsn: str, admin_dsn: str, conn: Connection
) -> None:
    seen: dict[str, Any] = {}
    with connect(admin_dsn) as locker:

        def at_second_batch() -> None:
            seen["first batch"] = statuses(conn, ids[:BATCH])
            waiting_completion(conn)

        stage = Stage(
            "trailing_overlap", handler=holding_first_batch(locker, at_second_batch), batch=BATCH
        )
        ids = enqueue_two_batches(conn, stage)
        result = run_pipeline(dsn, [stage])

    # The second batch ran while the first one's completion still waited for the locks.
    assert seen["first batch"] == [("running", 1)] * BATCH
    assert (result.stop_reason, result.jobs_done) == ("no_work", 2 * BATCH)
    assert statuses(conn, ids) == [("done", 1)] * (2 * BATCH)
    (row,) = runs(conn)
    assert (row["stop_reason"], row["jobs_done"]) == ("no_work", 2 * BATCH)


@pytest.mark.timeout(60)
@pytest.mark.direct_only("counts the run's backends, which a pooler deals out as it likes")
def test_with_trailing_off_the_run_records_each_completion_on_its_own_connection_first(
    dsn: str, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUEUE_COMPLETION_TRAILS", "false")
    seen: list[tuple[list[tuple[str, int]], int]] = []

    def handler(job: Job) -> None:
        if job.payload["n"] == BATCH:
            backends = conn.execute(
                "select count(*) as n from pg_stat_activity where datname = current_database()"
                " and backend_type = 'client backend' and pid <> pg_backend_pid()"
            ).fetchone()
            assert backends is not None
            seen.append((statuses(conn, ids[:BATCH]), backends["n"]))

    stage = Stage("trailing_off", handler=handler, batch=BATCH)
    ids = enqueue_two_batches(conn, stage)
    result = run_pipeline(dsn, [stage])

    # The first batch was done before the second was claimed, and the run had one connection.
    assert seen == [([("done", 1)] * BATCH, 1)]
    assert (result.stop_reason, result.jobs_done) == ("no_work", 2 * BATCH)


@pytest.mark.timeout(60)
@pytest.mark.direct_only(
    "the pooler keeps the client's connection when its backend is killed and gives the next"
    " transaction another one, so the run never sees the fault"
)
def test_a_trailing_completion_whose_connection_is_killed_is_recorded_once_on_a_fresh_one(
    dsn: str, admin_dsn: str, conn: Connection
) -> None:
    with connect(admin_dsn) as locker:

        def at_second_batch() -> None:
            conn.execute("select pg_terminate_backend(%s)", (waiting_completion(conn),))

        stage = Stage(
            "trailing_killed", handler=holding_first_batch(locker, at_second_batch), batch=BATCH
        )
        ids = enqueue_two_batches(conn, stage)
        result = run_pipeline(dsn, [stage])

    # The run's own connection was never touched: it goes on to the end of the work.
    assert (result.stop_reason, result.jobs_done) == ("no_work", 2 * BATCH)
    assert result.summary["stages"][stage.name].get("lost", 0) == 0
    assert statuses(conn, ids) == [("done", 1)] * (2 * BATCH)


@pytest.mark.timeout(60)
def test_an_error_recording_a_trailing_completion_closes_the_run_with_it(
    dsn: str, conn: Connection
) -> None:
    signature = "fairqueue.complete_claimed(text[], uuid[], jsonb[], text)"

    def handler(job: Job) -> None:
        if job.payload["n"] == BATCH - 1:
            # The first batch's completion is refused when it is recorded.
            conn.execute(f"revoke execute on function {signature} from fairqueue_app")

    stage = Stage("trailing_refused", handler=handler, batch=BATCH)
    ids = enqueue_two_batches(conn, stage)
    try:
        result = run_pipeline(dsn, [stage])
    finally:
        conn.execute(f"grant execute on function {signature} to fairqueue_app")

    assert result.stop_reason == "error"
    assert result.error is not None and "permission denied" in result.error
    assert result.jobs_done == 0
    (row,) = runs(conn)
    assert row["stop_reason"] == "error" and "permission denied" in row["error"]
    # Nothing was marked done: the first batch waits for its lease, as a dead run's would.
    assert {status for status, _ in statuses(conn, ids[:BATCH])} == {"running"}


@pytest.mark.timeout(60)
def test_with_no_dsn_for_a_second_connection_completions_are_recorded_on_the_runs_own(
    dsn: str, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given only an open connection, the run has nothing to open a second one from.
    monkeypatch.delenv("DATABASE_URL", raising=False)
    stage = Stage("trailing_no_dsn", handler=lambda job: None, batch=BATCH)
    ids = enqueue_two_batches(conn, stage)
    with connect(dsn, autocommit=True) as run_conn:
        result = run_pipeline(None, [stage], conn=run_conn)

    assert (result.stop_reason, result.jobs_done, result.error) == ("no_work", 2 * BATCH, None)
    assert statuses(conn, ids) == [("done", 1)] * (2 * BATCH)

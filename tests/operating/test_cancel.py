"""Cancelling a job that has not started: the library call and ``fairqueue jobs cancel``."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from fairqueue import enqueue, run_pipeline
from fairqueue.cancelling import cancel_job
from fairqueue.cli import main
from fairqueue.db import Connection, connect
from fairqueue.errors import JobNotCancellable, UnknownJob
from fairqueue.lanes import add_credits, admit, balance
from support import jobs_stages
from support.rows import race

STAGES = [jobs_stages.LOOKED_AT]


def status_of(conn: Connection, job_id: UUID) -> str:
    row = conn.execute("select status from fairqueue.all_jobs where id = %s", (job_id,)).fetchone()
    assert row is not None
    return str(row["status"])


def test_a_cancelled_job_is_finished_and_no_claim_takes_it(dsn: str, conn: Connection) -> None:
    cancelled = enqueue(conn, "looked_at", {}, tenant_id="acme", group_id="inbox")
    kept = enqueue(conn, "looked_at", {}, tenant_id="acme", group_id="inbox")
    assert cancelled is not None and kept is not None
    with connect(dsn, autocommit=True) as app:
        done = cancel_job(app, cancelled, tenant_id="acme")
    assert (done.job_id, done.refunded, done.promoted) == (cancelled, 0, None)
    row = conn.execute(
        "select status, finished_at, last_error from fairqueue.jobs where id = %s", (cancelled,)
    ).fetchone()
    assert row is not None and row["status"] == "cancelled" and row["finished_at"] is not None
    assert row["last_error"] == "cancelled before it started"

    run = run_pipeline(dsn, STAGES)
    assert run.jobs_done == 1
    assert (status_of(conn, cancelled), status_of(conn, kept)) == ("cancelled", "done")
    # Nothing is left to claim: the group's standing no longer offers the cancelled job.
    assert run_pipeline(dsn, STAGES).stop_reason == "no_work"


def test_cancelling_the_lane_holder_starts_the_next_and_refunds_its_credits(
    dsn: str, conn: Connection
) -> None:
    add_credits(conn, "acme", 10)
    with connect(dsn) as app:
        held, waiting, last = (
            admit(app, "ada", "paid_look", {"n": n}, tenant_id="acme").job_id for n in range(3)
        )
        app.commit()
    assert balance(conn, "acme") == 4
    with connect(dsn, autocommit=True) as app:
        done = cancel_job(app, held, tenant_id="acme")
        assert (done.refunded, done.promoted) == (2, waiting)
        # A queued job leaves the lane without moving its holder.
        assert cancel_job(app, last, tenant_id="acme").promoted is None
        # Cancelling twice refunds once.
        with pytest.raises(JobNotCancellable, match="is cancelled"):
            cancel_job(app, held, tenant_id="acme")
    assert [status_of(conn, j) for j in (held, waiting, last)] == [
        "cancelled",
        "pending",
        "cancelled",
    ]
    assert balance(conn, "acme") == 8
    refunds = conn.execute(
        "select job_id from fairqueue.credits where kind = 'refund' order by job_id"
    ).fetchall()
    assert sorted(r["job_id"] for r in refunds) == sorted([held, last])


def test_a_running_or_finished_job_is_refused_and_left_as_it_was(
    dsn: str, conn: Connection
) -> None:
    running = enqueue(conn, "looked_at", {}, tenant_id="acme")
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_at = now(),"
        " lease_until = now() + interval '5 minutes', locked_by = 'elsewhere' where id = %s",
        (running,),
    )
    finished = enqueue(conn, "doomed", {}, tenant_id="acme")
    run_pipeline(dsn, [jobs_stages.DOOMED])
    before = conn.execute("select * from fairqueue.all_jobs order by id").fetchall()
    with connect(dsn, autocommit=True) as app:
        with pytest.raises(JobNotCancellable, match="is running"):
            cancel_job(app, running, tenant_id="acme")
        with pytest.raises(JobNotCancellable, match="is failed"):
            cancel_job(app, finished, tenant_id="acme")
        with pytest.raises(UnknownJob):
            cancel_job(app, running, tenant_id="globex")  # another tenant's is no job at all
        with pytest.raises(UnknownJob):
            cancel_job(app, uuid4(), tenant_id="acme")
    assert conn.execute("select * from fairqueue.all_jobs order by id").fetchall() == before


def test_cancels_racing_a_drain_leave_each_job_done_or_cancelled_once(
    dsn: str, conn: Connection
) -> None:
    made = [
        enqueue(conn, "looked_at", {}, tenant_id="acme", group_id=f"g{i % 5}") for i in range(60)
    ]
    ids = [j for j in made if j is not None]

    def cancel_all() -> set[UUID]:
        cancelled: set[UUID] = set()
        with connect(dsn, autocommit=True) as app:
            for job_id in ids:
                try:
                    cancel_job(app, job_id, tenant_id="acme")
                except JobNotCancellable:
                    continue
                cancelled.add(job_id)
        return cancelled

    def drain() -> int:
        return run_pipeline(dsn, STAGES).jobs_done

    cancelled, done_count = race([cancel_all, drain])
    assert isinstance(cancelled, set), cancelled
    statuses = {
        r["id"]: r["status"]
        for r in conn.execute("select id, status from fairqueue.all_jobs").fetchall()
    }
    assert set(statuses) == set(ids)
    assert {j for j, s in statuses.items() if s == "cancelled"} == cancelled
    done = {j for j, s in statuses.items() if s == "done"}
    # The drain runs until nothing is left to claim: every job was taken by one side.
    assert done | cancelled == set(ids)
    assert not done & cancelled
    assert done_count == len(done)


def test_cli_cancels_each_and_names_the_ones_it_refused(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    pending = enqueue(conn, "looked_at", {}, tenant_id="acme")
    finished = enqueue(conn, "doomed", {}, tenant_id="acme")
    run_pipeline(dsn, [jobs_stages.DOOMED])
    code = main(["--database-url", dsn, "jobs", "cancel", str(finished), str(pending)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out.strip() == f"cancelled {pending}"
    assert f"job {finished} is failed" in captured.err
    assert (status_of(conn, pending), status_of(conn, finished)) == ("cancelled", "failed")

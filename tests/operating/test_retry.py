"""Running a failed job again by hand: the library call and ``fairqueue jobs retry``."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from fairqueue import enqueue, run_pipeline
from fairqueue.cli import main
from fairqueue.db import Connection, connect
from fairqueue.errors import DuplicateJob, JobNotRetryable, UnknownJob
from fairqueue.lanes import add_credits, admit
from fairqueue.retrying import retry_job
from support import jobs_stages


def failed_once(conn: Connection, dsn: str, **labels: str) -> UUID:
    job_id = enqueue(conn, "doomed", {}, **labels)
    assert job_id is not None
    run_pipeline(dsn, [jobs_stages.DOOMED])
    return job_id


def row_of(conn: Connection, job_id: UUID) -> dict[str, object]:
    row = conn.execute("select * from fairqueue.all_jobs where id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


@pytest.mark.parametrize("moved", [False, True], ids=["in the hot table", "moved to history"])
def test_a_failed_job_runs_again_with_fresh_attempts_and_a_note(
    dsn: str, conn: Connection, moved: bool
) -> None:
    job_id = failed_once(conn, dsn, tenant_id="acme", group_id="inbox")
    if moved:
        conn.execute("update fairqueue.jobs set give_up_owed = false where id = %s", (job_id,))
        assert conn.execute(
            "select fairqueue.move_finished(10, interval '1 s') as n"
        ).fetchone() == {"n": 1}
    with connect(dsn, autocommit=True) as app:
        assert retry_job(app, job_id, tenant_id="acme").status == "pending"
    row = row_of(conn, job_id)
    assert (row["status"], row["attempts"], row["finished_at"]) == ("pending", 0, None)
    assert str(row["last_error"]).startswith("retried by hand at ")
    assert "the upstream said no" in str(row["last_error"])
    assert conn.execute("select count(*) as n from fairqueue.finished_jobs").fetchone() == {"n": 0}
    # The claim finds it again: it fails once more, its single attempt fresh.
    assert run_pipeline(dsn, [jobs_stages.DOOMED]).jobs_failed == 1
    row = row_of(conn, job_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)


def test_a_retried_job_owes_no_give_up_hook(dsn: str, conn: Connection) -> None:
    job_id = failed_once(conn, dsn, tenant_id="acme")
    conn.execute("update fairqueue.jobs set give_up_owed = true where id = %s", (job_id,))
    with connect(dsn, autocommit=True) as app:
        retry_job(app, job_id, tenant_id="acme")
    row = conn.execute(
        "select give_up_owed from fairqueue.jobs where id = %s", (job_id,)
    ).fetchone()
    assert row == {"give_up_owed": False}


def test_what_is_not_a_failed_job_of_the_tenant_is_refused_and_changes_nothing(
    dsn: str, conn: Connection
) -> None:
    pending = enqueue(conn, "looked_at", {}, tenant_id="acme")
    failed = failed_once(conn, dsn, tenant_id="acme")
    before = conn.execute("select * from fairqueue.all_jobs order by id").fetchall()
    with connect(dsn, autocommit=True) as app:
        with pytest.raises(JobNotRetryable, match="is pending"):
            retry_job(app, pending, tenant_id="acme")
        with pytest.raises(UnknownJob):
            retry_job(app, failed, tenant_id="globex")
        with pytest.raises(UnknownJob):
            retry_job(app, uuid4(), tenant_id="acme")
    assert conn.execute("select * from fairqueue.all_jobs order by id").fetchall() == before
    # The door itself holds to the caller's clamp: another tenant's transaction reopens nothing.
    with connect(dsn) as app:
        app.execute("select fairqueue.clamp('globex')")
        rows = app.execute(
            "select * from fairqueue.retry_failed(%s, 'acme', 'x')", (failed,)
        ).fetchall()
        app.commit()
    assert rows == []
    assert row_of(conn, failed)["status"] == "failed"


def test_a_dedupe_key_held_by_an_open_job_refuses_the_retry(dsn: str, conn: Connection) -> None:
    failed = enqueue(conn, "doomed", {}, tenant_id="acme", dedupe_key="k")
    run_pipeline(dsn, [jobs_stages.DOOMED])
    assert enqueue(conn, "doomed", {}, tenant_id="acme", dedupe_key="k") is not None
    with connect(dsn, autocommit=True) as app, pytest.raises(DuplicateJob, match="'k'"):
        retry_job(app, failed, tenant_id="acme")
    assert row_of(conn, failed)["status"] == "failed"


def test_a_paid_job_is_refused_a_lane_job_waits_its_turn(dsn: str, conn: Connection) -> None:
    add_credits(conn, "acme", 10)
    with connect(dsn) as app:
        paid = admit(app, "ada", "paid_look", {}, tenant_id="acme").job_id
        app.commit()
    conn.execute(
        "update fairqueue.jobs set status = 'failed', finished_at = now() where id = %s", (paid,)
    )
    with connect(dsn, autocommit=True) as app, pytest.raises(JobNotRetryable, match="admit it"):
        retry_job(app, paid, tenant_id="acme")

    with connect(dsn) as app:
        first = admit(app, "bo", "serial_look", {}, tenant_id="acme").job_id
        app.commit()
    conn.execute(
        "update fairqueue.jobs set status = 'failed', finished_at = now() where id = %s", (first,)
    )
    with connect(dsn) as app:
        second = admit(app, "bo", "serial_look", {}, tenant_id="acme").job_id
        app.commit()
    assert row_of(conn, second)["status"] == "pending"  # the lane was free: it holds it
    with connect(dsn, autocommit=True) as app:
        # The retried job comes back queued behind the holder.
        assert retry_job(app, first, tenant_id="acme").status == "queued"
    run_pipeline(dsn, [jobs_stages.SERIAL])
    assert [row_of(conn, j)["status"] for j in (first, second)] == ["done", "done"]


def test_cli_retries_by_id_and_every_failed_job_of_a_type(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = [failed_once(conn, dsn, tenant_id=t) for t in ("acme", "globex", "acme")]
    pending = enqueue(conn, "looked_at", {}, tenant_id="acme")
    code = main(["--database-url", dsn, "jobs", "retry", str(failed[0]), str(pending)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out.strip() == f"retried {failed[0]}: pending"
    assert f"job {pending} is pending" in captured.err
    assert main(["--database-url", dsn, "jobs", "retry", "--failed", "--type", "doomed"]) == 0
    out = capsys.readouterr().out
    assert sorted(line.split()[1].rstrip(":") for line in out.splitlines()) == sorted(
        str(j) for j in failed[1:]
    )
    assert {row_of(conn, j)["status"] for j in failed} == {"pending"}
    # Neither ids nor --failed: nothing to do is said, not guessed.
    assert main(["--database-url", dsn, "jobs", "retry"]) == 2
    assert "--failed" in capsys.readouterr().err

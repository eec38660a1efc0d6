"""The deployment guide's failed-jobs query finds the failed jobs: they leave the hot table for
fairqueue.finished_jobs, so the query reads fairqueue.all_jobs, which holds both."""

from __future__ import annotations

from fairqueue import Job, Stage, enqueue, run_pipeline
from fairqueue.db import Connection
from support.doc_examples import ROOT, blocks_of
from support.rows import holder

GUIDE = ROOT / "docs" / "guide" / "deploying.md"


def fails_the_first(job: Job) -> None:
    if job.payload["n"] == 1:
        raise RuntimeError(f"job {job.id} cannot be done")


STAGE = Stage("guide_fails", handler=fails_the_first, max_attempts=1)
MOVE = "select fairqueue.move_finished(100, interval '1 s') as n"


def failed_jobs_query() -> str:
    (block,) = [
        block
        for block in blocks_of(GUIDE)
        if block.tag == "sql" and "status = 'failed'" in block.text
    ]
    return block.text


def test_the_guides_failed_jobs_query_finds_a_job_that_failed_and_moved(
    conn: Connection, dsn: str
) -> None:
    failed = enqueue(conn, STAGE.name, {"n": 1}, tenant_id="t-guide")
    done = enqueue(conn, STAGE.name, {"n": 2}, tenant_id="t-guide")
    assert failed is not None and done is not None
    ran = run_pipeline(dsn, [STAGE])
    assert (ran.jobs_failed, ran.jobs_done) == (1, 1)
    conn.execute(MOVE)
    assert holder(conn, failed) == "fairqueue.finished_jobs"

    rows = conn.execute(failed_jobs_query()).fetchall()

    assert [(row["id"], row["type"], row["tenant_id"]) for row in rows] == [
        (failed, STAGE.name, "t-guide")
    ]
    assert rows[0]["attempts"] == 1
    assert "cannot be done" in rows[0]["last_error"]
    # What the guide read before: the hot table, where the failed job no longer is.
    before = failed_jobs_query().replace("fairqueue.all_jobs", "fairqueue.jobs")
    assert conn.execute(before).fetchall() == []

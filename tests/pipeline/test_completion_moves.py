"""A completion with no output moves its jobs out of the hot table as it marks them done: the
job is written done into today's day of fairqueue.finished_jobs, and it still counts as served
to its group, once."""

from __future__ import annotations

from uuid import UUID

from fairqueue import Stage, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch, complete_claimed
from support.rows import age_job, day_of, holder

STAGE = Stage("moves_plain", handler=lambda _job: None)
MOVE = "select fairqueue.move_finished(100, interval '1 s') as n"
TODAY = "select fairqueue.day_partition_name((now() at time zone 'UTC')::date) as name"


def served(conn: Connection) -> dict[str, int]:
    """The group's count as the served table keeps it, beside a recount from the jobs."""
    kept = conn.execute(
        "select n from fairqueue.served where type = %s and group_key = 't/g'", (STAGE.name,)
    ).fetchone()
    recount = conn.execute(
        "select count(*) as n from fairqueue.all_jobs a, fairqueue.served_watermark w"
        " where a.type = %s and a.group_key = 't/g' and a.served_at > w.watermark",
        (STAGE.name,),
    ).fetchone()
    assert kept is not None and recount is not None
    return {"kept": int(kept["n"]), "recounted": int(recount["n"])}


def enqueued(conn: Connection, n: int) -> list[UUID]:
    ids = [enqueue(conn, STAGE.name, {"k": k}, tenant_id="t", group_id="g") for k in range(n)]
    assert all(i is not None for i in ids)
    return [i for i in ids if i is not None]


def test_jobs_done_with_no_output_are_written_done_into_todays_day(
    conn: Connection, dsn: str
) -> None:
    ids = enqueued(conn, 3)
    result = run_pipeline(dsn, [STAGE])
    assert result.jobs_done == 3
    today = conn.execute(TODAY).fetchone()
    assert today is not None
    for job_id in ids:
        assert holder(conn, job_id) == "fairqueue.finished_jobs"
        assert day_of(conn, job_id) == f"fairqueue.{today['name']}"
        row = conn.execute(
            "select status, attempts, lease_until, last_error, output, finished_at, locked_by,"
            " run_id from fairqueue.finished_jobs where id = %s",
            (job_id,),
        ).fetchone()
        assert row is not None
        assert (row["status"], row["attempts"], row["lease_until"], row["last_error"]) == (
            "done",
            1,
            None,
            None,
        )
        assert row["output"] is None and row["finished_at"] is not None
        assert row["locked_by"] is not None and row["run_id"] == result.run_id
    assert served(conn) == {"kept": 3, "recounted": 3}
    assert conn.execute(MOVE).fetchone()["n"] == 0


def test_without_todays_day_the_jobs_are_marked_done_in_place_for_the_move(
    conn: Connection, dsn: str
) -> None:
    today = conn.execute(TODAY).fetchone()
    assert today is not None
    conn.execute(f"drop table fairqueue.{today['name']}")  # trusted name, from the database
    (job_id,) = enqueued(conn, 1)
    assert run_pipeline(dsn, [STAGE]).jobs_done == 1
    assert holder(conn, job_id) == "fairqueue.jobs"
    assert served(conn) == {"kept": 1, "recounted": 1}
    # The move makes the day and takes the job; the count does not change.
    assert conn.execute(MOVE).fetchone()["n"] == 1
    assert holder(conn, job_id) == "fairqueue.finished_jobs"
    assert served(conn) == {"kept": 1, "recounted": 1}


def test_a_job_that_ran_longer_than_the_day_counts_again_when_it_completes(
    conn: Connection,
) -> None:
    (job_id,) = enqueued(conn, 1)
    (claimed,) = claim_batch(conn, STAGE.name, batch=1, lease_s=60, locked_by="long")
    assert claimed.id == job_id
    assert served(conn) == {"kept": 1, "recounted": 1}
    # Taken two days ago: it left the day's count when its served time crossed the edge.
    age_job(conn, job_id, locked_at=2 * 86400)
    conn.execute("select fairqueue.expire_served()")
    assert served(conn) == {"kept": 0, "recounted": 0}
    # Done now, it is served now: counted once more, on the finished side.
    assert complete_claimed(conn, [("t", job_id)], "long") == {job_id}
    assert holder(conn, job_id) == "fairqueue.finished_jobs"
    assert served(conn) == {"kept": 1, "recounted": 1}

"""The days of fairqueue.finished_jobs: made by the move when a job needs one, dropped by
retention, and neither ever waiting long for a lock that readers of finished jobs hold."""

from __future__ import annotations

from uuid import UUID

from fairqueue import Stage, connect, enqueue
from fairqueue.db import Connection
from support.rows import day_of, finished_days

STAGE = Stage("days_plain", handler=lambda _job: None)
MOVE = "select fairqueue.move_finished(100, interval '50 milliseconds') as n"


def finished(conn: Connection, age: str) -> UUID:
    job_id = enqueue(conn, STAGE.name, {}, tenant_id="t")
    assert job_id is not None
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now() - %s::interval"
        " where id = %s",
        (age, job_id),
    )
    return job_id


def test_the_move_makes_the_day_of_a_job_older_than_the_days_made(conn: Connection) -> None:
    old = finished(conn, "20 days")
    assert day_of(conn, old) not in finished_days(conn)
    assert conn.execute(MOVE).fetchone()["n"] == 1
    assert day_of(conn, old) in finished_days(conn)
    holder = conn.execute(
        "select tableoid::regclass::text as p from fairqueue.finished_jobs where id = %s", (old,)
    ).fetchone()
    assert holder["p"] == day_of(conn, old)


def test_a_day_that_cannot_be_made_now_keeps_its_jobs_for_the_next_move(
    conn: Connection, admin_dsn: str
) -> None:
    old = finished(conn, "20 days")
    recent = finished(conn, "1 minute")
    with connect(admin_dsn) as reader:
        reader.execute("select count(*) from fairqueue.finished_jobs")  # holds a read lock
        assert conn.execute(MOVE).fetchone()["n"] == 1  # today's day exists: that one moves
        reader.rollback()
    where = {
        r["id"]: r["side"]
        for r in conn.execute(
            "select id, 'hot' as side from fairqueue.jobs"
            " union all select id, 'finished' from fairqueue.finished_jobs"
        ).fetchall()
    }
    assert where == {old: "hot", recent: "finished"}
    assert conn.execute(MOVE).fetchone()["n"] == 1
    assert day_of(conn, old) in finished_days(conn)


def test_a_day_past_retention_is_left_for_the_next_pass_while_it_is_read(
    conn: Connection, admin_dsn: str
) -> None:
    old = finished(conn, "3 days")
    assert conn.execute(MOVE).fetchone()["n"] == 1
    keep = "select * from fairqueue.keep_partitions(interval '2 days', 7, interval '50 ms')"
    with connect(admin_dsn) as reader:
        reader.execute("select count(*) from fairqueue.finished_jobs")
        busy = conn.execute(keep).fetchone()
        reader.rollback()
    assert busy["dropped"] == 0 and busy["skipped"] >= 1
    assert day_of(conn, old) in finished_days(conn)
    again = conn.execute(keep).fetchone()
    assert again["skipped"] == 0 and again["dropped"] >= 1
    assert day_of_gone(conn, old)


def day_of_gone(conn: Connection, job_id: UUID) -> bool:
    return (
        conn.execute("select 1 from fairqueue.all_jobs where id = %s", (job_id,)).fetchone() is None
    )

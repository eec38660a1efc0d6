"""Small helpers shared by the tests: read a job, age a row, count things."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from fairqueue.db import Connection


def job(conn: Connection, job_id: UUID) -> dict[str, Any]:
    """A job's row wherever it is: the hot table, or the finished jobs a completion moved it to
    (those have no columns of the hot table's own, such as give_up_owed)."""
    row = conn.execute("select * from fairqueue.jobs where id = %s", (job_id,)).fetchone()
    if row is None:
        row = conn.execute(
            "select * from fairqueue.finished_jobs where id = %s", (job_id,)
        ).fetchone()
    assert row is not None, f"no job {job_id}"
    return row


def age_job(conn: Connection, job_id: UUID, **seconds_ago: float) -> None:
    """Move timestamp columns of a job into the past, e.g. age_job(c, id, run_after=60)."""
    for column, seconds in seconds_ago.items():
        assert column in {"run_after", "lease_until", "locked_at", "finished_at", "created_at"}
        conn.execute(
            f"update fairqueue.jobs set {column} = now() - %s * interval '1 second' where id = %s",  # type: ignore[arg-type]
            (seconds, job_id),
        )


def count(conn: Connection, where: str = "true", params: tuple[Any, ...] = ()) -> int:
    """Jobs in the hot table."""
    row = conn.execute(f"select count(*) as n from fairqueue.jobs where {where}", params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return int(row["n"])


def count_all(conn: Connection, where: str = "true", params: tuple[Any, ...] = ()) -> int:
    """Jobs whatever their state, in either table."""
    statement = f"select count(*) as n from fairqueue.all_jobs where {where}"
    row = conn.execute(statement, params).fetchone()
    assert row is not None
    return int(row["n"])


def runs(conn: Connection) -> list[dict[str, Any]]:
    return conn.execute("select * from fairqueue.runs order by started_at").fetchall()


def race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls at once, each on its own thread; each one's result, or the exception it
    raised, in the calls' order."""
    barrier = threading.Barrier(len(calls))
    outcomes: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            outcomes[index] = calls[index]()
        except BaseException as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def finished_days(conn: Connection) -> dict[str, datetime]:
    """The days of fairqueue.finished_jobs, each with when its range ends."""
    rows = conn.execute("select partition::text as p, ends_at from fairqueue.finished_partitions()")
    return {str(r["p"]): r["ends_at"] for r in rows.fetchall()}


def day_of(conn: Connection, job_id: UUID) -> str:
    """The day of fairqueue.finished_jobs a job belongs to by its finish time, wherever it is."""
    row = conn.execute(
        "select 'fairqueue.finished_jobs_' || to_char(finished_at at time zone 'UTC', 'YYYYMMDD')"
        " as day from fairqueue.all_jobs where id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None, f"no job {job_id}"
    return str(row["day"])


def holder(conn: Connection, job_id: UUID) -> str:
    """The table that holds a job: the hot one or the finished one."""
    rows = conn.execute(
        "select 'fairqueue.jobs' as t from fairqueue.jobs where id = %s"
        " union all select 'fairqueue.finished_jobs' from fairqueue.finished_jobs where id = %s",
        (job_id, job_id),
    ).fetchall()
    assert len(rows) == 1, f"job {job_id} is held {len(rows)} times"
    return str(rows[0]["t"])


def wait_until_waiting_on_a_lock(conn: Connection, pid: int) -> None:
    """Return once the backend `pid` waits on a lock; fail after five seconds."""
    for _ in range(500):
        row = conn.execute(
            "select wait_event_type from pg_stat_activity where pid = %s", (pid,)
        ).fetchone()
        if row is not None and row["wait_event_type"] == "Lock":
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited on a lock")

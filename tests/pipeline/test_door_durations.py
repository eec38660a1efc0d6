"""The doors' durations: one with a month or year part is refused, the rest is compared and used
as absolute time, and a refusal changes nothing. Called as the application role, as any code
holding it could."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from fairqueue import Stage, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.errors import ArgumentOutOfBounds
from fairqueue.runs import close_abandoned_runs
from fairqueue.status import missing_results, open_jobs

OUTPUT = Stage("durations_output", handler=lambda job: {"kept": True})
NO_OUTPUT = Stage("durations_plain", handler=lambda job: None)


@pytest.fixture
def app(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(dsn, autocommit=True) as c:
        yield c


def state(conn: Connection) -> dict[str, Any]:
    """Everything a duration door could change: jobs on both sides with their outputs, the
    finished jobs' days, and the runs."""
    return {
        "jobs": conn.execute(
            "select id, status, output from fairqueue.jobs order by id"
        ).fetchall(),
        "finished": conn.execute(
            "select id, tenant_id, output from fairqueue.finished_jobs order by id"
        ).fetchall(),
        "days": conn.execute(
            "select partition::text from fairqueue.finished_partitions() order by 1"
        ).fetchall(),
        "runs": conn.execute(
            "select id, stop_reason, finished_at from fairqueue.runs order by id"
        ).fetchall(),
    }


def finished_today(dsn: str, conn: Connection) -> None:
    """Finished jobs of two tenants, today: some moved to finished_jobs, some with an output
    waiting for its result; and a run opened this instant, still open."""
    for tenant in ("a", "b"):
        enqueue(conn, NO_OUTPUT.name, {}, tenant_id=tenant)
        enqueue(conn, OUTPUT.name, {}, tenant_id=tenant)
    run_pipeline(dsn, [NO_OUTPUT, OUTPUT])
    with connect(dsn, autocommit=True) as app:
        app.execute("select * from fairqueue.open_run('still_running', '{}')")


# The three the issue found, and each door's month parts, nulls and bounds.
REFUSED = [
    (
        "keep_partitions",
        "select * from fairqueue.keep_partitions(%s, 7, interval '1 s')",
        "-12 mons 361 days",
    ),
    ("keep_partitions", "select * from fairqueue.keep_partitions(%s, 7, interval '1 s')", "1 mon"),
    (
        "keep_partitions",
        "select * from fairqueue.keep_partitions(%s, 7, interval '1 s')",
        "23:59:59",
    ),
    (
        "keep_partitions",
        "select * from fairqueue.keep_partitions(%s, 7, interval '1 s')",
        "3661 days",
    ),
    (
        "keep_partitions",
        "select * from fairqueue.keep_partitions(interval '7 days', 7, %s)",
        "1 mon -30 days 1 s",
    ),
    (
        "keep_partitions",
        "select * from fairqueue.keep_partitions(interval '7 days', 7, %s)",
        "0.0009 s",
    ),
    (
        "close_abandoned_runs",
        "select fairqueue.close_abandoned_runs(%s)",
        "-12 mons 360 days 1 minute",
    ),
    ("close_abandoned_runs", "select fairqueue.close_abandoned_runs(%s)", "1 year"),
    (
        "close_abandoned_runs",
        "select fairqueue.close_abandoned_runs(%s)",
        "2 days -47 hours -59 minutes -1 s",
    ),
    ("close_abandoned_runs", "select fairqueue.close_abandoned_runs(%s)", None),
    ("trim_outputs", "select fairqueue.trim_outputs(%s, 100)", "1 microsecond"),
    ("trim_outputs", "select fairqueue.trim_outputs(%s, 100)", "1:59:59"),
    ("trim_outputs", "select fairqueue.trim_outputs(%s, 100)", "-1 year 367 days"),
    ("move_finished", "select fairqueue.move_finished(100, %s)", "1 mon -30 days"),
    ("move_finished", "select fairqueue.move_finished(100, %s)", "0.0001 s"),
    (
        "claim_results_to_save",
        "select * from fairqueue.claim_results_to_save(array['durations_output'], %s, 10, '{}')",
        "-1 mon 30 days 1 s",
    ),
    (
        "claim_results_to_save",
        "select * from fairqueue.claim_results_to_save(array['durations_output'], %s, 10, '{}')",
        "1 hour 1 s",
    ),
    (
        "due_result_hooks",
        "select * from fairqueue.due_result_hooks(array['durations_output'], %s, 10)",
        "1 mon",
    ),
    ("missing_results", "select * from fairqueue.missing_results(%s)", "1 year"),
    ("missing_results", "select * from fairqueue.missing_results(%s)", "0 s"),
    ("open_jobs", "select fairqueue.open_jobs(%s)", "1 mon"),
    ("open_jobs", "select fairqueue.open_jobs(%s)", "-1 s"),
    (
        "stale_doorbells",
        "select * from fairqueue.stale_doorbells(array['durations_output'], %s, 10)",
        "-1 mon 31 days",
    ),
    (
        "stale_doorbells",
        "select * from fairqueue.stale_doorbells(array['durations_output'], %s, 10)",
        "1 day 1 s",
    ),
    (
        "due_give_ups",
        "select * from fairqueue.due_give_ups(array['durations_output'], %s, 10)",
        "1 year -364 days",
    ),
    (
        "due_give_ups",
        "select * from fairqueue.due_give_ups(array['durations_output'], %s, 10)",
        "0 s",
    ),
]


@pytest.mark.parametrize(("door", "call", "duration"), REFUSED)
def test_a_door_refuses_a_duration_with_a_month_or_past_its_bounds_and_changes_nothing(
    dsn: str, conn: Connection, app: Connection, door: str, call: str, duration: str | None
) -> None:
    finished_today(dsn, conn)
    before = state(conn)
    assert len(before["finished"]) == 2 and len(before["jobs"]) == 2

    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"^{door}: ") as refused:
        app.execute(call, (duration,))  # type: ignore[arg-type]

    assert state(conn) == before
    assert "months" in str(refused.value) or "must be from" in str(refused.value)


@pytest.mark.parametrize(("door", "call", "duration"), REFUSED)
def test_the_refusal_needs_no_rows_to_look_at(
    app: Connection, door: str, call: str, duration: str | None
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"^{door}: "):
        app.execute(call, (duration,))  # type: ignore[arg-type]


def test_the_durations_the_library_passes_are_taken_as_absolute_time(
    dsn: str, conn: Connection, app: Connection
) -> None:
    finished_today(dsn, conn)
    conn.execute(
        "update fairqueue.runs set started_at = now() - interval '61 minutes'"
        " where trigger = 'still_running'"
    )
    conn.execute(
        "update fairqueue.jobs set finished_at = now() - interval '3 hours'"
        " where tenant_id = 'a' and output is not null"
    )
    # '2 days -47 hours' spans one hour: the run opened 61 minutes ago is closed by it.
    closed = app.execute("select fairqueue.close_abandoned_runs('2 days -47 hours') as n")
    assert closed.fetchone()["n"] == 1
    # Two hours in any spelling; only a's output is older.
    trimmed = app.execute("select fairqueue.trim_outputs('1 day -22 hours', 100) as n")
    assert trimmed.fetchone()["n"] == 1
    outputs = conn.execute(
        "select tenant_id, output from fairqueue.jobs where type = 'durations_output'"
        " order by tenant_id"
    ).fetchall()
    assert [(r["tenant_id"], r["output"]) for r in outputs] == [("a", None), ("b", {"kept": True})]
    # A day is kept until a whole day has passed its end: today's finished jobs stay.
    past = conn.execute(
        "select count(*) as n from fairqueue.finished_partitions()"
        " where ends_at <= now() - interval '1 day'"
    ).fetchone()["n"]
    kept = app.execute(
        "select * from fairqueue.keep_partitions('1 day', 7, '1 millisecond')"
    ).fetchone()
    assert kept == {"made": 0, "dropped": past, "skipped": 0}
    assert len(state(conn)["finished"]) == 2


def test_the_python_callers_raise_a_fairqueue_error_and_change_nothing(
    dsn: str, conn: Connection, app: Connection
) -> None:
    finished_today(dsn, conn)
    before = state(conn)
    with pytest.raises(ArgumentOutOfBounds, match=r"^close_abandoned_runs: the age must be from"):
        close_abandoned_runs(app, 59)
    with pytest.raises(ArgumentOutOfBounds, match="interval out of range"):
        close_abandoned_runs(app, 1e300)
    with pytest.raises(ArgumentOutOfBounds, match=r"^missing_results: the grace must be from"):
        missing_results(app, grace_s=7200)
    with pytest.raises(ArgumentOutOfBounds, match=r"^open_jobs: the window must be from"):
        open_jobs(app, due_within=timedelta(seconds=-1))
    assert state(conn) == before
    assert close_abandoned_runs(app, 60) == 0
    assert open_jobs(app, due_within=timedelta(minutes=1)) == 0

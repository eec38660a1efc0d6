"""The example pipeline drains completely and does the same work under the same seed."""

from datetime import timedelta
from typing import Any

from fairqueue import connect, run_pipeline
from fairqueue.dev.example import STAGES, seed_workload
from fairqueue.status import open_jobs

# Stops that mean "wait for the clock": nothing due yet, or the quota must reset first.
WAITING = {"no_work", "quota_reserve", "quota_exhausted"}


def drain(dsn: str, conn) -> list[str]:
    """Runs the pipeline until nothing is open. Where a run stopped to wait, the wait is skipped
    by dating the rows it waits for in the past: the quota's reset, and the due time of every
    deferred or retried job."""
    reasons = []
    for _ in range(500):
        if not open_jobs(conn):
            break
        reason = run_pipeline(dsn, STAGES, trigger="test").stop_reason
        reasons.append(reason)
        if reason in WAITING:
            conn.execute("update fairqueue.quotas set resets_at = now() where resets_at > now()")
            conn.execute(
                "update fairqueue.jobs set run_after = now()"
                " where status = 'pending' and run_after > now()"
            )
    assert open_jobs(conn) == 0
    return reasons


def outcome(conn) -> list[tuple]:
    return [
        tuple(r.values())
        for r in conn.execute(
            "select type, status, count(*), sum(attempts) from fairqueue.all_jobs"
            " group by 1, 2 order by 1, 2"
        ).fetchall()
    ]


def seed(dsn: str, **options: Any) -> int:
    """Seed as the application does: the application role, on an autocommit connection."""
    with connect(dsn, autocommit=True, as_app_role=True) as app:
        return seed_workload(app, **options)


def test_example_workload_is_deterministic_and_exercises_every_rule(dsn, conn) -> None:
    options = {"documents": 24, "quota_capacity": 16, "quota_reserve": 2}
    seeded = seed(dsn, seed=3, quota_period=timedelta(hours=1), **options)
    assert seeded == 24
    assert seed(dsn, seed=3) == 0  # only into an empty queue
    reasons = drain(dsn, conn)
    first = outcome(conn)

    by_type = {(t, s): n for t, s, n, _ in first}
    assert by_type[("ingest", "done")] == 24
    assert by_type[("search", "done")] == 24
    assert by_type[("summarize", "failed")] == by_type[("refund", "done")] > 0
    assert "quota_reserve" in reasons
    runs = conn.execute(
        "select sum(jobs_deferred) as deferred, sum(quota_units) as units,"
        " sum((summary->'stages'->'ingest'->>'retried')::int) as retried from fairqueue.runs"
    ).fetchone()
    assert runs["deferred"] > 0
    assert runs["units"] == 24
    assert runs["retried"] > 0

    conn.execute("delete from fairqueue.jobs")
    conn.execute("delete from fairqueue.finished_jobs")
    conn.execute("delete from fairqueue.quotas")
    seed(dsn, seed=3, quota_period=timedelta(hours=1), **options)
    drain(dsn, conn)
    assert outcome(conn) == first


def test_seeding_needs_an_autocommit_connection(dsn) -> None:
    import pytest

    from fairqueue import ConfigurationError, connect

    with connect(dsn) as c, pytest.raises(ConfigurationError, match="autocommit"):
        seed_workload(c)
    with connect(dsn, autocommit=True) as c:
        assert seed_workload(c, documents=5) == 5

"""The example pipeline drains completely and does the same work under the same seed."""

import time
from datetime import timedelta

from fairqueue import run_pipeline
from fairqueue.example import STAGES, seed_workload
from fairqueue.status import open_jobs


def drain(dsn: str, conn) -> list[str]:
    reasons = []
    deadline = time.monotonic() + 60
    while open_jobs(conn) and time.monotonic() < deadline:
        reasons.append(run_pipeline(dsn, STAGES, trigger="test").stop_reason)
        time.sleep(0.2)
    assert open_jobs(conn) == 0
    return reasons


def outcome(conn) -> list[tuple]:
    return [
        tuple(r.values())
        for r in conn.execute(
            "select type, status, count(*), sum(attempts) from fairqueue.jobs"
            " group by 1, 2 order by 1, 2"
        ).fetchall()
    ]


def test_example_workload_is_deterministic_and_exercises_every_rule(dsn, conn) -> None:
    options = {"documents": 24, "quota_capacity": 16, "quota_reserve": 2}
    seeded = seed_workload(conn, seed=3, quota_period=timedelta(seconds=1), **options)
    assert seeded == 24
    assert seed_workload(conn, seed=3) == 0  # only into an empty queue
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
    conn.execute("delete from fairqueue.quotas")
    seed_workload(conn, seed=3, quota_period=timedelta(seconds=1), **options)
    drain(dsn, conn)
    assert outcome(conn) == first


def test_seeding_needs_an_autocommit_connection(dsn) -> None:
    import pytest

    from fairqueue import ConfigurationError, connect

    with connect(dsn) as c, pytest.raises(ConfigurationError, match="autocommit"):
        seed_workload(c)
    with connect(dsn, autocommit=True) as c:
        assert seed_workload(c, documents=5) == 5

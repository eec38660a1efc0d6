"""A stage whose quota is spent is passed over; the stages after it keep working, and the run
stops on a quota only when every stage with work is held by one."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from fairqueue import Job, Stage, define_quota, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.errors import FairqueueError
from support.rows import job, runs

DAY = timedelta(days=1)


def spending(quota: str) -> Callable[[Job], None]:
    def spend(j: Job) -> None:
        j.spend(quota, 1)

    return spend


def nothing(j: Job) -> None:
    return None


def resets_at(conn: Connection, quota: str) -> datetime:
    row = conn.execute("select resets_at from fairqueue.quotas where name = %s", (quota,))
    found = row.fetchone()
    assert found is not None
    value = found["resets_at"]
    assert isinstance(value, datetime)
    return value


def test_a_stage_at_its_reserve_is_passed_over_and_the_next_stage_drains(dsn, conn) -> None:
    define_quota(conn, "drafting_api", capacity=5, period=DAY, reserve=5)
    stages = [
        Stage("drafts", handler=spending("drafting_api"), batch=2, quota="drafting_api"),
        Stage("notes", handler=nothing, batch=2),
    ]
    drafts = [enqueue(conn, "drafts", {"n": n}) for n in range(3)]
    notes = [enqueue(conn, "notes", {"n": n}) for n in range(5)]

    result = run_pipeline(dsn, stages)

    assert (result.stop_reason, result.jobs_done, result.units) == ("quota_reserve", 5, 0)
    assert all(job(conn, i)["status"] == "done" for i in notes)
    for draft in drafts:
        row = job(conn, draft)
        assert (row["status"], row["attempts"], row["locked_by"]) == ("pending", 0, None)
    (run,) = runs(conn)
    assert run["stop_reason"] == "quota_reserve"
    held = run["summary"]["stages"]["drafts"]["held"]
    assert held == {
        "reason": "quota_reserve",
        "quota": "drafting_api",
        "until": resets_at(conn, "drafting_api").isoformat(),
    }
    assert run["summary"]["stages"]["drafts"]["claimed"] == 0
    assert "held" not in run["summary"]["stages"]["notes"]


def test_the_stop_names_the_first_held_stage(dsn, conn) -> None:
    define_quota(conn, "empty_api", capacity=0, period=DAY)
    define_quota(conn, "reserved_api", capacity=3, period=DAY, reserve=3)
    on_empty = Stage("on_empty", handler=spending("empty_api"), quota="empty_api")
    on_reserve = Stage("on_reserve", handler=spending("reserved_api"), quota="reserved_api")
    enqueue(conn, "on_empty", {})
    enqueue(conn, "on_reserve", {})

    first = run_pipeline(dsn, [on_empty, on_reserve])
    second = run_pipeline(dsn, [on_reserve, on_empty])

    assert (first.stop_reason, first.jobs_done) == ("quota_exhausted", 0)
    assert (second.stop_reason, second.jobs_done) == ("quota_reserve", 0)
    for result in (first, second):
        stages = result.summary["stages"]
        assert stages["on_empty"]["held"]["reason"] == "quota_exhausted"
        assert stages["on_reserve"]["held"]["reason"] == "quota_reserve"


def test_a_held_stage_without_work_is_no_stop(dsn, conn) -> None:
    define_quota(conn, "idle_api", capacity=1, period=DAY, reserve=1)
    stages = [
        Stage("idle_quota", handler=spending("idle_api"), quota="idle_api"),
        Stage("plain", handler=nothing),
    ]
    enqueue(conn, "plain", {})

    result = run_pipeline(dsn, stages)

    assert (result.stop_reason, result.jobs_done) == ("no_work", 1)
    assert "idle_quota" not in result.summary["stages"]


def test_a_quota_that_resets_mid_run_lets_its_stage_in_on_the_next_pass(dsn, conn) -> None:
    define_quota(conn, "ticking_api", capacity=1, period=DAY)
    order: list[str] = []

    def metered(j: Job) -> None:
        j.spend("ticking_api", 1)
        order.append("metered")

    def other(j: Job) -> None:
        order.append("other")
        if order.count("other") == 2:
            # The quota's period ends here, as if a day had passed: its next read resets it.
            conn.execute(
                "update fairqueue.quotas set resets_at = now() - interval '1 second'"
                " where name = 'ticking_api'"
            )

    stages = [
        Stage("metered", handler=metered, batch=1, quota="ticking_api"),
        Stage("other", handler=other, batch=1),
    ]
    metered_jobs = [enqueue(conn, "metered", {"n": n}) for n in range(2)]
    for n in range(4):
        enqueue(conn, "other", {"n": n})

    result = run_pipeline(dsn, stages)

    assert (result.stop_reason, result.jobs_done) == ("no_work", 6)
    assert all(job(conn, i)["status"] == "done" for i in metered_jobs)
    # The first metered job spends the quota; two others run while it is held; the pass after
    # the reset takes the second metered job before the rest of the others.
    assert order == ["metered", "other", "other", "metered", "other", "other"]
    assert result.summary["stages"]["metered"]["held"]["reason"] == "quota_exhausted"


def test_after_every_batch_the_loop_starts_again_at_the_top_past_a_held_stage(dsn, conn) -> None:
    define_quota(conn, "held_api", capacity=2, period=DAY, reserve=2)
    order: list[str] = []
    lock = threading.Lock()

    def finish(j: Job) -> None:
        with lock:
            order.append(f"finish:{j.payload['n']}")

    def start(j: Job) -> None:
        with lock:
            order.append(f"start:{j.payload['n']}")
        j.enqueue("finish_after_hold", {"n": j.payload["n"]})

    stages = [
        Stage("finish_after_hold", handler=finish, batch=5),
        Stage("held", handler=spending("held_api"), quota="held_api"),
        Stage("start_after_hold", handler=start, batch=1),
    ]
    enqueue(conn, "held", {})
    for n in range(3):
        enqueue(conn, "start_after_hold", {"n": n})

    result = run_pipeline(dsn, stages)

    assert order == ["start:0", "finish:0", "start:1", "finish:1", "start:2", "finish:2"]
    assert (result.stop_reason, result.jobs_done) == ("quota_reserve", 6)


@pytest.mark.parametrize(
    ("name", "period", "message"),
    [
        ("", DAY, "name"),
        ("q" * 201, DAY, "over the limit"),
        ("nul\x00", DAY, "NUL"),
        ("long_period", timedelta(days=367), "at most 366 days"),
        ("no_period", timedelta(0), "over 0"),
    ],
)
def test_define_quota_refuses_what_the_database_would_with_a_fairqueue_error(
    conn: Connection, name: str, period: timedelta, message: str
) -> None:
    with pytest.raises(FairqueueError, match=message):
        define_quota(conn, name, capacity=1, period=period)
    assert conn.execute("select count(*) as n from fairqueue.quotas").fetchone() == {"n": 0}

"""The sweep makes each due tick a job once: two sweepers racing, a sweep retried, a sweeper
stopped for three hours (rows dated in the past) under each catch_up rule, a paused schedule."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest

from fairqueue import (
    add_schedule,
    connect,
    get_schedule,
    pause_schedule,
    resume_schedule,
)
from fairqueue.db import Connection
from fairqueue.roles.scheduling import sweep_schedules
from fairqueue.roles.sweeper import sweep
from fairqueue.runs import get_run
from fairqueue.schedules.ticks import MAX_CATCH_UP, ON_TIME
from support.schedule_stages import TICK, tick_jobs

pytestmark = pytest.mark.timeout(120)


def now_of(conn: Connection) -> datetime:
    row = conn.execute("select now() as now").fetchone()
    assert row is not None
    return row["now"]  # type: ignore[no-any-return]


def minute_marks(start: datetime, end: datetime) -> list[datetime]:
    """The whole minutes from start to end, start included, end left out."""
    marks, at = [], start
    while at < end:
        marks.append(at)
        at += timedelta(minutes=1)
    return marks


def test_two_sweepers_racing_over_1000_schedules_make_each_due_tick_once(dsn, conn) -> None:
    assert TICK.name == "tick"
    # 1,000 schedules of every minute, each owing its ticks of the last three minutes and the
    # current one: set up as the superuser, in one statement.
    conn.execute(
        "insert into fairqueue.schedules (tenant_id, name, job_type, every_s, max_attempts,"
        " catch_up, next_tick_at)"
        " select 't' || (i % 10), 's' || i, 'tick', 60, 5, 'all',"
        "        date_trunc('minute', now()) - interval '3 minutes'"
        "   from generate_series(1, 1000) i"
    )
    before = {
        r["id"]: r["next_tick_at"]
        for r in conn.execute("select id, next_tick_at from fairqueue.schedules").fetchall()
    }
    barrier = threading.Barrier(2)
    made: list[int] = []
    errors: list[BaseException] = []

    def sweeper() -> None:
        try:
            with connect(dsn, autocommit=True) as mine:
                barrier.wait()
                # Batches of 50: the two sweeps take turns at the due rows, each batch
                # locked while it is worked out.
                made.append(sweep_schedules(mine, None, batch=50).ticks_made)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=100)
    assert not errors

    after = {
        r["id"]: r["next_tick_at"]
        for r in conn.execute("select id, next_tick_at from fairqueue.schedules").fetchall()
    }
    # Exactly the ticks from where each schedule stood to where the sweeps moved it: none
    # lost, none twice.
    expected = sorted(
        (schedule_id, tick)
        for schedule_id, was in before.items()
        for tick in minute_marks(was, after[schedule_id])
    )
    assert tick_jobs(conn) == expected
    assert sum(made) == len(expected) >= 3000
    # A sweep retried (an invocation run again) finds every tick made.
    with connect(dsn, autocommit=True) as again:
        assert sweep_schedules(again, None).ticks_made == 0
    assert len(tick_jobs(conn)) == len(expected)


def three_hours_stopped(dsn: str, conn: Connection, cron: str, catch_up: str) -> datetime:
    """A schedule whose sweeper stopped three hours ago: its next tick is the first one after
    then. Returns that time."""
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "stopped", "tick", cron=cron, tenant_id="t", catch_up=catch_up)  # type: ignore[arg-type]
    conn.execute(
        "update fairqueue.schedules set next_tick_at = %(at)s",
        {"at": (now_of(conn) - timedelta(hours=3))},
    )
    with connect(dsn, autocommit=True) as app:
        schedule = get_schedule(app, "stopped", tenant_id="t")
        first = schedule.rule().next_after(now_of(conn) - timedelta(hours=3))
    conn.execute("update fairqueue.schedules set next_tick_at = %(at)s", {"at": first})
    return first


@pytest.mark.parametrize("catch_up", ["none", "one", "all"])
def test_a_sweeper_stopped_three_hours_follows_catch_up(dsn, conn, catch_up: str) -> None:
    first = three_hours_stopped(dsn, conn, "0 * * * *", catch_up)
    missed = [
        first + timedelta(hours=h) for h in range(3) if first + timedelta(hours=h) <= now_of(conn)
    ]
    assert len(missed) == 3
    # on_time of a second: the latest hourly tick is minutes late, so it counts as missed.
    with connect(dsn, autocommit=True) as app:
        made = sweep_schedules(app, None, on_time=timedelta(seconds=1)).ticks_made
    jobs = [tick for _, tick in tick_jobs(conn)]
    expected = {"none": [], "one": missed[-1:], "all": missed}[catch_up]
    assert jobs == expected
    assert made == len(expected)
    with connect(dsn, autocommit=True) as app:
        schedule = get_schedule(app, "stopped", tenant_id="t")
    # Whatever was made, the schedule now owes the first tick after now.
    assert schedule.next_tick_at == missed[-1] + timedelta(hours=1)
    assert schedule.last_tick_at == (expected[-1] if expected else None)


def test_catch_up_all_makes_at_most_its_maximum_of_the_latest_ticks(dsn, conn) -> None:
    three_hours_stopped(dsn, conn, "* * * * *", "all")
    with connect(dsn, autocommit=True) as app:
        made = sweep_schedules(app, None).ticks_made
    jobs = [tick for _, tick in tick_jobs(conn)]
    assert made == len(jobs) == MAX_CATCH_UP
    # The latest, a minute apart, up to the minute the sweep ran in.
    assert jobs == minute_marks(jobs[0], jobs[-1] + timedelta(minutes=1))
    assert now_of(conn) - jobs[-1] < timedelta(minutes=1)


def test_catch_up_none_still_makes_the_tick_that_is_on_time(dsn, conn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "minutely", "tick", cron="* * * * *", catch_up="none")
    conn.execute("update fairqueue.schedules set next_tick_at = date_trunc('minute', now())")
    with connect(dsn, autocommit=True) as app:
        assert sweep_schedules(app, None, on_time=ON_TIME).ticks_made == 1


def test_a_paused_schedule_makes_nothing_and_resumes_at_its_next_tick(dsn, conn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "paused", "tick", every=timedelta(minutes=1), tenant_id="t")
        pause_schedule(app, "paused", tenant_id="t")
    conn.execute("update fairqueue.schedules set next_tick_at = now() - interval '1 hour'")
    with connect(dsn, autocommit=True) as app:
        assert sweep_schedules(app, None).ticks_made == 0
        resume_schedule(app, "paused", tenant_id="t")
        resumed_at = now_of(app)
        schedule = get_schedule(app, "paused", tenant_id="t")
    assert tick_jobs(conn) == []
    # The hour it was paused is not made: its next tick is the first whole minute after now.
    next_minute = resumed_at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert schedule.next_tick_at == next_minute
    # When that tick comes (its row dated so that it has), the sweep makes it, and it alone.
    conn.execute("update fairqueue.schedules set next_tick_at = date_trunc('minute', now())")
    with connect(dsn, autocommit=True) as app:
        assert sweep_schedules(app, None).ticks_made == 1
    assert [tick for _, tick in tick_jobs(conn)] == [now_of(conn).replace(second=0, microsecond=0)]


def test_the_sweepers_run_row_counts_the_ticks_it_made(dsn, conn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "counted", "tick", every=timedelta(minutes=1), catch_up="all")
    conn.execute(
        "update fairqueue.schedules set next_tick_at = date_trunc('minute', now())"
        " - interval '4 minutes'"
    )
    result = sweep(dsn, [TICK], declared=[])
    assert result.schedule_ticks == 5
    with connect(dsn, autocommit=True) as app:
        row = get_run(app, result.run_id)
    assert row is not None
    assert row.summary["schedule_ticks"] == 5
    # A tick's job is an ordinary job of its type, with the schedule's attempts.
    jobs = conn.execute("select type, status, max_attempts from fairqueue.jobs").fetchall()
    assert {(j["type"], j["status"], j["max_attempts"]) for j in jobs} == {("tick", "pending", 5)}


def test_a_rule_written_past_the_checks_is_put_off_and_the_others_tick(dsn, conn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "good", "tick", every=timedelta(minutes=1), tenant_id="t")
        # The door itself takes what Python would refuse; the sweep must not stop at it.
        app.execute(
            "select * from fairqueue.schedule_add('t', 'bad', 'tick', 'not a cron', null,"
            " 'Nowhere/Atlantis', '{}', null, 3, 'one', now())"
        )
    conn.execute("update fairqueue.schedules set next_tick_at = date_trunc('minute', now())")
    with connect(dsn, autocommit=True) as app:
        assert sweep_schedules(app, None).ticks_made == 1
        bad = get_schedule(app, "bad", tenant_id="t")
        swept_at = now_of(app)
    assert timedelta(minutes=59) < bad.next_tick_at - swept_at <= timedelta(hours=1)
    assert bad.last_job_id is None

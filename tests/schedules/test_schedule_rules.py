"""What a schedule's rule makes: the daylight-saving days in Europe/Berlin and America/New_York
give the ticks docs/guide/schedules.md documents, and every bad input is refused with nothing
stored. The DST days are in the past: each schedule's next tick is dated back to the day
before, and one sweep with catch_up "all" makes every tick since."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fairqueue import (
    InvalidPayload,
    InvalidSchedule,
    Schedule,
    UnknownJobType,
    add_schedule,
    connect,
)
from fairqueue.roles.scheduling import sweep_schedules
from support.schedule_stages import TICK, tick_jobs

pytestmark = pytest.mark.timeout(60)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (timezone, cron, the day before the first tick, the ticks in UTC)
DST_DAYS = [
    # Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST. 02:30 does not exist that day: the
    # tick comes when the clocks jump, at 03:00 CEST.
    (
        "Europe/Berlin",
        "30 2 28-30 3 *",
        "2026-03-27",
        ["2026-03-28 01:30", "2026-03-29 01:00", "2026-03-30 00:30"],
    ),
    # Berlin, 25 October 2026: 03:00 CEST becomes 02:00 CET. 02:30 happens twice: one tick,
    # the first time.
    (
        "Europe/Berlin",
        "30 2 24-26 10 *",
        "2026-10-23",
        ["2026-10-24 00:30", "2026-10-25 00:30", "2026-10-26 01:30"],
    ),
    # New York, 8 March 2026: 02:00 EST becomes 03:00 EDT.
    (
        "America/New_York",
        "30 2 7-9 3 *",
        "2026-03-06",
        ["2026-03-07 07:30", "2026-03-08 07:00", "2026-03-09 06:30"],
    ),
    # New York, 1 November 2026: 02:00 EDT becomes 01:00 EST; 01:30 happens twice.
    (
        "America/New_York",
        "30 1 31 10 *",
        "2026-10-30",
        ["2026-10-31 05:30"],
    ),
    (
        "America/New_York",
        "30 1 1-2 11 *",
        "2026-10-31",
        ["2026-11-01 05:30", "2026-11-02 06:30"],
    ),
]


@pytest.mark.parametrize(("timezone", "cron", "before", "ticks"), DST_DAYS)
def test_the_daylight_saving_days_give_the_documented_ticks(
    dsn, conn, timezone: str, cron: str, before: str, ticks: list[str]
) -> None:
    assert TICK.name == "tick"
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "dst", "tick", cron=cron, timezone=timezone, catch_up="all")
    conn.execute("update fairqueue.schedules set next_tick_at = %(at)s", {"at": utc(before)})
    with connect(dsn, autocommit=True) as app:
        sweep_schedules(app, None)
    assert [tick for _, tick in tick_jobs(conn)] == [utc(t) for t in ticks]


def test_an_hourly_schedule_ticks_through_both_passes_of_the_hour_repeated(dsn, conn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(
            app, "hourly", "tick", cron="0 * 25 10 *", timezone="Europe/Berlin", catch_up="all"
        )
    conn.execute("update fairqueue.schedules set next_tick_at = '2026-10-24 00:00Z'")
    with connect(dsn, autocommit=True) as app:
        sweep_schedules(app, None)
    made = [tick for _, tick in tick_jobs(conn)]
    # A 25-hour day, every one of its real hours once: 02:00 CEST (00:00 UTC) and 02:00 CET
    # (01:00 UTC) both.
    start = utc("2026-10-24 22:00")
    assert made == [start + timedelta(hours=h) for h in range(25)]


BAD = [
    ({"cron": "61 * * * *"}, InvalidSchedule, "cron '61 * * * *' does not parse"),
    ({"cron": "* * * *"}, InvalidSchedule, "it needs five fields"),
    ({"cron": "0 0 * * * *"}, InvalidSchedule, "it needs five fields"),
    ({"cron": "every day"}, InvalidSchedule, "does not parse"),
    ({"cron": "0 0 30 2 *"}, InvalidSchedule, "cron '0 0 30 2 *' does not parse"),
    ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, InvalidSchedule, "'Mars/Olympus'"),
    ({"cron": "0 3 * * *", "timezone": "../etc/passwd"}, InvalidSchedule, "unknown timezone"),
    ({"every": timedelta(seconds=59)}, InvalidSchedule, "every must be a minute or more"),
    ({"every": timedelta(seconds=90.5)}, InvalidSchedule, "every must be whole seconds"),
    ({"every": 60}, InvalidSchedule, "every must be a timedelta"),
    ({}, InvalidSchedule, "exactly one of cron and every"),
    (
        {"cron": "0 3 * * *", "every": timedelta(hours=1)},
        InvalidSchedule,
        "exactly one of cron and every",
    ),
    ({"cron": "0 3 * * *", "catch_up": "some"}, InvalidSchedule, "catch_up must be one of"),
    ({"cron": "0 3 * * *", "job_type": "nope"}, UnknownJobType, "unknown job type 'nope'"),
    ({"cron": "0 3 * * *", "payload": [1]}, InvalidPayload, "must be a JSON object"),
    ({"cron": "0 3 * * *", "name": ""}, InvalidPayload, "schedule name must be"),
]


@pytest.mark.parametrize(("given", "error", "named"), BAD)
def test_bad_input_is_refused_with_nothing_stored(dsn, conn, given, error, named) -> None:
    arguments = {"name": "s", "job_type": "tick", "tenant_id": "t", **given}
    with connect(dsn, autocommit=True) as app, pytest.raises(error) as refused:
        add_schedule(app, arguments.pop("name"), arguments.pop("job_type"), **arguments)
    assert named in str(refused.value)
    assert conn.execute("select count(*) as n from fairqueue.schedules").fetchone()["n"] == 0
    if error is InvalidSchedule:
        # Declared in code, the same rule is refused as the Schedule is made.
        with pytest.raises(InvalidSchedule):
            Schedule("s", "tick", **{k: v for k, v in given.items() if k != "job_type"})


def test_a_name_the_tenant_has_is_refused_and_the_first_kept(dsn, conn) -> None:
    from fairqueue import DuplicateSchedule

    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "s", "tick", cron="0 3 * * *", tenant_id="t")
        with pytest.raises(DuplicateSchedule, match="tenant 't' already has a schedule named 's'"):
            add_schedule(app, "s", "tick", cron="0 4 * * *", tenant_id="t")
        # Another tenant may use the name.
        add_schedule(app, "s", "tick", cron="0 4 * * *", tenant_id="u")
    rows = conn.execute("select tenant_id, cron from fairqueue.schedules order by 1").fetchall()
    assert [(r["tenant_id"], r["cron"]) for r in rows] == [("t", "0 3 * * *"), ("u", "0 4 * * *")]

"""A tenant's schedules are its own: another tenant's session can neither list, pause, resume
nor remove them (row counts), nor reach the sweep's doors; and the schedules declared in code
are kept in step by the sweeper."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from fairqueue import (
    UnknownSchedule,
    add_schedule,
    connect,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
)
from fairqueue.db import Connection
from fairqueue.roles.scheduling import sweep_schedules
from fairqueue.roles.sweeper import sweep
from fairqueue.schedules import Schedule, find_schedules
from fairqueue.tenancy import tenant_transaction
from support.schedule_stages import TICK

pytestmark = pytest.mark.timeout(60)


def rows(conn: Connection) -> list[tuple[str, str, bool]]:
    found = conn.execute(
        "select tenant_id, name, paused from fairqueue.schedules order by 1, 2"
    ).fetchall()
    return [(r["tenant_id"], r["name"], r["paused"]) for r in found]


def test_tenant_b_cannot_list_pause_resume_or_remove_as_schedules(dsn, conn) -> None:
    assert TICK.name == "tick"
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "nightly", "tick", cron="0 3 * * *", tenant_id="a")
        add_schedule(app, "often", "tick", every=timedelta(minutes=5), tenant_id="a")
        add_schedule(app, "own", "tick", cron="0 4 * * *", tenant_id="b")
        assert [s.name for s in list_schedules(app, tenant_id="a")] == ["nightly", "often"]
        assert [s.name for s in list_schedules(app, tenant_id="b")] == ["own"]
        for act in (pause_schedule, resume_schedule, remove_schedule):
            with pytest.raises(UnknownSchedule, match="tenant 'b' has no schedule named"):
                act(app, "nightly", tenant_id="b")
    with connect(dsn) as app, tenant_transaction(app, "b"):
        # B's clamp sees its one row; the doors under B's clamp change none of A's.
        count = app.execute("select count(*) as n from fairqueue.schedules").fetchone()
        assert count is not None and count["n"] == 1
        for door in (
            "select id from fairqueue.schedule_remove('b', 'nightly')",
            "select id from fairqueue.schedule_set_paused('b', 'nightly', true, null)",
        ):
            assert app.execute(door).fetchone() == {"id": None}
        removed = app.execute("select matches, id from fairqueue.schedule_remove('a', 'nightly')")
        assert removed.fetchone() == {"matches": False, "id": None}
    assert rows(conn) == [("a", "nightly", False), ("a", "often", False), ("b", "own", False)]


@pytest.mark.parametrize(
    "statement",
    [
        "update fairqueue.schedules set paused = true",
        "delete from fairqueue.schedules",
        "insert into fairqueue.schedules (name, job_type, cron, max_attempts, next_tick_at)"
        " values ('x', 'tick', '* * * * *', 1, now())",
    ],
)
def test_the_application_role_writes_schedules_only_through_the_doors(
    dsn, conn, statement: str
) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "nightly", "tick", cron="0 3 * * *", tenant_id="a")
    with (
        connect(dsn) as app,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
        tenant_transaction(app, "a"),
    ):
        app.execute(statement)
    assert rows(conn) == [("a", "nightly", False)]


@pytest.mark.parametrize(
    "door",
    [
        "select * from fairqueue.schedules_due(10)",
        "select * from fairqueue.schedule_ticks('{}', '{}', '{}', '{}', '{}', '{}')",
        "select * from fairqueue.schedules_declare('[]')",
    ],
)
def test_a_tenants_session_cannot_use_the_sweeps_doors(dsn, conn, door: str) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "nightly", "tick", cron="0 3 * * *", tenant_id="a")
    with (
        connect(dsn) as app,
        pytest.raises(psycopg.errors.InvalidParameterValue, match="clamped to one"),
        tenant_transaction(app, "b"),
    ):
        app.execute(door)
    assert rows(conn) == [("a", "nightly", False)]


def test_an_operator_finds_every_tenants_schedules(dsn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "nightly", "tick", cron="0 3 * * *", tenant_id="a")
        add_schedule(app, "nightly", "tick", cron="0 3 * * *", tenant_id="b")
        add_schedule(app, "system", "tick", cron="0 3 * * *")
        found = find_schedules(app)
        assert [(s.tenant_id, s.name) for s in found] == [
            (None, "system"),
            ("a", "nightly"),
            ("b", "nightly"),
        ]
        assert [s.tenant_id for s in find_schedules(app, tenant_id="b")] == ["b"]


def test_the_sweep_keeps_the_declared_schedules_in_step(dsn, conn) -> None:
    declared = [
        Schedule("report", "tick", cron="0 3 * * *", timezone="Europe/Berlin"),
        Schedule("refresh", "tick", every=timedelta(hours=1), tenant_id="a"),
    ]
    with connect(dsn, autocommit=True) as app:
        # A schedule made at run time of the same tenant and name is the tenant's own.
        add_schedule(app, "refresh", "tick", cron="0 4 * * *", tenant_id="a")
        made = sweep_schedules(app, declared)
        assert (made.declared_changed, made.declared_removed) == (1, 0)
        assert sweep_schedules(app, declared).declared_changed == 0
        changed = [Schedule("report", "tick", cron="0 4 * * *"), declared[1]]
        assert sweep_schedules(app, changed).declared_changed == 1
        assert sweep_schedules(app, []).declared_removed == 1
    found = conn.execute(
        "select tenant_id, name, cron, declared from fairqueue.schedules order by 2"
    ).fetchall()
    assert [tuple(r.values()) for r in found] == [("a", "refresh", "0 4 * * *", False)]


def test_the_sweeper_reads_fairqueue_schedules(dsn, conn, monkeypatch) -> None:
    monkeypatch.setenv("FAIRQUEUE_SCHEDULES", "support.schedule_stages:SCHEDULES")
    sweep(dsn, [TICK])
    found = conn.execute("select name, cron, timezone, declared from fairqueue.schedules")
    assert [tuple(r.values()) for r in found.fetchall()] == [
        ("nightly-report", "0 3 * * *", "Europe/Berlin", True)
    ]
    # Unset, the declared schedules are left as they are.
    monkeypatch.delenv("FAIRQUEUE_SCHEDULES")
    sweep(dsn, [TICK])
    assert len(conn.execute("select id from fairqueue.schedules").fetchall()) == 1


def test_a_declared_schedule_of_an_unknown_type_leaves_the_table_and_the_ticks_go_on(
    dsn, conn
) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "kept", "tick", every=timedelta(minutes=1))
    conn.execute("update fairqueue.schedules set next_tick_at = date_trunc('minute', now())")
    with connect(dsn, autocommit=True) as app:
        swept = sweep_schedules(app, [Schedule("gone", "no_such_stage", cron="0 3 * * *")])
    assert swept.declared_problem is not None
    assert "unknown job type 'no_such_stage'" in swept.declared_problem
    assert swept.ticks_made == 1
    names = conn.execute("select name from fairqueue.schedules").fetchall()
    assert [r["name"] for r in names] == ["kept"]

"""The library's own connections work as fairqueue_app whatever the login: a superuser's run
is held by the tenant policies like any other, and a login that bypasses them and cannot become
the application role is refused in production."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from fairqueue import ConfigurationError, Job, Stage, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.roles.function import ConnectionCache

SEEN: list[tuple[str, int]] = []


def whoami(job: Job) -> None:
    row = job.conn.execute(
        "select current_user as who, (select count(*) from fairqueue.all_jobs) as visible"
    ).fetchone()
    assert row is not None
    SEEN.append((row["who"], row["visible"]))


WHOAMI = Stage("whoami", handler=whoami)


def test_a_run_on_a_superuser_login_works_as_the_application_role(admin_dsn, conn) -> None:
    SEEN.clear()
    enqueue(conn, "whoami", {}, tenant_id="a")
    for _ in range(3):
        enqueue(conn, "whoami", {}, tenant_id="b")

    result = run_pipeline(admin_dsn, [WHOAMI])

    assert result.jobs_done == 4
    # Each handler sees its own tenant's jobs only: the policies hold, superuser login or not.
    assert sorted(SEEN) == [("fairqueue_app", 1)] + [("fairqueue_app", 3)] * 3


def test_a_functions_cached_connection_works_as_the_application_role(admin_dsn) -> None:
    cache = ConnectionCache(lambda: admin_dsn)
    try:
        assert cache.get().execute("select current_user as u").fetchone()["u"] == "fairqueue_app"
    finally:
        cache.close()


def test_a_callers_own_connection_is_left_as_it_is(admin_dsn) -> None:
    with connect(admin_dsn) as mine:
        assert mine.execute("select current_user as u").fetchone()["u"] != "fairqueue_app"
    with connect(admin_dsn, as_app_role=True) as switched:
        switched.rollback()  # the role is the session's, not the first transaction's
        assert switched.execute("select current_user as u").fetchone()["u"] == "fairqueue_app"


@pytest.fixture
def bypassing_login(admin_dsn: str, conn: Connection) -> Iterator[str]:
    """A login with BYPASSRLS that is not a member of fairqueue_app."""
    name = f"fq_bypass_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("create role {} login bypassrls").format(sql.Identifier(name)))
    try:
        yield make_conninfo(admin_dsn, user=name)
    finally:
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


def test_a_login_that_bypasses_the_policies_and_cannot_become_the_app_role_is_refused_in_production(
    bypassing_login: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    with pytest.raises(ConfigurationError, match="bypasses row-level security and cannot become"):
        connect(bypassing_login, autocommit=True, as_app_role=True)
    monkeypatch.delenv("FAIRQUEUE_ENV")
    with (
        caplog.at_level(logging.WARNING, logger="fairqueue.db"),
        connect(bypassing_login, autocommit=True, as_app_role=True) as kept,
    ):
        assert kept.execute("select current_user as u").fetchone()["u"].startswith("fq_bypass")
    assert "tenants are kept apart by the library's own statements alone" in caplog.text


def test_a_login_the_policies_hold_sets_nothing(admin_dsn: str, conn: Connection) -> None:
    name = f"fq_member_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("create role {} login in role fairqueue_app").format(sql.Identifier(name)))
    try:
        member = make_conninfo(admin_dsn, user=name)
        with connect(member, autocommit=True, as_app_role=True) as app:
            row = app.execute("select current_user as u, current_setting('role') as r").fetchone()
        # No session state for a transaction pooler to trip on: the login is used as it is.
        assert (row["u"], row["r"]) == (name, "none")
    finally:
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


def test_an_unmigrated_database_is_not_a_login_problem(server_dsn: str) -> None:
    name = f"fq_unmigrated_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        target = make_conninfo(server_dsn, dbname=name)
        with connect(target, autocommit=True, as_app_role=True) as fresh:
            assert fresh.execute("select 1 as one").fetchone()["one"] == 1
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("drop database {} (force)").format(sql.Identifier(name)))

"""Behind a transaction pooler (``FAIRQUEUE_POOLER=transaction``) the library leaves nothing in
a session that the next transaction, on whichever backend the pooler picks, would miss or trip
over: no server-side prepared statements, no session settings, no advisory locks, no LISTEN."""

from __future__ import annotations

from typing import Any

import pytest

from fairqueue import Stage, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.doorbells import PostgresListener
from fairqueue.errors import ConfigurationError
from fairqueue.lanes import add_credits, admit

STAGE = Stage("pooled_look", handler=lambda job: None, batch=5)
LANED = Stage("pooled_laned", handler=lambda job: None, credit_cost=1)


def session_state(conn: Connection) -> dict[str, Any]:
    """What a session holds that a transaction pooler would not carry to the next backend."""
    row = conn.execute(
        "select"
        " (select count(*) from pg_prepared_statements) as prepared,"
        " (select array_agg(name order by name) from pg_settings where source = 'session')"
        "   as settings,"
        " (select count(*) from pg_locks where pid = pg_backend_pid()"
        "   and locktype = 'advisory') as advisory_locks,"
        " (select count(*) from pg_listening_channels()) as listening,"
        " (select count(*) from pg_class where relpersistence = 't') as temporary_tables"
    ).fetchone()
    assert row is not None
    return dict(row)


def work(conn: Connection, dsn: str) -> None:
    """The library's calls on one connection: enqueue, admit, and runs that claim, complete
    and record more than five times each (psycopg prepares a statement on its sixth run)."""
    add_credits(conn, "acme", 10, note="pooled")
    for n in range(40):
        enqueue(conn, STAGE.name, {"n": n}, tenant_id="acme", group_id=f"g{n % 4}")
    for n in range(3):
        admit(conn, "ada", LANED.name, {"n": n}, tenant_id="acme")
    for _ in range(3):
        run_pipeline(dsn, [STAGE, LANED], conn=conn)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pooler_setting", ["transaction", None])
def test_the_library_leaves_no_session_state_setting_or_not(
    dsn: str, monkeypatch: pytest.MonkeyPatch, pooler_setting: str | None
) -> None:
    if pooler_setting is None:
        monkeypatch.delenv("FAIRQUEUE_POOLER", raising=False)
    else:
        monkeypatch.setenv("FAIRQUEUE_POOLER", pooler_setting)
    with connect(dsn, autocommit=True, as_app_role=True) as conn:
        before = session_state(conn)
        work(conn, dsn)
        after = session_state(conn)
    assert (
        before
        == after
        == {
            "prepared": 0,
            "settings": before["settings"],
            "advisory_locks": 0,
            "listening": 0,
            "temporary_tables": 0,
        }
    )


@pytest.mark.timeout(60)
@pytest.mark.direct_only("prepared statements through a transaction pooler are the fault itself")
def test_a_connection_that_prepares_is_seen_by_the_check(dsn: str) -> None:
    # The check above can fail: the same calls on a connection that prepares leave them.
    with connect(dsn, autocommit=True, as_app_role=True) as conn:
        conn.prepare_threshold = 5
        work(conn, dsn)
        assert session_state(conn)["prepared"] > 0


@pytest.mark.timeout(30)
def test_a_login_that_would_need_set_role_is_refused_through_a_pooler(
    admin_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUEUE_POOLER", "transaction")
    with pytest.raises(ConfigurationError, match="member of fairqueue_app"):
        connect(admin_dsn, autocommit=True, as_app_role=True)


@pytest.mark.timeout(30)
def test_the_doorbells_listen_on_the_direct_url_behind_a_pooler(
    dsn: str, admin_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUEUE_POOLER", "transaction")
    monkeypatch.delenv("FAIRQUEUE_LISTEN_DATABASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="FAIRQUEUE_LISTEN_DATABASE_URL"):
        PostgresListener(dsn)
    # The direct URL is taken instead of the one given, which stands for the pooler's; a
    # bypassing login may SET ROLE there, since that session is its own.
    monkeypatch.setenv("FAIRQUEUE_LISTEN_DATABASE_URL", admin_dsn)
    with (
        PostgresListener("postgresql://nowhere.invalid/none"),
        connect(admin_dsn, autocommit=True) as conn,
    ):
        row = conn.execute(
            "select count(*) as n from pg_stat_activity"
            " where datname = current_database() and query ilike 'listen%%'"
        ).fetchone()
        assert row == {"n": 1}


@pytest.mark.timeout(30)
def test_the_pooled_run_connects_through_the_pooler(
    dsn: str, pooler: tuple[str, int] | None
) -> None:
    if pooler is None:
        pytest.skip("the direct run (FAIRQUEUE_TEST_POOLER unset)")
    with connect(dsn, autocommit=True, as_app_role=True) as conn:
        assert (conn.info.host, conn.info.port) == pooler
        assert conn.prepare_threshold is None
        row = conn.execute("select session_user as login").fetchone()
        assert row == {"login": "fairqueue_pooled"}

"""Which role the library's own connections work as, and what that leaves on the session.

Outside production a superuser login works as fairqueue_app through the startup parameter
`options=-c role=fairqueue_app`: the backend session's role from its start, which RESET ROLE
returns to and no other client shares. Nothing is SET on the session, so nothing reaches
another client through a transaction pooler, FAIRQUEUE_POOLER or not. Under
FAIRQUEUE_ENV=production a login that bypasses row-level security is refused at start."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from fairqueue import ConfigurationError, Stage, api, connect, run_pipeline
from fairqueue.db import Connection, work_as_app_role
from fairqueue.dev import pooler as local_pooler

NOTHING = Stage("login_role_noop", handler=lambda job: None)


def who(conn: psycopg.Connection) -> tuple[str, str, str]:
    row = conn.execute(
        "select session_user::text, current_user::text, current_setting('role')"
    ).fetchone()
    assert row is not None
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


@pytest.mark.timeout(30)
def test_a_superuser_login_works_as_the_app_role_from_the_sessions_start(admin_dsn: str) -> None:
    with connect(admin_dsn, autocommit=True, as_app_role=True) as conn:
        assert who(conn) == ("postgres", "fairqueue_app", "fairqueue_app")
        # A handler's RESET ROLE returns to the session's own role, not to the login.
        conn.execute("reset role")
        assert who(conn) == ("postgres", "fairqueue_app", "fairqueue_app")


@pytest.mark.timeout(30)
def test_a_superuser_connection_that_did_not_get_the_role_is_refused_and_left_unset(
    admin_dsn: str,
) -> None:
    # What a pooler that drops the startup parameter hands over, and what the API's pool opens
    # from a superuser's URL: the check refuses it rather than switch its session.
    with connect(admin_dsn, autocommit=True) as conn:
        with pytest.raises(ConfigurationError, match="does not work as fairqueue_app"):
            work_as_app_role(conn)
        assert who(conn) == ("postgres", "postgres", "none")


@pytest.mark.timeout(30)
def test_the_apis_pool_opens_a_superuser_login_as_the_app_role(admin_dsn: str) -> None:
    connections = api.ApiConnections(admin_dsn, 1)
    try:
        with connections.connection() as conn:
            assert who(conn) == ("postgres", "fairqueue_app", "fairqueue_app")
    finally:
        connections.close()


@pytest.mark.timeout(30)
def test_production_refuses_the_apis_pool_of_a_superuser_login_at_start(
    admin_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    with pytest.raises(ConfigurationError, match=r"FAIRQUEUE_ENV=production refuses"):
        api.ApiConnections(admin_dsn, 1)


@pytest.fixture
def pgbouncer(server_dsn: str) -> Iterator[tuple[str, int]]:
    """A PgBouncer in transaction mode with one server connection a database and login, so
    that every client of a login shares one backend; it lets the superuser in."""
    reason = local_pooler.why_not(server_dsn)
    if reason is not None:
        pytest.skip(reason)
    with local_pooler.pgbouncer(server_dsn, server_connections=1, logins=("postgres",)) as found:
        yield found


@pytest.mark.timeout(60)
def test_through_an_undeclared_pooler_a_superuser_login_is_refused_and_leaves_nothing(
    admin_dsn: str, pgbouncer: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAIRQUEUE_POOLER", raising=False)
    host, port = pgbouncer
    pooled = make_conninfo(admin_dsn, host=host, port=port)

    with pytest.raises(ConfigurationError, match="Log in as a member of fairqueue_app"):
        connect(pooled, autocommit=True, as_app_role=True)
    with pytest.raises(ConfigurationError, match="Log in as a member of fairqueue_app"):
        run_pipeline(pooled, [NOTHING])

    # Another client of the pooler, on the backend the library's connections had: it works as
    # its own login.
    with psycopg.connect(pooled, autocommit=True) as other:
        assert who(other) == ("postgres", "postgres", "none")


@pytest.fixture
def member_dsn(admin_dsn: str, conn: Connection) -> Iterator[str]:
    """A login that is a member of fairqueue_app and bypasses nothing."""
    name = f"fq_member_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("create role {} login in role fairqueue_app").format(sql.Identifier(name)))
    try:
        yield make_conninfo(admin_dsn, user=name)
    finally:
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


@pytest.mark.timeout(30)
def test_production_refuses_a_superuser_login_at_start(
    admin_dsn: str, member_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    fix = r"FAIRQUEUE_ENV=production refuses .* log in as a member of fairqueue_app"
    with pytest.raises(ConfigurationError, match=fix):
        connect(admin_dsn, autocommit=True, as_app_role=True)
    # Working as the application role from the start does not make the login another one: code
    # on the connection could SET ROLE back to the superuser.
    with pytest.raises(ConfigurationError, match=fix):
        connect(make_conninfo(admin_dsn, options="-c role=fairqueue_app"), as_app_role=True)
    with pytest.raises(ConfigurationError, match=fix):
        run_pipeline(admin_dsn, [NOTHING])

    with connect(member_dsn, autocommit=True, as_app_role=True) as conn:
        assert who(conn)[1:] == (conninfo_user(member_dsn), "none")


def conninfo_user(dsn: str) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(dsn)["user"])

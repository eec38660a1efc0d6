"""Every test talks to a real Postgres: DATABASE_URL when set, else an embedded one.

The schema is migrated once into a template database; each test gets a fresh clone of it.
`make test` runs the suite in two processes (pytest-xdist), each with its own template.
"""

from __future__ import annotations

import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from fairqueue.db import Connection, connect
from fairqueue.dev import pooler as local_pooler
from fairqueue.dev.embedded import embedded_dsn
from fairqueue.migrate import migrate
from support import pooler as pooler_support
from support.databases import cloned_database, dsn_for


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """A DSN of the server's maintenance database."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="fairqueue-test-pg-") as data_dir:
        yield embedded_dsn(Path(data_dir))


# The suite may run in several processes (pytest-xdist), each with its own template, against
# one server: roles are the server's, so what creates them goes one process at a time.
ROLES_LOCK_KEY = 0x66710001


@contextmanager
def one_process_at_a_time(server_dsn: str) -> Iterator[None]:
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute("select pg_advisory_lock(%s)", (ROLES_LOCK_KEY,))
        yield


def utc_day(admin: psycopg.Connection[Any]) -> date:
    row = admin.execute("select (now() at time zone 'UTC')::date").fetchone()
    assert row is not None
    return cast(date, row[0])


class Template:
    """The migrated database each test's database is cloned from. The migration makes the
    finished jobs' days around its own UTC day, so a suite that runs past midnight migrates a
    new template: every test starts from what a migration made that day."""

    def __init__(self, server_dsn: str) -> None:
        self.server_dsn = server_dsn
        self.name = f"fq_template_{os.getpid()}"
        self.day: date | None = None

    def current(self, admin: psycopg.Connection[Any]) -> str:
        """The template's name, migrated again first when the server's UTC day has changed;
        `admin` is an autocommit connection to the server as its superuser."""
        today = utc_day(admin)
        if self.day != today:
            admin.execute(
                sql.SQL("drop database if exists {} (force)").format(sql.Identifier(self.name))
            )
            admin.execute(sql.SQL("create database {}").format(sql.Identifier(self.name)))
            with (
                one_process_at_a_time(self.server_dsn),
                connect(dsn_for(self.server_dsn, self.name)) as conn,
            ):
                migrate(conn)
            self.day = today
        return self.name


@pytest.fixture(scope="session")
def template_db(server_dsn: str) -> Iterator[Template]:
    template = Template(server_dsn)
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        template.current(admin)
    yield template
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("drop database if exists {} (force)").format(sql.Identifier(template.name))
        )


@pytest.fixture
def admin_dsn(server_dsn: str, template_db: Template) -> Iterator[str]:
    """A fresh, migrated database for this test, as the server's superuser."""
    name = f"fq_test_{uuid.uuid4().hex[:12]}"
    with cloned_database(server_dsn, name, template_db.current) as dsn:
        yield dsn


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In the pooled run, the tests of faults the pooler hides from its clients are skipped,
    with their reason."""
    if not pooler_support.wanted():
        return
    for item in items:
        marker = item.get_closest_marker("direct_only")
        if marker is not None:
            reason = marker.args[0] if marker.args else "needs a direct connection"
            item.add_marker(pytest.mark.skip(reason=f"through a pooler: {reason}"))


@pytest.fixture(scope="session")
def pooler(server_dsn: str) -> Iterator[tuple[str, int] | None]:
    """The PgBouncer of the pooled run (tests/pooler.py), or None in the direct run."""
    if not pooler_support.wanted():
        yield None
        return
    with one_process_at_a_time(server_dsn):
        local_pooler.create_login(server_dsn)
    with local_pooler.pgbouncer(server_dsn) as address:
        yield address


@pytest.fixture
def dsn(admin_dsn: str, pooler: tuple[str, int] | None, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's database as the library runs in production: the application role, which
    owns nothing and is held to the tenant policies. In the pooled run, through PgBouncer in
    transaction mode, with the library told so and its LISTEN given a direct connection."""
    direct = as_app_role(admin_dsn)
    if pooler is None:
        return direct
    monkeypatch.setenv("FAIRQUEUE_POOLER", "transaction")
    monkeypatch.setenv("FAIRQUEUE_LISTEN_DATABASE_URL", direct)
    return local_pooler.pooled_dsn(admin_dsn, *pooler)


@pytest.fixture
def production_dsn(admin_dsn: str, server_dsn: str) -> str:
    """The test's database as a production deployment logs in: a member of fairqueue_app that
    bypasses nothing (``FAIRQUEUE_ENV=production`` refuses a superuser login, whatever role it
    then works as). Direct, and the pooled run's login."""
    with one_process_at_a_time(server_dsn):
        local_pooler.create_login(server_dsn)
    return make_conninfo(admin_dsn, user=local_pooler.POOLED_LOGIN, password="")


def as_app_role(dsn: str) -> str:
    return make_conninfo(dsn, options="-c role=fairqueue_app")


@pytest.fixture
def conn(admin_dsn: str) -> Iterator[Connection]:
    """An autocommit superuser connection to the test's database, for setting up and looking
    at rows across tenants."""
    with connect(admin_dsn, autocommit=True) as c:
        yield c


@pytest.fixture(autouse=True)
def library_logger_restored() -> Iterator[None]:
    """A function loaded in this process sends the library's log lines through its own
    Powertools logger; the next test gets the library logger back as it was."""
    library = logging.getLogger("fairqueue")
    handlers, propagate, level = list(library.handlers), library.propagate, library.level
    yield
    library.handlers[:] = handlers
    library.propagate = propagate
    library.setLevel(level)


@pytest.fixture(autouse=True)
def stage_registry_restored() -> Iterator[None]:
    """Stages a test declares are known to enqueue for that test only; the ones its modules
    declared at import stay known."""
    from fairqueue import stage

    known = dict(stage.known_types())
    yield
    with stage._registry_lock:
        stage._registry.clear()
        stage._registry.update(known)

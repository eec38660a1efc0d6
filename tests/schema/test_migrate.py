import os
import threading

import pytest

from fairqueue import connect, migrate
from fairqueue.migrate import definitions, migrations


def test_migrations_are_numbered_in_order() -> None:
    found = migrations()
    assert [m.version for m in found] == sorted(m.version for m in found)
    assert found[0].name == "0001_core.sql"


def test_migrate_twice_applies_nothing_the_second_time(admin_dsn: str) -> None:
    with connect(admin_dsn) as conn:
        assert migrate(conn) == []  # the template already holds every migration
        rows = conn.execute("select version from fairqueue.migrations order by 1").fetchall()
    assert [r["version"] for r in rows] == [m.version for m in migrations()]


@pytest.fixture
def empty_dsn(server_dsn: str) -> str:
    from support.databases import scratch_database

    with scratch_database(server_dsn, f"fq_empty_migrate_{os.getpid()}") as dsn:
        yield dsn


def test_two_migrators_at_once_apply_each_migration_once(empty_dsn: str) -> None:
    barrier = threading.Barrier(2)
    applied: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with connect(empty_dsn) as conn:
                barrier.wait(timeout=10)
                applied.append(migrate(conn))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    everything = [m.name for m in migrations()] + [d.name for d in definitions()]
    assert sorted(applied, key=len) == [[], everything]


def test_the_hot_tables_are_vacuumed_by_count_of_dead_rows_not_by_share(admin_dsn: str) -> None:
    # The server's defaults wait for a fifth of a table to be dead and then vacuum it throttled;
    # a queue's two hot tables churn far faster than that reclaims.
    with connect(admin_dsn) as conn:
        rows = conn.execute(
            "select c.relname, c.reloptions from pg_class c"
            " where c.oid in ('fairqueue.jobs'::regclass, 'fairqueue.served'::regclass)"
        ).fetchall()
    options = {r["relname"]: dict(o.split("=", 1) for o in r["reloptions"]) for r in rows}
    assert options["jobs"]["autovacuum_vacuum_scale_factor"] == "0"
    assert options["jobs"]["autovacuum_vacuum_threshold"] == "10000"
    assert options["jobs"]["autovacuum_vacuum_cost_delay"] == "0"
    assert options["served"]["autovacuum_vacuum_scale_factor"] == "0"
    assert options["served"]["autovacuum_vacuum_threshold"] == "1000"
    assert options["served"]["autovacuum_vacuum_cost_delay"] == "0"

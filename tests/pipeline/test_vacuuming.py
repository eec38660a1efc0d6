"""The backstop vacuums the hot tables where the server lets the application role (MAINTAIN,
PostgreSQL 17 and later), once a table holds its autovacuum threshold of dead row versions; on
older servers it leaves them to autovacuum. The newer server is a private PostgreSQL 18 cluster
with autovacuum off, so every vacuum counted is the backstop's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from fairqueue import connect, migrate
from fairqueue.db import Connection
from fairqueue.errors import ConfigurationError
from fairqueue.roles.backstop import Backstop
from fairqueue.roles.vacuuming import vacuum_hot_tables
from support.private_cluster import newest_cluster

# The hot table's own autovacuum threshold (sql/migrations/0039_hot_tables_vacuumed.sql).
JOBS_THRESHOLD = 10_000

TABLE_STATS = """
select n_dead_tup as dead, vacuum_count as vacuums
  from pg_stat_user_tables
 where relid = 'fairqueue.jobs'::regclass
"""


@pytest.fixture(scope="module")
def newest_dsn() -> Iterator[str]:
    with newest_cluster() as dsn:
        with connect(dsn, autocommit=True) as admin:
            migrate(admin)
        yield dsn


def stats(conn: Connection) -> dict[str, int]:
    """The hot table's counters as the server has them now (not the transaction's snapshot)."""
    conn.execute("select pg_stat_clear_snapshot()")
    row = conn.execute(TABLE_STATS).fetchone()
    assert row is not None
    return {"dead": int(row["dead"]), "vacuums": int(row["vacuums"])}


def leave_dead_jobs(conn: Connection, count: int) -> None:
    """``count`` dead row versions in the hot table, counted by the server before this returns."""
    before = stats(conn)["dead"]
    conn.execute(
        "insert into fairqueue.jobs (type) select 'vacuumed' from generate_series(1, %s)", (count,)
    )
    conn.execute("delete from fairqueue.jobs where type = 'vacuumed'")
    conn.execute("select pg_stat_force_next_flush()")
    conn.execute("select 1")
    deadline = time.monotonic() + 30
    while stats(conn)["dead"] < before + count:
        assert time.monotonic() < deadline, "the server never counted the dead versions"
        time.sleep(0.05)


def wait_for_vacuums(conn: Connection, vacuums: int) -> dict[str, int]:
    deadline = time.monotonic() + 30
    while (found := stats(conn))["vacuums"] < vacuums:
        assert time.monotonic() < deadline, f"the server counted {found['vacuums']} vacuums"
        time.sleep(0.05)
    return found


@pytest.mark.timeout(180)
def test_the_backstop_vacuums_the_hot_table_once_it_holds_its_threshold_of_dead_versions(
    newest_dsn: str,
) -> None:
    with connect(newest_dsn, autocommit=True) as admin:
        start = stats(admin)
        leave_dead_jobs(admin, JOBS_THRESHOLD // 2)
        # Below the threshold: left alone.
        below = Backstop(newest_dsn, []).rescue()
        assert below is not None and below.tables_vacuumed == []
        leave_dead_jobs(admin, JOBS_THRESHOLD // 2)
        # The pass logs in as the application role (rescue opens its own connection as it).
        swept = Backstop(newest_dsn, []).rescue()
        assert swept is not None and swept.tables_vacuumed == ["fairqueue.jobs"]
        after = wait_for_vacuums(admin, start["vacuums"] + 1)
        assert after["vacuums"] == start["vacuums"] + 1
        assert after["dead"] < JOBS_THRESHOLD


@pytest.mark.timeout(180)
def test_a_table_another_vacuum_holds_is_passed_over_without_waiting(newest_dsn: str) -> None:
    with connect(newest_dsn, autocommit=True) as admin, connect(newest_dsn) as holder:
        leave_dead_jobs(admin, JOBS_THRESHOLD)
        # The lock a vacuum (autovacuum's, say) holds on the table while it works.
        holder.execute("lock table fairqueue.jobs in share update exclusive mode")
        with connect(newest_dsn, autocommit=True, as_app_role=True) as app:
            assert vacuum_hot_tables(app) == []
        holder.rollback()
        with connect(newest_dsn, autocommit=True, as_app_role=True) as app:
            assert vacuum_hot_tables(app) == ["fairqueue.jobs"]


@pytest.mark.timeout(180)
def test_a_backstop_out_of_time_leaves_the_vacuum_to_the_next_pass(newest_dsn: str) -> None:
    with connect(newest_dsn, autocommit=True) as admin:
        leave_dead_jobs(admin, JOBS_THRESHOLD)
        stopped = threading.Event()
        stopped.set()
        swept = Backstop(newest_dsn, []).rescue(stopped)
        assert swept is not None and swept.tables_vacuumed == []
        swept = Backstop(newest_dsn, []).rescue()
        assert swept is not None and swept.tables_vacuumed == ["fairqueue.jobs"]


def test_where_the_server_has_no_maintain_the_tables_are_left_to_autovacuum(
    conn: Connection, dsn: str
) -> None:
    version = int(conn.execute("show server_version_num").fetchone()["server_version_num"])
    if version >= 170000:
        pytest.skip("this server has MAINTAIN: the private PostgreSQL 18 tests cover it")
    leave_dead_jobs(conn, JOBS_THRESHOLD)
    swept = Backstop(dsn, []).rescue()
    assert swept is not None and swept.tables_vacuumed == []


def test_the_vacuum_needs_an_autocommit_connection(dsn: str) -> None:
    with connect(dsn) as in_transaction, pytest.raises(ConfigurationError, match="autocommit"):
        vacuum_hot_tables(in_transaction)


def test_newest_cluster_is_a_server_with_maintain(newest_dsn: str) -> None:
    with connect(newest_dsn, autocommit=True) as admin:
        version = admin.execute("show server_version_num").fetchone()["server_version_num"]
    assert int(version) >= 170000

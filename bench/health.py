"""Table health after churn: what a million jobs leave behind in each system's tables.

Each system starts from emptied tables and churns its jobs in rounds: a round's jobs are
enqueued in bulk, the peers' tables analyzed, then the jobs drained by the system's own workers
(`churn_workers` processes, at their drain settings). The ANALYZE is what autovacuum would do
soon after a bulk load; without it a plan made for the emptied table can crawl (procrastinate's
fetch then took minutes per query). fairqueue's claim analyzes its table itself when it finds
the statistics stale, and not while a vacuum of it is under way; an ANALYZE from outside would
cancel that vacuum. fairqueue's jobs done with no output leave the hot table at their
completion; whatever finished otherwise moves out after each round, as the backstop moves it,
and the backstop's vacuum of the hot tables runs then too (it vacuums only on servers that let
the application role: PostgreSQL 17 and later). Autovacuum runs as the server is configured and
as fairqueue's tables ask; nothing else is vacuumed by hand.
Then, per table a job's life writes to, from pg_stat_user_tables and the size functions: live
and dead tuples, updates and how many were HOT (heap-only: no index entry written), autovacuum
runs, and table and index size.
Counters are differences from before the churn; tuples and sizes are as found after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from fairqueue.db import Connection, connect
from fairqueue.roles.vacuuming import vacuum_hot_tables

from . import database, load, throughput
from .arrivals import no_op_jobs
from .errors import BenchError
from .peers import Peer, workers
from .sizes import Sizes

# fairqueue's jobs in their two tables: the hot one a job's claim and completion write, and the
# finished jobs it moves to (every day of them summed, under this one name).
FINISHED_DAYS = "fairqueue.finished_jobs (every day)"
FAIRQUEUE_TABLES = ("fairqueue.jobs", FINISHED_DAYS, "fairqueue.served")
MOVE_BATCH = 10_000
MOVE = f"select fairqueue.move_finished({MOVE_BATCH}, interval '1 s') as moved"
# Backends report their table counters within a second or so; a reading is settled when it
# counts every insert of the churn and has not moved since the previous one.
SETTLE_POLL_S = 0.25
SETTLE_TIMEOUT_S = 30.0

# Summed over the tables a name stands for: one table, or every finished day of fairqueue's.
STATS = """
select coalesce(sum(n_live_tup), 0) as live_tuples, coalesce(sum(n_dead_tup), 0) as dead_tuples,
       coalesce(sum(n_tup_ins), 0) as inserts, coalesce(sum(n_tup_upd), 0) as updates,
       coalesce(sum(n_tup_hot_upd), 0) as hot_updates, coalesce(sum(n_tup_del), 0) as deletes,
       coalesce(sum(autovacuum_count), 0) as autovacuums,
       coalesce(sum(vacuum_count), 0) as vacuums,
       coalesce(sum(pg_relation_size(relid)), 0) as table_bytes,
       coalesce(sum(pg_indexes_size(relid)), 0) as index_bytes,
       coalesce(sum(pg_total_relation_size(relid)), 0) as total_bytes
  from pg_stat_user_tables
 where relid = any(%s::oid[])
"""
FINISHED_DAY_TABLES = """
select relid::oid as relid from pg_partition_tree('fairqueue.finished_jobs') where isleaf
"""
# Counters that accumulate; the rest are read as found.
COUNTERS = ("inserts", "updates", "hot_updates", "deletes", "autovacuums", "vacuums")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TableHealth:
    system: str
    table: str
    churned: int
    seconds: float
    live_tuples: int
    dead_tuples: int
    inserts: int
    updates: int
    hot_updates: int
    deletes: int
    autovacuums: int
    table_bytes: int
    index_bytes: int
    total_bytes: int
    # Vacuums run by a client: fairqueue's backstop, where the server lets it
    # (fairqueue.roles.vacuuming).
    vacuums: int = 0

    @property
    def hot_ratio(self) -> float | None:
        return self.hot_updates / self.updates if self.updates else None

    @property
    def dead_ratio(self) -> float | None:
        tuples = self.live_tuples + self.dead_tuples
        return self.dead_tuples / tuples if tuples else None


def members(conn: psycopg.Connection[Any], table: str) -> list[int]:
    """The tables a name stands for, by oid."""
    if table == FINISHED_DAYS:
        return [int(r["relid"]) for r in conn.execute(FINISHED_DAY_TABLES).fetchall()]
    row = conn.execute("select %s::regclass::oid as relid", (table,)).fetchone()
    if row is None:
        raise BenchError(f"no table {table}")
    return [int(row["relid"])]


def read_stats(conn: psycopg.Connection[Any], table: str) -> dict[str, int]:
    row = conn.execute(STATS, (members(conn, table),)).fetchone()
    if row is None:
        raise BenchError(f"no statistics for {table}")
    return {key: int(value) for key, value in row.items()}


def settled_stats(dsn: str, table: str, inserted: int, before: dict[str, int]) -> dict[str, int]:
    """The table's statistics once every backend has reported its share of the churn."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        previous = read_stats(conn, table)
        while time.monotonic() < deadline:
            time.sleep(SETTLE_POLL_S)
            found = read_stats(conn, table)
            if found == previous and found["inserts"] - before["inserts"] >= inserted:
                return found
            previous = found
    raise BenchError(f"{table}: statistics did not settle within {SETTLE_TIMEOUT_S:.0f} s")


def readings(
    system: str,
    dsn: str,
    tables: tuple[str, ...],
    churned: int,
    seconds: float,
    before: dict[str, dict[str, int]],
) -> list[TableHealth]:
    """One row per table; the first table (the jobs table) must count every churned insert."""
    found = []
    for position, table in enumerate(tables):
        after = settled_stats(dsn, table, churned if position == 0 else 0, before[table])
        counted = {k: after[k] - before[table][k] if k in COUNTERS else after[k] for k in after}
        found.append(
            TableHealth(system=system, table=table, churned=churned, seconds=seconds, **counted)
        )
    return found


def snapshot(dsn: str, tables: tuple[str, ...]) -> dict[str, dict[str, int]]:
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        return {table: read_stats(conn, table) for table in tables}


def analyze(dsn: str, tables: tuple[str, ...]) -> None:
    """Planner statistics for the round just enqueued; no dead tuple is removed."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in tables:
            conn.execute(sql.SQL("analyze {}").format(sql.Identifier(*table.split("."))))


def churn_fairqueue(
    conn: Connection, dsn: str, sizes: Sizes, progress: Progress
) -> list[TableHealth]:
    """Rounds of jobs inserted pending and drained by run_pipeline invocations."""
    database.reset(conn)
    load.create_owners(conn, sizes)
    before = snapshot(dsn, FAIRQUEUE_TABLES)
    started = time.monotonic()
    churned = 0
    while churned < sizes.churn_jobs:
        count = min(sizes.churn_round, sizes.churn_jobs - churned)
        # On a connection of its own: a backend reports its counters when it exits, while a
        # long-lived one may hold them back for seconds.
        with connect(dsn, autocommit=True) as loader:
            load.insert_pending(loader, sizes, throughput.JOB_TYPE, count)
        throughput.run_invocations(
            dsn, "fairqueue", sizes.throughput_batch, sizes.churn_workers, count
        )
        # What the backstop does every minute: the round's finished jobs that their completion
        # did not move leave the hot table, and the hot tables are vacuumed where the server
        # lets the application role (PostgreSQL 17 and later).
        with connect(dsn, autocommit=True) as mover:
            while mover.execute(MOVE).fetchone()["moved"] == MOVE_BATCH:  # type: ignore[index]
                pass
        with connect(dsn, autocommit=True, as_app_role=True) as vacuumer:
            vacuum_hot_tables(vacuumer)
        churned += count
        progress(f"table health: fairqueue churned {churned:,} of {sizes.churn_jobs:,} jobs")
    seconds = time.monotonic() - started
    return readings("fairqueue", dsn, FAIRQUEUE_TABLES, churned, seconds, before)


def churn_peer(peer: Peer, dsn: str, sizes: Sizes, progress: Progress) -> list[TableHealth]:
    """Rounds of jobs enqueued through the peer and drained by its workers."""
    total = sizes.churn_for(peer.name)
    peer.reset(dsn)
    before = snapshot(dsn, peer.tables)
    started = time.monotonic()
    churned = 0
    while churned < total:
        count = min(sizes.churn_round, total - churned)
        peer.enqueue(dsn, no_op_jobs(count))
        analyze(dsn, peer.tables)
        workers.run_workers(peer, dsn, sizes.churn_workers, count)
        churned += count
        progress(f"table health: {peer.name} churned {churned:,} of {total:,} jobs")
    seconds = time.monotonic() - started
    return readings(peer.name, dsn, peer.tables, churned, seconds, before)

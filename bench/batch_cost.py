"""``python -m bench.batch_cost``: where an exact batch's time goes, a batch over many groups
against a batch that takes several jobs from each of fewer groups.

Each case is loaded afresh (five groups a tenant, bench/load.py's plan mix, the same number of
pending jobs), then one connection drains `--batches` batches as a pipeline's worker does: the
claim's preparation (ready_for_claim), the claim with its read (claim_batch: one statement, its
own transaction, committed without waiting for the disk), and the completion (one statement,
committed with the server's synchronous_commit, or off with `--async-completion`). Timed on the
client per step; on the server, with pg_stat_statements (track = all, so the statements inside
the functions and triggers count as well) and track_functions = all where the server has them,
the time of each statement and function and the WAL each wrote, and the rows each table gained,
changed and lost, per batch. Cases are interleaved over `--rounds` rounds.

Needs a scratch database on a server of its own: the statistics are reset.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fairqueue.db import Connection, connect
from fairqueue.pipeline.claim import claim_batch, count_completed

from . import database, load
from .errors import BenchError
from .sizes import FULL

JOB_TYPE = "bench_batch_cost"
LOCKED_BY = "bench:batch_cost"
LEASE_S = 300.0
GROUPS_PER_TENANT = 5

_STATEMENTS = """
select toplevel, calls, total_exec_time, rows, wal_records, wal_bytes,
       regexp_replace(left(query, 200), '\\s+', ' ', 'g') as query
  from pg_stat_statements
 where dbid = (select oid from pg_database where datname = current_database())
   and calls > 0
 order by total_exec_time desc
"""

_FUNCTIONS = """
select schemaname || '.' || funcname as name, calls, total_time, self_time
  from pg_stat_user_functions
 order by total_time desc
"""

_TABLES = """
select schemaname || '.' || relname as name, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
  from pg_stat_user_tables
 where n_tup_ins + n_tup_upd + n_tup_del > 0
 order by name
"""


@dataclass(frozen=True)
class Case:
    groups: int
    jobs_per_group: int
    quantum: int = 1

    @property
    def name(self) -> str:
        return f"{self.groups:,} groups x {self.jobs_per_group:,}, quantum {self.quantum}"


@dataclass
class Segment:
    case: Case
    batches: int
    ready_ms: list[float]
    claim_ms: list[float]
    complete_ms: list[float]
    statements: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    tables: list[dict[str, Any]]


def load_case(conn: Connection, case: Case) -> None:
    tenants = max(case.groups // GROUPS_PER_TENANT, 1)
    owners = replace(FULL, tenants=tenants, groups_per_tenant=case.groups // tenants)
    if owners.groups != case.groups:
        raise BenchError(f"{case.groups} groups are not a whole number of tenants")
    database.reset(conn)
    load.insert_owners(conn, owners)
    load.insert_pending(conn, owners, JOB_TYPE, case.groups * case.jobs_per_group)
    # The case's quantum stamped on the standings before the clock starts, as a stage's first
    # claim after a deploy stamps it.
    conn.execute("select fairqueue.ready_for_claim(%s, '{}', '{}', %s)", (JOB_TYPE, case.quantum))
    database.vacuum_analyze(
        conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants", "fairqueue.groups"
    )
    database.checkpoint(conn)


def reset_statistics(conn: Connection, with_statements: bool) -> None:
    conn.execute("select pg_stat_reset()")
    if with_statements:
        conn.execute("select pg_stat_statements_reset()")


def rows(conn: Connection, statement: str) -> list[dict[str, Any]]:
    """The rows of `statement` (the library's connections answer dicts)."""
    return [dict(row) for row in conn.execute(statement).fetchall()]


def drain_batches(
    dsn: str, batch: int, batches: int, async_completion: bool, quantum: int
) -> list[list[float]]:
    """`batches` claims and completions on one connection: ms of each step of each batch."""
    timings: list[list[float]] = [[], [], []]
    with connect(dsn, autocommit=True) as conn:
        conn.execute("set track_functions = 'all'")
        if async_completion:
            conn.execute("set synchronous_commit = off")
        for _ in range(batches):
            t0 = time.perf_counter()
            conn.execute(
                "select fairqueue.ready_for_claim(%s, '{}', '{}', %s)", (JOB_TYPE, quantum)
            )
            t1 = time.perf_counter()
            jobs = claim_batch(
                conn, JOB_TYPE, batch=batch, lease_s=LEASE_S, locked_by=LOCKED_BY, quantum=quantum
            )
            t2 = time.perf_counter()
            if len(jobs) != batch:
                raise BenchError(f"claimed {len(jobs)} jobs, expected {batch}")
            done = count_completed(conn, [(j.tenant_id, j.id) for j in jobs], LOCKED_BY)
            t3 = time.perf_counter()
            if done != batch:
                raise BenchError(f"completed {done} of {batch}")
            for k, ms in enumerate(((t1 - t0), (t2 - t1), (t3 - t2))):
                timings[k].append(ms * 1000.0)
    return timings


def segment(
    admin: Connection, dsn: str, case: Case, batch: int, batches: int, *, async_completion: bool
) -> Segment:
    # Loaded on a connection of its own, closed before the reset, so that none of the load's
    # counters reach the server after it.
    with connect(dsn, autocommit=True) as loader:
        load_case(loader, case)
    time.sleep(0.5)
    with_statements = bool(
        admin.execute("select 1 from pg_extension where extname = 'pg_stat_statements'").fetchone()
    )
    reset_statistics(admin, with_statements)
    ready, claimed, completed = drain_batches(dsn, batch, batches, async_completion, case.quantum)
    # The worker's connection is closed: its counters are flushed.
    time.sleep(0.5)
    return Segment(
        case=case,
        batches=batches,
        ready_ms=ready,
        claim_ms=claimed,
        complete_ms=completed,
        statements=rows(admin, _STATEMENTS) if with_statements else [],
        functions=rows(admin, _FUNCTIONS),
        tables=rows(admin, _TABLES),
    )


def median_of(segments: Sequence[Segment], pick: str) -> str:
    per_round = [statistics.median(getattr(s, pick)) for s in segments]
    return (
        f"{statistics.median(per_round):.2f} ms (rounds {min(per_round):.2f}-{max(per_round):.2f})"
    )


def report(segments: Sequence[Segment], top: int) -> None:
    by_case: dict[str, list[Segment]] = {}
    for s in segments:
        by_case.setdefault(s.case.name, []).append(s)
    for name, runs in by_case.items():
        print(f"## {name}: {len(runs)} rounds of {runs[0].batches} batches")
        for pick in ("ready_ms", "claim_ms", "complete_ms"):
            print(f"  client {pick[:-3]}: median {median_of(runs, pick)}")
        per = float(runs[0].batches)
        print("  rows a batch (median over rounds): inserted, updated (heap-only), deleted")
        for table in sorted({t["name"] for r in runs for t in r.tables}):
            found = [next((t for t in r.tables if t["name"] == table), None) for r in runs]
            ins, upd, hot, dele = (table_median(found, k, per) for k in _TABLE_COUNTS)
            print(f"    {table}: {ins:.1f}, {upd:.1f} ({hot:.1f}), {dele:.1f}")
        print("  functions, ms a batch (median over rounds): total / self, calls a batch")
        for function, total, own, calls in ranked(runs, "functions", "name", per)[:top]:
            print(f"    {function}: {total:.3f} / {own:.3f}, {calls:.1f}")
        if runs[0].statements:
            print("  statements, ms a batch (median over rounds): time, calls, WAL bytes")
            for text, total, wal, calls in ranked(runs, "statements", "query", per)[:top]:
                print(f"    {total:.3f} ms, {calls:.1f}, {wal:,.0f} B: {text}")


_TABLE_COUNTS = ("n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del")


def table_median(found: list[dict[str, Any] | None], key: str, per: float) -> float:
    """The median over rounds of a table's count a batch (none in a round counts 0)."""
    return statistics.median((t[key] if t else 0) for t in found) / per


def ranked(
    runs: Sequence[Segment], kind: str, key: str, per: float
) -> list[tuple[str, float, float, float]]:
    """Each function (or statement) with the medians over rounds of its time, its own time (or
    WAL bytes) and calls a batch, the longest first."""
    names: dict[str, list[tuple[float, float, float]]] = {}
    for r in runs:
        for row in getattr(r, kind):
            if kind == "functions":
                figures = (row["total_time"], row["self_time"], row["calls"])
            else:
                level = "top" if row["toplevel"] else "nested"
                figures = (row["total_exec_time"], float(row["wal_bytes"]), row["calls"])
                row = {**row, key: f"[{level}] {row[key]}"}
            total, second, calls = (float(f) / per for f in figures)
            names.setdefault(row[key], []).append((total, second, calls))
    found = []
    for name, rows_of in names.items():
        padded = rows_of + [(0.0, 0.0, 0.0)] * (len(runs) - len(rows_of))
        total, second, calls = (statistics.median(f[k] for f in padded) for k in range(3))
        found.append((name, total, second, calls))
    return sorted(found, key=lambda f: -f[1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_cost", description=__doc__)
    parser.add_argument("--dsn", required=True, help="a scratch database (superuser)")
    parser.add_argument(
        "--case",
        action="append",
        help="GROUPS:JOBS_PER_GROUP[:QUANTUM] (default 1000:20 and 25:800, quantum 1)",
    )
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--async-completion", action="store_true")
    args = parser.parse_args(argv)
    cases = [Case(*map(int, c.split(":"))) for c in (args.case or ["1000:20", "25:800"])]
    database.prepare(args.dsn)
    segments = []
    with connect(args.dsn, autocommit=True) as admin:
        for r in range(args.rounds):
            for case in cases:
                found = segment(
                    admin,
                    args.dsn,
                    case,
                    args.batch,
                    args.batches,
                    async_completion=args.async_completion,
                )
                segments.append(found)
                print(
                    f"round {r + 1}: {case.name}: claim {statistics.median(found.claim_ms):.2f} ms,"
                    f" completion {statistics.median(found.complete_ms):.2f} ms",
                    file=sys.stderr,
                    flush=True,
                )
        database.reset(admin)
    report(segments, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())

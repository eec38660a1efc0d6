"""Claim latency: `fairqueue.pipeline.claim.claim_batch` with a constant pending backlog as
history grows.

One pass per pending backlog (10k and 1M in the full run): the backlog is loaded fresh, then
last-day history is grown through each size (up to 10M rows, generated in SQL) and the claim is
sampled at each. Only the claim is timed (its expiry step, the claim query and the commit, as
the library runs them). Each claimed batch is then given back with
`fairqueue.pipeline.claim.give_back`, outside the timed section, so pending stays constant and
the served counts return to where they were.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import LiteralString, cast

from fairqueue.db import Connection
from fairqueue.pipeline.claim import ClaimedJob, by_tenant, claim_batch, give_back
from fairqueue.plans import PLANS
from fairqueue.queries import query
from fairqueue.tenancy import tenant_transaction

from . import database, load
from .errors import BenchError
from .sizes import Sizes

JOB_TYPE = "bench_claim"
LOCKED_BY = "bench:latency"
LEASE_S = 300.0
HOUR_S = 3600.0
DAY_S = 24 * HOUR_S

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ClaimReads:
    """What one claim read, from the server's own counters for its transaction (rolled back):
    the rows its scans of fairqueue.jobs and fairqueue.served returned, every scan and loop."""

    jobs_rows_read: int
    served_rows_read: int


@dataclass(frozen=True)
class LatencyCase:
    history: int
    history_age: str
    pending: int
    batch: int
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    # Rows of fairqueue.served (one per type and group): what the claim reads instead of history.
    served_rows: int
    # Rows whose served count differs from a recount of the jobs table (0 when correct).
    served_drift: int
    plan: ClaimReads
    history_load_s: float
    # The expired variant only: the first claim, which moves the watermark over the whole
    # history, and how many counted rows it expired.
    first_claim_ms: float | None = None
    expired_rows: int | None = None


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of `values` (q in 0..100)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def timed_claim(conn: Connection, batch: int) -> float:
    """One claim of `batch` jobs, timed; the jobs are given back untimed. Returns milliseconds."""
    started = time.perf_counter()
    jobs = claim_batch(conn, JOB_TYPE, batch=batch, lease_s=LEASE_S, locked_by=LOCKED_BY)
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    if len(jobs) != batch:
        raise BenchError(f"claimed {len(jobs)} jobs, expected {batch}: the backlog ran dry")
    hand_back(conn, jobs, LOCKED_BY)
    return elapsed_ms


def hand_back(conn: Connection, jobs: list[ClaimedJob], locked_by: str) -> None:
    """Every claimed job back to pending, its attempt undone: tenant by tenant, each under its
    tenant's clamp, as the lifecycle's door acts only inside the caller's clamp."""
    given = 0
    for tenant_id, ids in by_tenant((job.tenant_id, job.id) for job in jobs).items():
        with tenant_transaction(conn, tenant_id):
            given += give_back(conn, ids, locked_by, tenant_id=tenant_id)
    if given != len(jobs):
        raise BenchError(f"gave back {given} of {len(jobs)} claimed jobs")


def served_rows(conn: Connection) -> int:
    row = conn.execute("select count(*) as n from fairqueue.served").fetchone()
    assert row is not None
    return int(row["n"])


def served_drift(conn: Connection) -> int:
    """(type, group) rows whose counter differs from counting the jobs past the watermark."""
    row = conn.execute(
        """
        select count(*) as n
          from (select type, group_key, n from fairqueue.served where n <> 0) s
          full join (select j.type, j.group_key, count(*) as n
                       from fairqueue.jobs j, fairqueue.served_watermark w
                      where j.served_at > w.watermark
                      group by 1, 2) r using (type, group_key)
         where s.n is distinct from r.n
        """
    ).fetchone()
    assert row is not None
    return int(row["n"])


# What a claim read, as the server counts it (bench/claim_reads.sql).
READS: LiteralString = cast(
    LiteralString, Path(__file__).with_name("claim_reads.sql").read_text(encoding="utf-8")
)


def claim_plan(conn: Connection, batch: int) -> ClaimReads:
    """The rows one claim with claim_batch's parameters reads, rolled back."""
    params = {
        "type": JOB_TYPE,
        "batch": batch,
        "lease_s": LEASE_S,
        "locked_by": LOCKED_BY,
        "run_id": None,
        "by_cost": False,
        **PLANS.claim_params(),
    }
    with conn.transaction(force_rollback=True):
        before = conn.execute(READS).fetchone()
        conn.execute(query("claim_batch"), params).fetchall()
        after = conn.execute(READS).fetchone()
    assert before is not None and after is not None
    return ClaimReads(
        jobs_rows_read=int(after["jobs"]) - int(before["jobs"]),
        served_rows_read=int(after["served"]) - int(before["served"]),
    )


def settle(conn: Connection) -> None:
    """After a bulk load: statistics and visibility for the planner, and a compact served table.

    The load upserts each group's counter row many times per transaction; a history built claim
    by claim does not leave those row versions behind, so served is rewritten (it is tiny). A
    checkpoint then writes out what the load dirtied, so the claims do not pay for it.
    """
    database.vacuum_analyze(conn, "fairqueue.jobs", "fairqueue.tenants", "fairqueue.groups")
    conn.execute("vacuum (full, analyze) fairqueue.served")
    database.checkpoint(conn)


def measure(conn: Connection, sizes: Sizes) -> list[float]:
    for _ in range(sizes.warmup):
        timed_claim(conn, sizes.claim_batch)
    return [timed_claim(conn, sizes.claim_batch) for _ in range(sizes.samples)]


def case(
    conn: Connection,
    sizes: Sizes,
    *,
    pending: int,
    history: int,
    history_age: str,
    load_s: float,
    samples: list[float],
    first_claim_ms: float | None = None,
    expired_rows: int | None = None,
) -> LatencyCase:
    return LatencyCase(
        history=history,
        history_age=history_age,
        pending=pending,
        batch=sizes.claim_batch,
        samples=len(samples),
        p50_ms=percentile(samples, 50),
        p90_ms=percentile(samples, 90),
        p99_ms=percentile(samples, 99),
        max_ms=max(samples),
        served_rows=served_rows(conn),
        served_drift=served_drift(conn),
        plan=claim_plan(conn, sizes.claim_batch),
        history_load_s=load_s,
        first_claim_ms=first_claim_ms,
        expired_rows=expired_rows,
    )


def fresh_backlog(conn: Connection, sizes: Sizes, pending: int) -> None:
    database.reset(conn)
    load.create_owners(conn, sizes)
    load.insert_pending(conn, sizes, JOB_TYPE, pending)


def last_day_history(conn: Connection, sizes: Sizes, progress: Progress) -> list[LatencyCase]:
    """Each pending backlog in turn, with done history finished over the last 23 hours grown
    through each size."""
    return [
        found
        for pending in sizes.pendings
        for found in _last_day_history(conn, sizes, pending, progress)
    ]


def _last_day_history(
    conn: Connection, sizes: Sizes, pending: int, progress: Progress
) -> list[LatencyCase]:
    progress(f"claim latency: {pending:,} pending")
    fresh_backlog(conn, sizes, pending)
    cases: list[LatencyCase] = []
    loaded = 0
    load_s = 0.0
    for target in sizes.histories:
        progress(f"claim latency: {pending:,} pending, loading history to {target:,} rows")
        loaded_now = load.insert_history(
            conn,
            sizes,
            JOB_TYPE,
            first=loaded + 1,
            count=target - loaded,
            newest_s=60.0,
            span_s=23 * HOUR_S - 120.0,
        )
        loaded = target
        load_s += loaded_now.seconds
        settle(conn)
        progress(
            f"claim latency: {sizes.samples} claims, {pending:,} pending,"
            f" {target:,} rows of history"
        )
        cases.append(
            case(
                conn,
                sizes,
                pending=pending,
                history=target,
                history_age="last 23 h",
                load_s=load_s,
                samples=measure(conn, sizes),
            )
        )
    return cases


def expired_history(conn: Connection, sizes: Sizes, progress: Progress) -> LatencyCase:
    """History 25-47 hours old that the counter still counts (the watermark is two days back,
    as after a day without claims): the first claim's expire_served must pass all of it."""
    pending = sizes.pendings[0]
    fresh_backlog(conn, sizes, pending)
    conn.execute("update fairqueue.served_watermark set watermark = now() - interval '3 days'")
    count = sizes.expired_history
    progress(f"claim latency: loading {count:,} rows of history older than a day")
    loaded = load.insert_history(
        conn, sizes, JOB_TYPE, first=1, count=count, newest_s=DAY_S + HOUR_S, span_s=22 * HOUR_S
    )
    settle(conn)
    counted = conn.execute("select coalesce(sum(n), 0) as n from fairqueue.served").fetchone()
    assert counted is not None
    expired = int(counted["n"])
    if expired != count:
        raise BenchError(f"the served counter holds {expired} rows, expected {count} to expire")
    first_ms = timed_claim(conn, sizes.claim_batch)
    left = conn.execute(
        "select (select coalesce(sum(n), 0) from fairqueue.served) as counted,"
        " (select watermark > now() - interval '1 day 1 minute' from fairqueue.served_watermark)"
        " as advanced"
    ).fetchone()
    assert left is not None
    if int(left["counted"]) != 0 or not left["advanced"]:
        raise BenchError(f"the first claim did not expire the old history: {left}")
    progress(f"claim latency: {sizes.samples} claims after expiring {count:,} rows")
    return case(
        conn,
        sizes,
        pending=pending,
        history=count,
        history_age="25-47 h (expired by the first claim)",
        load_s=loaded.seconds,
        samples=measure(conn, sizes),
        first_claim_ms=first_ms,
        expired_rows=expired,
    )

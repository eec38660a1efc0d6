"""Claim latency against groups: `fairqueue.pipeline.claim.claim_batch` as the groups with
work grow.

For each count of groups with pending work (100 to 100,000 in the full run) the queue is
emptied and loaded afresh in SQL: three pending jobs per group, five groups per tenant, the
tenants on the plans of fairqueue.plans.PLANS in bench/load.py's mix. The first claim right
after the load is timed on its own, before the bench analyzes anything (the cold row; the
library may analyze the table itself inside that claim). Then the tables are vacuumed and
analyzed, a few claims warm up, and `scale_samples` claims are timed.

A timed claim is one call of the library's claim_batch, which claims the batch in fair order and
reads it under each job's tenant clamp. Outside the timed section each batch is checked (every
job came back with its payload, so the read happened) and given back with give_back, so the
backlog and the served counts stay the same from one claim to the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from fairqueue.db import Connection
from fairqueue.pipeline.claim import ClaimedJob, claim_batch
from fairqueue.plans import PLANS, Order, Plans
from fairqueue.stage import FairBy, FairShare

from . import database, load
from .errors import BenchError
from .formats import ratio
from .latency import hand_back, percentile
from .sizes import Sizes

JOB_TYPE = "bench_claim_scale"
LOCKED_BY = "bench:claim_scale"
LEASE_S = 300.0
JOBS_PER_GROUP = 3
GROUPS_PER_TENANT = 5

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ScaleCase:
    groups: int
    tenants: int
    pending: int
    batch: int
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    # The first claim after the bulk load, before the bench's ANALYZE (one claim, so one figure).
    cold_ms: float
    load_s: float


def owner_sizes(sizes: Sizes, groups: int) -> Sizes:
    """`sizes` with the owners of this load, so bench/load.py's job loader spreads the jobs over
    exactly these tenants and groups."""
    if groups % GROUPS_PER_TENANT:
        raise BenchError(f"{groups} groups are not a whole number of tenants")
    return replace(sizes, tenants=groups // GROUPS_PER_TENANT, groups_per_tenant=GROUPS_PER_TENANT)


def load_backlog(conn: Connection, owners: Sizes, job_type: str = JOB_TYPE) -> float:
    """Empty the queue, then tenants, their active groups and JOBS_PER_GROUP pending jobs of
    `job_type` per group, each in one statement; the seconds it took."""
    started = time.perf_counter()
    database.reset(conn)
    load.insert_owners(conn, owners)
    # Job i goes to tenant i mod tenants and to its group (i / tenants) mod groups_per_tenant:
    # numbered from 1 to 3 x groups, every group gets exactly three.
    load.insert_pending(conn, owners, job_type, JOBS_PER_GROUP * owners.groups)
    return time.perf_counter() - started


def check_batch(jobs: list[ClaimedJob], expected: int) -> None:
    if len(jobs) != expected:
        raise BenchError(f"claimed {len(jobs)} jobs, expected {expected}")
    unread = [job.id for job in jobs if "n" not in job.payload or job.tenant_id is None]
    if unread:
        raise BenchError(f"{len(unread)} claimed jobs came back without payload or tenant")


@dataclass(frozen=True)
class ClaimOption:
    """A stage's options on the order, as the claim is handed them."""

    name: str
    quantum: int = 1
    order: Order = "priority"
    plans: Plans = PLANS
    fair_by: FairBy = "jobs"


# The options whose claim is held to the same growth as the exact order's: a quantum, shares
# over the load's plans weighing 1, 2 and 3, service counted in cost (the load's jobs cost 1 to
# 100, COSTED; counted by jobs the costs are not read), and caps per tenant (the load's plans
# capped at 2, 5 and none running per tenant: a batch passes capped tenants over within itself).
OPTIONS = (
    ClaimOption("quantum 4", quantum=4),
    ClaimOption(
        "shares, weights 1:2:3",
        order="shares",
        plans=Plans(
            tuple(replace(p, weight=w) for p, w in zip(PLANS.plans, (1, 2, 3), strict=True))
        ),
    ),
    ClaimOption("fair_by cost, costs 1-100", fair_by="cost"),
    ClaimOption(
        "caps 2/5/none",
        plans=Plans(
            tuple(replace(p, max_running=c) for p, c in zip(PLANS.plans, (2, 5, None), strict=True))
        ),
    ),
)
# Every loaded job's cost, from 1 to 100, set from its id once the backlog is loaded.
COSTED = """
update fairqueue.jobs set cost = 1 + abs(hashtext(id::text)) %% 100 where type = %(type)s
"""
EXACT = ClaimOption("exact")


@dataclass(frozen=True)
class OptionCase:
    option: str
    groups: int
    samples: int
    p50_ms: float
    p99_ms: float


def timed_claim(
    conn: Connection,
    batch: int,
    job_type: str = JOB_TYPE,
    fair_share: FairShare | None = None,
    option: ClaimOption = EXACT,
) -> float:
    """One claim of `batch` jobs, read by the library, timed in milliseconds; then checked and
    given back, untimed."""
    started = time.perf_counter()
    jobs = claim_batch(
        conn,
        job_type,
        batch=batch,
        lease_s=LEASE_S,
        locked_by=LOCKED_BY,
        fair_share=fair_share,
        quantum=option.quantum,
        order=option.order,
        plans=option.plans,
        fair_by=option.fair_by,
    )
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    # Under caps a batch over few tenants comes back short by design: each tenant gives at most
    # its cap, so only the full batch of an uncapped claim is expected.
    capped = any(plan.max_running is not None for plan in option.plans.plans)
    check_batch(jobs, min(batch, len(jobs)) if capped else batch)
    hand_back(conn, jobs, LOCKED_BY)
    return elapsed_ms


def measure(conn: Connection, sizes: Sizes, groups: int, progress: Progress) -> ScaleCase:
    owners = owner_sizes(sizes, groups)
    pending = JOBS_PER_GROUP * groups
    batch = sizes.scale_batch
    if batch > pending:
        raise BenchError(f"batch {batch} is more than the {pending} jobs pending")
    progress(f"claim vs groups: loading {groups:,} groups, {pending:,} pending")
    load_s = load_backlog(conn, owners)
    cold_ms = timed_claim(conn, batch)
    database.vacuum_analyze(conn, "fairqueue.jobs", "fairqueue.tenants", "fairqueue.groups")
    database.checkpoint(conn)
    for _ in range(sizes.scale_warmup):
        timed_claim(conn, batch)
    samples = [timed_claim(conn, batch) for _ in range(sizes.scale_samples)]
    found = ScaleCase(
        groups=groups,
        tenants=owners.tenants,
        pending=pending,
        batch=batch,
        samples=len(samples),
        p50_ms=percentile(samples, 50),
        p90_ms=percentile(samples, 90),
        p99_ms=percentile(samples, 99),
        max_ms=max(samples),
        cold_ms=cold_ms,
        load_s=load_s,
    )
    progress(
        f"claim vs groups: {groups:,} groups: p50 {found.p50_ms:.1f} ms,"
        f" p99 {found.p99_ms:.1f} ms, cold {found.cold_ms:.1f} ms"
    )
    return found


def claim_vs_groups(conn: Connection, sizes: Sizes, progress: Progress) -> list[ScaleCase]:
    """One case per count of groups, smallest first; the queue is left empty."""
    cases = [measure(conn, sizes, groups, progress) for groups in sizes.scale_groups]
    database.reset(conn)
    return cases


def options_vs_groups(conn: Connection, sizes: Sizes, progress: Progress) -> list[OptionCase]:
    """Each of OPTIONS at the fewest and the most groups: the same load as `measure`, each
    option's first claims (which stamp its quanta on the standings) untimed; the queue is left
    empty."""
    cases = []
    for groups in (min(sizes.scale_groups), max(sizes.scale_groups)):
        load_backlog(conn, owner_sizes(sizes, groups))
        conn.execute(COSTED, {"type": JOB_TYPE})
        database.vacuum_analyze(
            conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants", "fairqueue.groups"
        )
        for option in OPTIONS:
            for _ in range(sizes.scale_warmup):
                timed_claim(conn, sizes.scale_batch, option=option)
            samples = [
                timed_claim(conn, sizes.scale_batch, option=option)
                for _ in range(sizes.scale_samples)
            ]
            case = OptionCase(
                option.name,
                groups,
                len(samples),
                percentile(samples, 50),
                percentile(samples, 99),
            )
            cases.append(case)
            progress(
                f"claim vs groups, {option.name}: {groups:,} groups: p50 {case.p50_ms:.1f} ms,"
                f" p99 {case.p99_ms:.1f} ms"
            )
    database.reset(conn)
    return cases


def option_growth(cases: list[OptionCase]) -> dict[str, float]:
    """Each option's p99 at the most groups over its p99 at the fewest."""
    found = {}
    for name in dict.fromkeys(c.option for c in cases):
        mine = sorted((c for c in cases if c.option == name), key=lambda c: c.groups)
        if len(mine) > 1 and mine[0].p99_ms:
            found[name] = mine[-1].p99_ms / mine[0].p99_ms
    return found


def options_json(cases: list[OptionCase]) -> dict[str, Any]:
    growth = option_growth(cases)
    return {
        "cases": [asdict(c) for c in cases],
        "p99_growth": {k: round(v, 3) for k, v in growth.items()},
    }


def options_table(cases: list[OptionCase]) -> list[list[str]]:
    """Rows of the report's table of options: option, groups, p50, p99, p99 against the
    option's at the fewest groups."""
    fewest = {c.option: c.p99_ms for c in cases if c.groups == min(x.groups for x in cases)}
    return [
        [
            c.option,
            f"{c.groups:,}",
            str(c.samples),
            f"{c.p50_ms:.2f}",
            f"{c.p99_ms:.2f}",
            ratio(c.p99_ms, fewest[c.option]),
        ]
        for c in cases
    ]


def as_json(cases: list[ScaleCase]) -> list[dict[str, Any]]:
    """Every case, with its warm and cold figures against those at the fewest groups."""
    if not cases:
        return []
    base = min(cases, key=lambda c: c.groups)
    return [
        {
            **asdict(c),
            "p99_ratio_to_fewest_groups": round(c.p99_ms / base.p99_ms, 3),
            "cold_ratio_to_fewest_groups": round(c.cold_ms / base.cold_ms, 3),
        }
        for c in cases
    ]


def report_table(cases: list[ScaleCase]) -> tuple[list[str], str, list[list[str]]]:
    """The report's table (header, alignment, rows): per count of groups a warm row and a cold
    one, each p99 against the same kind of row at the fewest groups."""
    if not cases:
        return [], "", []
    base = min(cases, key=lambda c: c.groups)
    header = [
        "groups with work",
        "tenants",
        "pending",
        "claim",
        "claims timed",
        "p50 ms",
        "p99 ms",
        f"p99 vs {base.groups:,} groups",
        "load s",
    ]
    rows = []
    for c in sorted(cases, key=lambda c: c.groups):
        owners = [f"{c.groups:,}", f"{c.tenants:,}", f"{c.pending:,}"]
        rows.append(
            [
                *owners,
                "after ANALYZE",
                str(c.samples),
                f"{c.p50_ms:.2f}",
                f"{c.p99_ms:.2f}",
                ratio(c.p99_ms, base.p99_ms),
                f"{c.load_s:.1f}",
            ]
        )
        rows.append(
            [
                *owners,
                "cold: first after the load",
                "1",
                f"{c.cold_ms:.2f}",
                f"{c.cold_ms:.2f}",
                ratio(c.cold_ms, base.cold_ms),
                "",
            ]
        )
    return header, "rrrlrrrrr", rows

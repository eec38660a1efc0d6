"""Claim latency at the tenant level: claim_batch with fair_share="tenant" beside "group", on one
backlog.

`tenant_claim_groups` groups with pending work (100,000 in the full run) spread evenly over
`tenant_claim_tenants` tenants (10,000), three pending jobs per group, loaded in SQL by
bench/claim_scale.py's loader (the tenants on the load's plan mix), then vacuumed and analyzed.
The group level goes first: its first claim timed on its own, `scale_warmup` untimed claims,
then `tenant_claim_samples` timed ones. The tenant level follows on the same backlog: its first
claim lists the type and builds the tenants' standings from the groups' counts (timed on its
own: what switching a type to that level costs once), the standings are vacuumed and analyzed
as the jobs were, then the same warm-up and timed claims. The group level goes first because a
claim by group takes the type off the tenant level, so alternating would rebuild the standings
at every switch. Every batch is checked and given back untimed (claim_scale.timed_claim), so
each claim sees the same backlog and counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from fairqueue.db import Connection
from fairqueue.stage import FairShare

from . import claim_scale, database
from .errors import BenchError
from .formats import ratio, table
from .latency import percentile
from .sizes import Sizes

JOB_TYPE = "bench_claim_tenants"
LEVELS: tuple[FairShare, ...] = ("group", "tenant")
# Goal: the claim by tenant's p99 within this factor of the claim by group's.
MAX_TENANT_OVER_GROUP = 1.5

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LevelCase:
    fair_share: str
    groups: int
    tenants: int
    pending: int
    batch: int
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    # The first claim at this level on the loaded backlog (by tenant: it lists the type).
    first_ms: float
    load_s: float


def owners(sizes: Sizes) -> Sizes:
    groups, tenants = sizes.tenant_claim_groups, sizes.tenant_claim_tenants
    if groups % tenants:
        raise BenchError(f"{groups} groups do not spread evenly over {tenants} tenants")
    return replace(sizes, tenants=tenants, groups_per_tenant=groups // tenants)


def level(
    conn: Connection, sizes: Sizes, fair_share: FairShare, load_s: float, progress: Progress
) -> LevelCase:
    """Claims at one level on the loaded backlog: the first, warm-up, then the timed ones."""
    batch = sizes.scale_batch
    first_ms = claim_scale.timed_claim(conn, batch, JOB_TYPE, fair_share)
    if fair_share == "tenant":
        database.vacuum_analyze(
            conn, "fairqueue.tenant_standings", "fairqueue.tenant_changes", "fairqueue.served"
        )
    for _ in range(sizes.scale_warmup):
        claim_scale.timed_claim(conn, batch, JOB_TYPE, fair_share)
    samples = [
        claim_scale.timed_claim(conn, batch, JOB_TYPE, fair_share)
        for _ in range(sizes.tenant_claim_samples)
    ]
    found = LevelCase(
        fair_share=fair_share,
        groups=sizes.tenant_claim_groups,
        tenants=sizes.tenant_claim_tenants,
        pending=claim_scale.JOBS_PER_GROUP * sizes.tenant_claim_groups,
        batch=batch,
        samples=len(samples),
        p50_ms=percentile(samples, 50),
        p90_ms=percentile(samples, 90),
        p99_ms=percentile(samples, 99),
        max_ms=max(samples),
        first_ms=first_ms,
        load_s=load_s,
    )
    progress(
        f"claim by {fair_share}: {found.groups:,} groups over {found.tenants:,} tenants:"
        f" p50 {found.p50_ms:.1f} ms, p99 {found.p99_ms:.1f} ms, first {found.first_ms:.1f} ms"
    )
    return found


def claim_by_level(conn: Connection, sizes: Sizes, progress: Progress) -> list[LevelCase]:
    """One case per level, group first, on one backlog; the queue is left empty."""
    found = owners(sizes)
    pending = claim_scale.JOBS_PER_GROUP * found.groups
    if sizes.scale_batch > pending:
        raise BenchError(f"batch {sizes.scale_batch} is more than the {pending} jobs pending")
    progress(f"claim by level: loading {found.groups:,} groups over {found.tenants:,} tenants")
    load_s = claim_scale.load_backlog(conn, found, JOB_TYPE)
    database.vacuum_analyze(
        conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants", "fairqueue.groups"
    )
    database.checkpoint(conn)
    cases = [level(conn, sizes, fair_share, load_s, progress) for fair_share in LEVELS]
    database.reset(conn)
    return cases


def p99_ratio(cases: Sequence[LevelCase]) -> float | None:
    """The claim by tenant's p99 over the claim by group's."""
    by = {c.fair_share: c for c in cases}
    if "tenant" not in by or "group" not in by or not by["group"].p99_ms:
        return None
    return by["tenant"].p99_ms / by["group"].p99_ms


def as_json(cases: Sequence[LevelCase]) -> dict[str, Any]:
    found = p99_ratio(cases)
    return {
        "cases": [asdict(c) for c in cases],
        "p99_tenant_over_group": None if found is None else round(found, 3),
        "goal_at_most": MAX_TENANT_OVER_GROUP,
    }


def section(cases: Sequence[LevelCase], sizes: Sizes) -> list[str]:
    if not cases:
        return []
    group = next((c for c in cases if c.fair_share == "group"), None)
    rows = [
        [
            f'"{c.fair_share}"',
            f"{c.groups:,}",
            f"{c.tenants:,}",
            f"{c.pending:,}",
            str(c.samples),
            f"{c.first_ms:.2f}",
            f"{c.p50_ms:.2f}",
            f"{c.p90_ms:.2f}",
            f"{c.p99_ms:.2f}",
            ratio(c.p99_ms, group.p99_ms if group else None),
        ]
        for c in cases
    ]
    return [
        f"### Claim latency by tenant and by group: claim_batch (batch {sizes.scale_batch})",
        "",
        f"{claim_scale.JOBS_PER_GROUP} pending jobs in each of {cases[0].groups:,} groups over"
        f" {cases[0].tenants:,} tenants, loaded in SQL and analyzed; the same backlog claimed"
        ' with fair_share="group", then with fair_share="tenant" (bench/claim_tenants.py). The'
        " first claim at each level is timed on its own; by tenant it also lists the type and"
        " builds its tenants' standings, which are then analyzed. Then"
        f" {sizes.scale_warmup} untimed claims and {sizes.tenant_claim_samples} timed ones; each"
        f" batch is given back untimed. Goal: p99 by tenant within {MAX_TENANT_OVER_GROUP:g}x of"
        " p99 by group.",
        "",
        *table(
            [
                "fair_share",
                "groups with work",
                "tenants",
                "pending",
                "claims timed",
                "first claim ms",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "p99 vs group",
            ],
            "lrrrrrrrrr",
            rows,
        ),
    ]

"""Fairness between tenants: one tenant splits its backlog over many groups to win more turns.

Arrivals: `tenant_fair_jobs` jobs from `tenant_fair_tenants` tenants, all on the middle plan,
so no tenant outranks another. Tenant 0 games the order: its arrivals go to its
`gaming_groups` groups in turn. Every other tenant has one group, and the tenants are weighted
in Zipf proportion (the r-th other tenant 1/r^s, s = zipf_exponent). The gaming tenant weighs
1, as much as the heaviest other, so its backlog is about the size of the biggest other
tenant's (the comparison the gaming is about: same backlog, more groups). Each arrival's tenant
is drawn with a fixed seed; all are enqueued in arrival order before one worker of each system
drains them, recording each job's group. Group ids name their tenant, so the arrivals map each
recorded group back to its tenant.

Systems: fairqueue with Stage(fair_share="tenant") and with fair_share="group", a job type of
its own each, and each peer (one priority for every job: first in, first out).

The metric is bench/fairness.py's, taken over tenants instead of groups:

- Windows of `tenant_fair_window` completions. At a window's start a tenant's remaining jobs
  are its demand; its fair share is its max-min fair part of the window (water filling, one
  plan). Jain's index over the tenants with a positive share, of completions over fair share;
  windows with fewer than two such tenants are not scored.
- The longest wait of a small tenant. Small tenants are the non-gaming ones whose backlog is at
  most the median non-gaming backlog. A tenant's wait is the most completions of others between
  two of its own (or before its first); every arrival is in before the drain starts, so it has
  work waiting throughout.
- The gaming tenant's completions in the first window over its fair share of it: the turns its
  groups win it while every tenant has work.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fairqueue.db import Connection
from fairqueue.groups import resume_group
from fairqueue.plans import PLANS, set_plan
from fairqueue.stage import FairShare

from . import database, fairness, load
from .arrivals import Arrival
from .errors import BenchError
from .formats import table, title
from .peers import PEERS, Peer, workers
from .sizes import Sizes

SEED = 20261202
GAMING = 0
# fairqueue's two runs: the system name each is reported under, and its job type.
LEVELS: tuple[FairShare, ...] = ("tenant", "group")
SYSTEMS: Mapping[FairShare, str] = {"tenant": "fairqueue_tenant", "group": "fairqueue_group"}
JOB_TYPES: Mapping[FairShare, str] = {"tenant": "bench_fair_tenant", "group": "bench_fair_group"}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TenantFairness:
    system: str
    jobs: int
    # Tenants with at least one arrival.
    tenants: int
    window: int
    # Jain's index over tenants per window, in order; None where the window is not scored.
    jain: list[float | None]
    gaming_tenant: str
    gaming_backlog: int
    gaming_groups: int
    gaming_first_window: float
    small_tenants: int
    small_wait: int
    small_wait_s: float
    small_wait_tenant: str
    small_wait_backlog: int
    seconds: float

    @property
    def scored(self) -> list[float]:
        return [j for j in self.jain if j is not None]

    @property
    def jain_mean(self) -> float:
        return sum(self.scored) / len(self.scored) if self.scored else 1.0

    @property
    def jain_min(self) -> float:
        return min(self.scored, default=1.0)


def middle_plan() -> str:
    ranked = sorted(PLANS.plans, key=lambda p: p.priority)
    return ranked[len(ranked) // 2].name


def owners(sizes: Sizes) -> list[tuple[str, list[str]]]:
    """Each tenant with its groups: the gaming tenant's many, one for every other."""
    return [
        (
            load.tenant_id(t),
            [load.group_id(t, k) for k in range(sizes.gaming_groups if t == GAMING else 1)],
        )
        for t in range(sizes.tenant_fair_tenants)
    ]


def arrivals(sizes: Sizes) -> list[Arrival]:
    """The gaming arrivals, the same every run."""
    count = sizes.tenant_fair_tenants
    weights = [1.0, *(1.0 / r**sizes.zipf_exponent for r in range(1, count))]
    picks = random.Random(SEED).choices(range(count), weights=weights, k=sizes.tenant_fair_jobs)
    priority = PLANS.get(middle_plan()).priority
    sent: list[Arrival] = []
    turn = 0
    for t in picks:
        k = 0
        if t == GAMING:
            k, turn = turn % sizes.gaming_groups, turn + 1
        sent.append(Arrival(tenant=load.tenant_id(t), group=load.group_id(t, k), priority=priority))
    return sent


def small_tenants(demand: Mapping[str, int], gaming: str) -> list[str]:
    others = {t: n for t, n in demand.items() if t != gaming}
    if not others:
        raise BenchError("no tenant besides the gaming one has arrivals")
    median = statistics.median_low(others.values())
    return sorted(t for t, n in others.items() if n <= median)


def longest_waits(
    order: Sequence[tuple[str, float]], started: float
) -> dict[str, tuple[int, float]]:
    """Per tenant: the most completions of others between two of its own (or before its
    first), and the seconds that gap took."""
    last_place: dict[str, int] = {}
    last_time: dict[str, float] = {}
    waits: dict[str, tuple[int, float]] = {}
    for place, (tenant, at) in enumerate(order):
        waited = place - last_place.get(tenant, -1) - 1
        if waited >= waits.get(tenant, (-1, 0.0))[0]:
            waits[tenant] = (waited, at - last_time.get(tenant, started))
        last_place[tenant], last_time[tenant] = place, at
    return waits


def score(
    system: str,
    sent: Sequence[Arrival],
    served: Sequence[tuple[str, float]],
    started: float,
    drained: float,
    window: int,
) -> TenantFairness:
    """The metric above, from the groups in completion order and their completion times."""
    tenant_of = {a.group: a.tenant for a in sent}
    order = [(tenant_of.get(g, g), at) for g, at in served]
    demand = Counter(a.tenant for a in sent)
    if Counter(t for t, _ in order) != demand:
        raise BenchError(f"{system}: the completions do not match the arrivals tenant for tenant")
    priority = {a.tenant: a.priority for a in sent}
    gaming = load.tenant_id(GAMING)
    remaining = dict(demand)
    jain: list[float | None] = []
    gaming_first = 0.0
    for first in range(0, len(order), window):
        tenants = [t for t, _ in order[first : first + window]]
        shares = fairness.fair_shares(remaining, priority, len(tenants))
        done = Counter(tenants)
        jain.append(fairness.jain_index(shares, done))
        if first == 0 and shares.get(gaming):
            gaming_first = done[gaming] / shares[gaming]
        for t in tenants:
            remaining[t] -= 1
            if not remaining[t]:
                del remaining[t]
    waits = longest_waits(order, started)
    small = small_tenants(demand, gaming)
    worst = max(small, key=lambda t: waits[t][0])
    return TenantFairness(
        system=system,
        jobs=len(sent),
        tenants=len(demand),
        window=window,
        jain=jain,
        gaming_tenant=gaming,
        gaming_backlog=demand[gaming],
        gaming_groups=len({a.group for a in sent if a.tenant == gaming}),
        gaming_first_window=gaming_first,
        small_tenants=len(small),
        small_wait=waits[worst][0],
        small_wait_s=waits[worst][1],
        small_wait_tenant=worst,
        small_wait_backlog=demand[worst],
        seconds=drained - started,
    )


def create_owners(conn: Connection, sizes: Sizes) -> None:
    """Every tenant on the middle plan, with its active groups (one transaction each)."""
    plan = middle_plan()
    for tenant, groups in owners(sizes):
        set_plan(conn, tenant, plan)
        for group in groups:
            resume_group(conn, group, tenant_id=tenant)


def run_fairqueue(
    conn: Connection, dsn: str, sizes: Sizes, sent: Sequence[Arrival], fair_share: FairShare
) -> TenantFairness:
    job_type = JOB_TYPES[fair_share]
    database.reset(conn)
    create_owners(conn, sizes)
    load.insert_arrivals(conn, job_type, sent)
    database.vacuum_analyze(
        conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants", "fairqueue.groups"
    )
    served, started, drained = fairness.drain_fairqueue(
        dsn, job_type, sizes.throughput_batch, fair_share
    )
    return score(SYSTEMS[fair_share], sent, served, started, drained, sizes.tenant_fair_window)


def run_peer(peer: Peer, dsn: str, sizes: Sizes, sent: Sequence[Arrival]) -> TenantFairness:
    run = workers.drain(peer, dsn, sent, 1, record=True)
    return score(peer.name, sent, run.served, run.started, run.drained, sizes.tenant_fair_window)


def line(found: TenantFairness) -> str:
    return (
        f"tenant fairness: {found.jobs:,} gaming arrivals through {title(found.system)}:"
        f" Jain's index {found.jain_mean:.3f}, longest small-tenant wait"
        f" {found.small_wait:,} completions"
    )


def run_all(
    conn: Connection, dsn: str, peer_dsns: Mapping[str, str], sizes: Sizes, progress: Progress
) -> list[TenantFairness]:
    """fairqueue at each level, then each peer, all on the same arrivals."""
    sent = arrivals(sizes)
    found = []
    for level in LEVELS:
        found.append(run_fairqueue(conn, dsn, sizes, sent, level))
        progress(line(found[-1]))
    for peer in PEERS:
        found.append(run_peer(peer, peer_dsns[peer.name], sizes, sent))
        progress(line(found[-1]))
    database.reset(conn)
    return found


def by_system(found: Sequence[TenantFairness], system: str) -> TenantFairness | None:
    return next((f for f in found if f.system == system), None)


def as_json(found: Sequence[TenantFairness]) -> list[dict[str, Any]]:
    return [
        {
            **asdict(f),
            "jain": [None if j is None else round(j, 4) for j in f.jain],
            "jain_mean": round(f.jain_mean, 4),
            "jain_min": round(f.jain_min, 4),
            "scored_windows": len(f.scored),
            "gaming_first_window": round(f.gaming_first_window, 3),
        }
        for f in found
    ]


def section(found: Sequence[TenantFairness], sizes: Sizes) -> list[str]:
    if not found:
        return []
    first = found[0]
    rows = [
        [
            title(f.system),
            f"{len(f.scored)} of {len(f.jain)}",
            f"{f.jain_mean:.3f}",
            f"{f.jain_min:.3f}",
            f"{f.gaming_first_window:.2f}",
            f"{f.small_wait:,}",
            f"{f.small_wait_s:.2f}",
            f"{f.small_wait_tenant} ({f.small_wait_backlog:,} jobs)",
            f"{f.seconds:.1f}",
        ]
        for f in found
    ]
    return [
        f"### Fairness between tenants: {first.tenants:,} tenants on one plan, one of them over"
        f" {first.gaming_groups:,} groups",
        "",
        f"{first.jobs:,} arrivals. The gaming tenant ({first.gaming_tenant}) spreads its"
        f" {first.gaming_backlog:,} jobs over {first.gaming_groups:,} groups in turn; each other"
        " tenant has one group, and the tenants' arrivals are drawn in Zipf proportion (exponent"
        f" {sizes.zipf_exponent:g}), the gaming tenant weighted as the heaviest of the others. All"
        " are enqueued in arrival order, then one worker of each system drains them; fairqueue"
        ' runs once with Stage(fair_share="tenant") and once with fair_share="group", the peers'
        " first in, first out.",
        "",
        f"Metric (bench/fairness_tenants.py): bench/fairness.py's, over tenants. Windows of"
        f" {sizes.tenant_fair_window:,} completions; a tenant's fair share of a window is its"
        " max-min fair part of it given each tenant's remaining jobs; Jain's index over tenants"
        " of completions over fair share. Gaming, first window: the gaming tenant's completions"
        " there over its fair share. The small-tenant wait is the longest gap, in completions of"
        f" others, between two completions of one of the {first.small_tenants:,} small tenants"
        " (backlog at most the median of the non-gaming ones) or before its first.",
        "",
        *table(
            [
                "system",
                "windows scored",
                "Jain mean",
                "Jain worst",
                "gaming, first window (x fair share)",
                "longest small-tenant wait (completions)",
                "wait s",
                "waited by",
                "drain s",
            ],
            "lrrrrrrlr",
            rows,
        ),
    ]

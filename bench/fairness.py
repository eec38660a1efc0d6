"""Fairness under skew: the same arrivals through fairqueue and through each peer.

Arrivals: `fairness_jobs` jobs over every group (1,000 in the full run). The heaviest group
brings `heavy_share` of them (90 %); the others share the rest in Zipf proportion
(weight 1/r^s for the r-th of them). Each group belongs to a tenant with a plan (the load's
plan mix, set with fairqueue.plans.set_plan); a peer gets each job's plan priority as its
job priority, the most it can do with a plan, and is otherwise first in, first out. The
arrivals are drawn with a fixed seed, enqueued in arrival order before the drain starts, and
drained by one worker of each system (at its drain settings), which records the group of
each job as its handler runs.

The metric, applied to every system's completion order alike:

- Windows: the completions in order, cut into windows of W (`fairness_window`).
- Fair share: at a window's start, each group's remaining jobs are its demand. The W
  completions are shared out by plan priority first (a plan's groups share only what higher
  plans' demand leaves, as fairqueue's order says), and within a plan max-min fairly (water
  filling: no group gets more than its demand, and the rest is split evenly).
- Jain's index of the window, over the groups whose fair share is positive, of each group's
  completions divided by its fair share: (sum y)^2 / (n * sum y^2). 1 is exactly fair; 1/n is
  one group served alone. Windows where fewer than two groups have a fair share are not
  scored (one group alone is trivially fair).
- The longest wait: the most completions of other jobs between two consecutive completions
  of one group (or from the start to its first), while it had work waiting; the group that
  waited it is the least-served group at that moment. Also given in seconds.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fairqueue.db import Connection, connect
from fairqueue.pipeline import run_pipeline
from fairqueue.plans import PLANS
from fairqueue.stage import FairShare, Job, Stage

from . import database, load
from .arrivals import Arrival
from .errors import BenchError
from .peers import Peer, workers
from .sizes import Sizes

JOB_TYPE = "bench_fair"
SEED = 20261201
LEASE_S = 300.0
DRAIN_TIMEOUT_S = 900.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class FairnessResult:
    system: str
    jobs: int
    # Groups with at least one arrival.
    groups: int
    window: int
    # Jain's index per window, in order; None where the window is not scored.
    jain: list[float | None]
    longest_wait: int
    longest_wait_s: float
    longest_wait_group: str
    longest_wait_plan: str
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


def arrivals(sizes: Sizes) -> list[Arrival]:
    """The skewed arrivals, the same every run: group 0 is the heaviest."""
    owners = [(t, k) for k in range(sizes.groups_per_tenant) for t in range(sizes.tenants)]
    tail = [1.0 / r**sizes.zipf_exponent for r in range(1, len(owners))]
    scale = (1.0 - sizes.heavy_share) / sum(tail)
    weights = [sizes.heavy_share, *(w * scale for w in tail)]
    picks = random.Random(SEED).choices(range(len(owners)), weights=weights, k=sizes.fairness_jobs)
    kinds = [
        Arrival(
            tenant=load.tenant_id(t),
            group=load.group_id(t, k),
            priority=PLANS.get(load.plan_for(t)).priority,
        )
        for t, k in owners
    ]
    return [kinds[i] for i in picks]


def water_fill(demands: dict[str, int], capacity: float) -> dict[str, float]:
    """Max-min fair shares of `capacity` over `demands`: none above its demand, the rest even."""
    shares: dict[str, float] = {}
    left = capacity
    ordered = sorted(demands.items(), key=lambda item: item[1])
    for done, (group, demand) in enumerate(ordered):
        shares[group] = min(float(demand), left / (len(ordered) - done))
        left -= shares[group]
    return shares


def fair_shares(
    remaining: dict[str, int], priority: dict[str, int], capacity: int
) -> dict[str, float]:
    """Each waiting group's fair share of the next `capacity` completions: plan priority
    first, max-min fair within a plan."""
    shares: dict[str, float] = {}
    left = float(capacity)
    for level in sorted({priority[g] for g in remaining}, reverse=True):
        tier = {g: n for g, n in remaining.items() if priority[g] == level}
        given = water_fill(tier, min(left, float(sum(tier.values()))))
        shares.update(given)
        left -= sum(given.values())
    return shares


def jain_index(shares: dict[str, float], completions: Counter[str]) -> float | None:
    """Jain's index of completions over fair shares; None with fewer than two shares."""
    ratios = [completions[g] / share for g, share in shares.items() if share > 0]
    if len(ratios) < 2:
        return None
    squares = sum(r * r for r in ratios)
    return sum(ratios) ** 2 / (len(ratios) * squares) if squares else 0.0


def score(
    system: str,
    sent: Sequence[Arrival],
    served: Sequence[tuple[str, float]],
    started: float,
    drained: float,
    window: int,
) -> FairnessResult:
    """The metric above, from the groups in completion order and their completion times."""
    demand = Counter(a.group for a in sent)
    if Counter(g for g, _ in served) != demand:
        raise BenchError(f"{system}: the completions do not match the arrivals group for group")
    priority = {a.group: a.priority for a in sent}
    plan_of = {p.priority: p.name for p in PLANS.plans}
    remaining = dict(demand)
    jain: list[float | None] = []
    for first in range(0, len(served), window):
        groups = [g for g, _ in served[first : first + window]]
        shares = fair_shares(remaining, priority, len(groups))
        jain.append(jain_index(shares, Counter(groups)))
        for g in groups:
            remaining[g] -= 1
            if not remaining[g]:
                del remaining[g]
    last_place = dict.fromkeys(demand, -1)
    last_time = dict.fromkeys(demand, started)
    longest, longest_s, longest_group = 0, 0.0, next(iter(demand))
    for place, (group, at) in enumerate(served):
        waited = place - last_place[group] - 1
        if waited > longest:
            longest, longest_s, longest_group = waited, at - last_time[group], group
        last_place[group], last_time[group] = place, at
    return FairnessResult(
        system=system,
        jobs=len(sent),
        groups=len(demand),
        window=window,
        jain=jain,
        longest_wait=longest,
        longest_wait_s=longest_s,
        longest_wait_group=longest_group,
        longest_wait_plan=plan_of[priority[longest_group]],
        seconds=drained - started,
    )


def run_fairqueue(
    conn: Connection, dsn: str, sizes: Sizes, sent: Sequence[Arrival]
) -> FairnessResult:
    """One invocation after another, as cron would start them, until no work is left; the
    stage's handler records each job's group as it runs."""
    database.reset(conn)
    load.create_owners(conn, sizes)
    load.insert_arrivals(conn, JOB_TYPE, sent)
    database.vacuum_analyze(
        conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants", "fairqueue.groups"
    )
    served, started, drained = drain_fairqueue(dsn, JOB_TYPE, sizes.throughput_batch)
    return score("fairqueue", sent, served, started, drained, sizes.fairness_window)


def drain_fairqueue(
    dsn: str, job_type: str, batch: int, fair_share: FairShare = "group"
) -> tuple[list[tuple[str, float]], float, float]:
    """Drain what is enqueued of `job_type` through run_pipeline, one invocation after another,
    as cron would start them, until no work is left. Returns (group, time.monotonic()) of each
    job as its handler ran, in order, with the times the drain started and ended."""
    served: list[tuple[str, float]] = []

    def record(job: Job) -> None:
        served.append((job.group_id or "", time.monotonic()))

    stage = Stage(
        job_type, record, batch=batch, concurrency=1, lease_s=LEASE_S, fair_share=fair_share
    )
    # A run's error is logged with its traceback; it is raised here instead.
    logging.getLogger("fairqueue").setLevel(logging.CRITICAL)
    with connect(dsn, autocommit=True) as run_conn:
        started = time.monotonic()
        while True:
            run = run_pipeline(
                dsn, [stage], conn=run_conn, time_budget_s=DRAIN_TIMEOUT_S, trigger="bench"
            )
            if run.stop_reason == "no_work":
                break
            if run.stop_reason == "error":
                raise BenchError(f"fairqueue fairness run of {job_type} failed: {run.error}")
        drained = time.monotonic()
    return served, started, drained


def run_peer(peer: Peer, dsn: str, sizes: Sizes, sent: Sequence[Arrival]) -> FairnessResult:
    run = workers.drain(peer, dsn, sent, 1, record=True)
    return score(peer.name, sent, run.served, run.started, run.drained, sizes.fairness_window)

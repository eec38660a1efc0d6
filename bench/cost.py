"""Service measured in cost (Stage(fair_by="cost")): two tenants, one whose jobs cost
`COSTS[DEAR]` units each and one whose jobs cost `COSTS[CHEAP]`, both backlogged (each with
`cost_groups` groups), drained by one pipeline under fair_by="cost".

The jobs arrive in turn (one of each tenant, oldest first), enough of the dear tenant's that
both have work until the cheap tenant's run out. Each job's claim is read back in claim order
(its `locked_at`, then its id); the claims while both tenants have work are cut into windows of
`cost_window_rounds` rounds (a round: each tenant served one dear job's cost), and each window's
served cost of the dear tenant over the cheap tenant's is scored against 1:1. Counted by jobs
instead, the dear tenant would take half the claims and a hundred times the cost.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fairqueue.db import Connection, connect
from fairqueue.pipeline import run_pipeline
from fairqueue.stage import Job, Stage

from . import database
from .alone import measured_alone
from .errors import BenchError
from .formats import table
from .sizes import FULL, Sizes

JOB_TYPE = "bench_cost"
DEAR, CHEAP = "dear", "cheap"
COSTS = {DEAR: 100, CHEAP: 1}
LEASE_S = 300.0
DRAIN_TIMEOUT_S = 600.0
# The issue's bound: each window's served cost within 5 % of 1:1.
MAX_RATIO_ERROR = 0.05

# `cheap_jobs` of the cheap tenant's and as many dear jobs as its cost covers (and some more,
# so that the dear tenant has work until the cheap one's runs out), in turn, each tenant's
# spread over its groups, created one millisecond apart, the last just now.
_JOBS = """
insert into fairqueue.jobs (type, payload, tenant_id, group_id, cost, created_at, run_after)
select %(type)s, '{}'::jsonb, j.tenant, 'g' || (j.k %% %(groups)s), j.cost, t.at, t.at
  from (select 'cost_' || %(cheap)s as tenant, k, 0 as turn, %(cheap_cost)s as cost
          from generate_series(0, %(cheap_jobs)s - 1) as k
        union all
        select 'cost_' || %(dear)s, k, 1, %(dear_cost)s
          from generate_series(0, %(dear_jobs)s - 1) as k) j,
       lateral (select now() - make_interval(secs => (2 * %(cheap_jobs)s - 2 * j.k - j.turn)
                                                     / 1000.0) as at) as t
"""

# Done jobs in claim order: a job done with no output moves to finished_jobs as it is marked
# done.
_CLAIMED = """
select j.tenant_id, j.cost
  from (select f.tenant_id, f.cost, f.locked_at, f.id from fairqueue.finished_jobs f
         where f.type = %(type)s and f.status = 'done'
        union all
        select j.tenant_id, j.cost, j.locked_at, j.id from fairqueue.jobs j
         where j.type = %(type)s and j.status = 'done') j
 order by j.locked_at, j.id
"""


@dataclass(frozen=True)
class CostRun:
    jobs: int
    seconds: float
    # Windows with both tenants' work: the dear tenant's served cost over the cheap one's.
    windows: int
    ratio_median: float | None
    ratio_worst: float | None
    # The dear tenant's share of the claims in those windows (1 / (1 + cost ratio) when fair).
    dear_claims: float | None

    @property
    def per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def _noop(_job: Job) -> None:
    return None


def _load(conn: Connection, sizes: Sizes) -> None:
    database.reset(conn)
    conn.execute(
        "insert into fairqueue.tenants (id, plan) values ('cost_dear', 'cost'), ('cost_cheap',"
        " 'cost')"
    )
    cheap = sizes.cost_cheap_jobs
    conn.execute(
        _JOBS,
        {
            "type": JOB_TYPE,
            "groups": sizes.cost_groups,
            "cheap": CHEAP,
            "dear": DEAR,
            "cheap_cost": COSTS[CHEAP],
            "dear_cost": COSTS[DEAR],
            "cheap_jobs": cheap,
            "dear_jobs": cheap * COSTS[CHEAP] // COSTS[DEAR] + 2 * sizes.cost_groups,
        },
    )
    database.vacuum_analyze(conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants")


def score(claims: Sequence[tuple[str, int]], window_units: int) -> dict[str, Any]:
    """The windows' figures: windows of `window_units` served units in all, while both tenants
    have work (up to the cheap tenant's last claim)."""
    last_cheap = max(k for k, (tenant, _) in enumerate(claims) if tenant == f"cost_{CHEAP}")
    ratios, dear_shares = [], []
    served = {DEAR: 0, CHEAP: 0}
    counts = {DEAR: 0, CHEAP: 0}
    for tenant, cost in claims[: last_cheap + 1]:
        name = DEAR if tenant == f"cost_{DEAR}" else CHEAP
        served[name] += cost
        counts[name] += 1
        if served[DEAR] + served[CHEAP] >= window_units:
            ratios.append(served[DEAR] / served[CHEAP] if served[CHEAP] else float("inf"))
            dear_shares.append(counts[DEAR] / (counts[DEAR] + counts[CHEAP]))
            served = {DEAR: 0, CHEAP: 0}
            counts = {DEAR: 0, CHEAP: 0}
    return {
        "windows": len(ratios),
        "ratio_median": statistics.median(ratios) if ratios else None,
        "ratio_worst": max(ratios, key=lambda r: abs(r - 1)) if ratios else None,
        "dear_claims": statistics.fmean(dear_shares) if dear_shares else None,
    }


def measure_once(conn: Connection, dsn: str, sizes: Sizes) -> CostRun:
    _load(conn, sizes)
    stage = Stage(JOB_TYPE, _noop, batch=sizes.throughput_batch, lease_s=LEASE_S, fair_by="cost")
    started = time.monotonic()
    with connect(dsn, autocommit=True) as own:
        run = run_pipeline(dsn, [stage], conn=own, time_budget_s=DRAIN_TIMEOUT_S, trigger="bench")
    seconds = time.monotonic() - started
    if run.stop_reason != "no_work":
        raise BenchError(f"cost drain: {run.stop_reason}: {run.error}")
    claims = [(r["tenant_id"], r["cost"]) for r in conn.execute(_CLAIMED, {"type": JOB_TYPE})]
    window = sizes.cost_window_rounds * 2 * COSTS[DEAR]
    return CostRun(len(claims), seconds, **score(claims, window))


def measure(
    conn: Connection, dsn: str, sizes: Sizes, progress: Callable[[str], None]
) -> list[CostRun]:
    """The drain `cost_repeats` times."""
    runs = []
    for _ in range(sizes.cost_repeats):
        run = measure_once(conn, dsn, sizes)
        runs.append(run)
        progress(
            f"cost: {run.jobs:,} jobs, {run.windows} windows; dear:cheap served cost median"
            f" {_cell(run.ratio_median, '.3f')}, worst {_cell(run.ratio_worst, '.3f')}"
        )
    database.reset(conn)
    return runs


def figures(runs: Sequence[CostRun]) -> dict[str, float | None]:
    """The median over the runs of each run's worst window's distance from 1:1."""
    errors = [abs(r.ratio_worst - 1) for r in runs if r.ratio_worst is not None]
    return {"ratio_error": statistics.median(errors) if errors else None}


def as_json(runs: Sequence[CostRun]) -> dict[str, Any]:
    return {"runs": [asdict(r) for r in runs], "figures": figures(runs)}


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def section(runs: Sequence[CostRun], sizes: Sizes) -> list[str]:
    rows = [
        [
            f"{r.jobs:,}",
            str(r.windows),
            _cell(r.ratio_median, ".3f"),
            _cell(r.ratio_worst, ".3f"),
            _cell(r.dear_claims, ".4f"),
        ]
        for r in runs
    ]
    return [
        f"### Fairness by cost: jobs of cost {COSTS[DEAR]} and {COSTS[CHEAP]}",
        "",
        f"{sizes.cost_cheap_jobs:,} jobs of cost {COSTS[CHEAP]} and enough of cost {COSTS[DEAR]}"
        f" over two tenants of {sizes.cost_groups} groups each, drained by one pipeline under"
        f' fair_by="cost" (batch {sizes.throughput_batch}); windows of'
        f" {sizes.cost_window_rounds * 2 * COSTS[DEAR]:,} served units while both have work"
        " (bench/cost.py).",
        "",
        *table(
            ["jobs", "windows", "dear:cheap cost median", "worst", "dear tenant's claims"],
            "rrrrr",
            rows,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.cost --dsn DSN``: this workload alone, at the full run's sizes, in a
    scratch database (superuser); prints its section of the report and the figures."""
    runs = measured_alone("python -m bench.cost", __doc__, measure, argv)
    print("\n".join(section(runs, FULL)))
    print(figures(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Weighted shares (Stage(order="shares")): two plans of weights 3 and 1, each with the same
backlog spread over its tenants' groups, drained three ways: under shares by one pipeline (the
order itself, as bench/fairness.py scores it: concurrent claimers interleave their batches in
time, which blurs a window's edges by a batch each), under shares by `shares_workers`
pipelines at once (the rates), and under order="priority" by as many (the plain fair drain the
shares are held against).

The jobs arrive in turn (one of each plan, oldest first) and none of their groups was served
before. Each job's claim time is read back (its `locked_at`, one per claim); the claims in
order are cut into windows of one round (every group's quantum once: the groups of weight 3
give three each, those of weight 1 one; within a round the groups whose oldest job is older go
first, so a shorter window sees one plan's part of a round), and the windows that end before
the heavy plan's last claim (both plans with work) are scored:

- the heavy plan's jobs over the light plan's, against 3 (the weights' ratio);
- Jain's index over the two plans' weight-normalised service (jobs / weight): 1 is service in
  exact proportion to the weights.

When the heavy plan runs dry the light plan takes every pick: its jobs per second from the
heavy plan's last claim to the end of the concurrent shares drain, against the priority drain's
jobs per second over the same backlog (the plain fair drain), is the third figure.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from fairqueue.db import Connection, connect
from fairqueue.pipeline import run_pipeline
from fairqueue.plans import Order, Plan, Plans
from fairqueue.stage import Job, Stage

from . import database
from .alone import measured_alone
from .errors import BenchError
from .formats import table
from .sizes import FULL, Sizes

JOB_TYPE = "bench_shares"
HEAVY, LIGHT = "heavy", "light"
WEIGHTS = {HEAVY: 3, LIGHT: 1}
SHARE_PLANS = Plans(
    (
        Plan(LIGHT, priority=1, daily_units=None, description="one share", weight=WEIGHTS[LIGHT]),
        Plan(
            HEAVY, priority=2, daily_units=None, description="three shares", weight=WEIGHTS[HEAVY]
        ),
    )
)
LEASE_S = 300.0
DRAIN_TIMEOUT_S = 600.0
# The issue's bounds: the windows' service within 5 % of 3:1, Jain's index at least 0.99, and
# the light plan alone at the plain fair drain's rate (here: at least 0.9 of it).
MAX_RATIO_ERROR = 0.05
MIN_JAIN = 0.99
MIN_DRY_RATE = 0.9

# Tenants `share_<plan>_<t>`, `shares_tenants` of each plan.
_TENANTS = """
insert into fairqueue.tenants (id, plan)
select 'share_' || p.plan || '_' || t, p.plan
  from unnest(array['heavy', 'light']) as p (plan), generate_series(0, %(tenants)s - 1) as t
"""

# 2 x `jobs` due jobs, the plans in turn, each plan's spread over its tenants' groups in turn,
# created one millisecond apart, the last just now.
_JOBS = """
insert into fairqueue.jobs (type, payload, tenant_id, group_id, created_at, run_after)
select %(type)s, '{}'::jsonb,
       'share_' || (case when i %% 2 = 0 then 'heavy' else 'light' end) || '_'
           || ((i / 2) %% %(tenants)s),
       'g' || ((i / 2 / %(tenants)s) %% %(groups)s),
       t.at, t.at
  from generate_series(0, 2 * %(jobs)s - 1) as i,
       lateral (select now() - make_interval(secs => (2 * %(jobs)s - i) / 1000.0) as at) as t
"""

# Done jobs: a job done with no output moves to finished_jobs as it is marked done.
_CLAIMED = """
select t.plan, j.locked_at
  from (select f.tenant_id, f.locked_at, f.id from fairqueue.finished_jobs f
         where f.type = %(type)s and f.status = 'done'
        union all
        select j.tenant_id, j.locked_at, j.id from fairqueue.jobs j
         where j.type = %(type)s and j.status = 'done') j
  join fairqueue.tenants t on t.id = j.tenant_id
 order by j.locked_at, j.id
"""


@dataclass(frozen=True)
class SharesRun:
    order: Order
    workers: int
    jobs: int
    seconds: float
    # Windows with both plans' work: the heavy over the light plan's jobs, and Jain's index.
    windows: int
    ratio_median: float | None
    ratio_worst: float | None
    jain_mean: float | None
    jain_min: float | None
    # The light plan's jobs/s once the heavy plan has run dry (shares only).
    dry_per_s: float | None

    @property
    def per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def _noop(_job: Job) -> None:
    return None


def _load(conn: Connection, sizes: Sizes) -> None:
    database.reset(conn)
    conn.execute(_TENANTS, {"tenants": sizes.shares_tenants})
    conn.execute(
        _JOBS,
        {
            "type": JOB_TYPE,
            "tenants": sizes.shares_tenants,
            "groups": sizes.shares_groups_per_tenant,
            "jobs": sizes.shares_jobs_per_plan,
        },
    )
    database.vacuum_analyze(conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants")


def _drain(dsn: str, stage: Stage, workers: int) -> float:
    """Seconds for `workers` pipelines, one thread each, to drain the type."""
    errors: list[str] = []

    def work() -> None:
        with connect(dsn, autocommit=True) as conn:
            while True:
                run = run_pipeline(
                    dsn,
                    [stage],
                    conn=conn,
                    plans=SHARE_PLANS,
                    time_budget_s=DRAIN_TIMEOUT_S,
                    trigger="bench",
                )
                if run.stop_reason == "no_work":
                    return
                if run.stop_reason != "time_budget":
                    errors.append(f"{run.stop_reason}: {run.error}")
                    return

    threads = [threading.Thread(target=work, name=f"shares-{k}") for k in range(workers)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DRAIN_TIMEOUT_S + 60)
    seconds = time.monotonic() - started
    if errors or any(t.is_alive() for t in threads):
        raise BenchError(f"shares drain ({stage.order}): {errors or 'a pipeline hung'}")
    return seconds


def jain(values: Sequence[float]) -> float:
    """Jain's index: 1 when every value is equal, 1/n when one holds everything."""
    squares = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * squares) if squares else 1.0


def round_jobs(sizes: Sizes) -> int:
    """Jobs in one round: every group's quantum once (quantum 1 x its plan's weight)."""
    return sizes.shares_tenants * sizes.shares_groups_per_tenant * sum(WEIGHTS.values())


def score(claims: Sequence[tuple[str, datetime]], window: int) -> dict[str, Any]:
    """The windows' figures and the light plan's rate after the heavy plan's last claim."""
    last_heavy = max(k for k, (plan, _) in enumerate(claims) if plan == HEAVY)
    ratios, jains = [], []
    for start in range(0, last_heavy + 1 - window, window):
        plans = [plan for plan, _ in claims[start : start + window]]
        heavy, light = plans.count(HEAVY), plans.count(LIGHT)
        ratios.append(heavy / light if light else float("inf"))
        jains.append(jain([heavy / WEIGHTS[HEAVY], light / WEIGHTS[LIGHT]]))
    after = claims[last_heavy + 1 :]
    dry_seconds = (after[-1][1] - claims[last_heavy][1]).total_seconds() if after else 0.0
    expected = WEIGHTS[HEAVY] / WEIGHTS[LIGHT]
    return {
        "windows": len(ratios),
        "ratio_median": statistics.median(ratios) if ratios else None,
        "ratio_worst": max(ratios, key=lambda r: abs(r / expected - 1)) if ratios else None,
        "jain_mean": statistics.fmean(jains) if jains else None,
        "jain_min": min(jains) if jains else None,
        "dry_per_s": len(after) / dry_seconds if dry_seconds > 0 else None,
    }


def measure_order(
    conn: Connection, dsn: str, sizes: Sizes, order: Order, workers: int
) -> SharesRun:
    _load(conn, sizes)
    stage = Stage(JOB_TYPE, _noop, batch=sizes.throughput_batch, lease_s=LEASE_S, order=order)
    seconds = _drain(dsn, stage, workers)
    claims = [(r["plan"], r["locked_at"]) for r in conn.execute(_CLAIMED, {"type": JOB_TYPE})]
    if len(claims) != 2 * sizes.shares_jobs_per_plan:
        raise BenchError(f"shares drain ({order}): {len(claims)} of the jobs done")
    if order != "shares":
        # The plain fair drain: only its rate is compared.
        return SharesRun(order, workers, len(claims), seconds, 0, None, None, None, None, None)
    return SharesRun(order, workers, len(claims), seconds, **score(claims, round_jobs(sizes)))


def measure(
    conn: Connection, dsn: str, sizes: Sizes, progress: Callable[[str], None]
) -> list[SharesRun]:
    """Each way `shares_repeats` times, interleaved."""
    runs = []
    ways: list[tuple[Order, int]] = [
        ("shares", 1),
        ("shares", sizes.shares_workers),
        ("priority", sizes.shares_workers),
    ]
    for _ in range(sizes.shares_repeats):
        for order, workers in ways:
            run = measure_order(conn, dsn, sizes, order, workers)
            runs.append(run)
            progress(
                f"shares: order={order} x{workers}, {run.jobs:,} jobs in {run.seconds:.2f} s"
                f" ({run.per_s:,.0f} jobs/s); heavy:light median {_cell(run.ratio_median, '.2f')},"
                f" worst {_cell(run.ratio_worst, '.2f')}, Jain min {_cell(run.jain_min, '.3f')}"
            )
    database.reset(conn)
    return runs


def figures(runs: Sequence[SharesRun]) -> dict[str, float | None]:
    """The medians the targets read: the one-pipeline shares runs' worst ratio error and lowest
    Jain, and the concurrent shares runs' light plan's rate once alone over the priority
    drain's rate."""
    ordered = [r for r in runs if r.order == "shares" and r.workers == 1]
    concurrent = [r for r in runs if r.order == "shares" and r.workers > 1]
    plain = [r.per_s for r in runs if r.order == "priority"]
    expected = WEIGHTS[HEAVY] / WEIGHTS[LIGHT]
    errors = [abs(r.ratio_worst / expected - 1) for r in ordered if r.ratio_worst is not None]
    jains = [r.jain_min for r in ordered if r.jain_min is not None]
    dry = [r.dry_per_s for r in concurrent if r.dry_per_s is not None]
    return {
        "ratio_error": statistics.median(errors) if errors else None,
        "jain_min": statistics.median(jains) if jains else None,
        "dry_over_plain": statistics.median(dry) / statistics.median(plain)
        if dry and plain
        else None,
        "plain_per_s": statistics.median(plain) if plain else None,
        "dry_per_s": statistics.median(dry) if dry else None,
    }


def as_json(runs: Sequence[SharesRun]) -> dict[str, Any]:
    return {"runs": [asdict(r) for r in runs], "figures": figures(runs)}


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def section(runs: Sequence[SharesRun], sizes: Sizes) -> list[str]:
    rows = [
        [
            r.order,
            str(r.workers),
            f"{r.per_s:,.0f}",
            str(r.windows),
            _cell(r.ratio_median, ".2f"),
            _cell(r.ratio_worst, ".2f"),
            _cell(r.jain_min, ".3f"),
            _cell(r.dry_per_s, ",.0f"),
        ]
        for r in runs
    ]
    return [
        "### Weighted shares: plans of weights 3 and 1",
        "",
        f"{sizes.shares_jobs_per_plan:,} jobs of each plan over {sizes.shares_tenants} tenants"
        f" x {sizes.shares_groups_per_tenant} groups each, drained by one pipeline or by"
        f" {sizes.shares_workers} (batch {sizes.throughput_batch}); windows of one round"
        f" ({round_jobs(sizes):,} claims) while both plans have work (bench/shares.py). The"
        " priority drain of the same backlog is the plain fair drain the light plan's rate"
        " alone is held against.",
        "",
        *table(
            [
                "order",
                "pipelines",
                "jobs/s",
                "windows",
                "heavy:light median",
                "worst",
                "Jain min",
                "light alone jobs/s",
            ],
            "lrrrrrrr",
            rows,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.shares --dsn DSN``: this workload alone, at the full run's sizes, in a
    scratch database (superuser); prints its section of the report and the figures."""
    runs = measured_alone("python -m bench.shares", __doc__, measure, argv)
    print("\n".join(section(runs, FULL)))
    print(figures(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

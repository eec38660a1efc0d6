"""Caps per tenant (Plan(max_running=n)): one tenant on a capped plan with a large backlog over
many groups, beside many uncapped tenants, drained by `caps_workers` pipelines twice: with the
cap, and with no cap (the same plans, max_running None). Each run samples the capped tenant's
running jobs every few milliseconds from a connection of its own, and its handler counts them
again on every job (a claim is then committed), so the highest count seen is the cap's proof.

The figure the target reads: the other tenants' jobs per second (their jobs, from the start to
their last job's claim) with the cap over the same without it. The cap holds one tenant back;
it must not slow the rest (at least `MIN_OTHERS_RATIO` of the uncapped run's rate).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fairqueue.db import Connection, connect
from fairqueue.pipeline import run_pipeline
from fairqueue.plans import Plan, Plans
from fairqueue.stage import Job, Stage

from . import database
from .alone import measured_alone
from .errors import BenchError
from .formats import table
from .sizes import FULL, Sizes

JOB_TYPE = "bench_caps"
CAPPED, OPEN = "capped", "open"
CAP = 4
CAPPED_TENANT = "caps_capped"
LEASE_S = 300.0
DRAIN_TIMEOUT_S = 600.0
# The issue's bound: the others' drain within 10 % of an uncapped run.
MIN_OTHERS_RATIO = 0.9


def plans(cap: int | None) -> Plans:
    """The open plan, uncapped, and the capped plan with ``cap`` (None: the uncapped run)."""
    return Plans(
        (
            Plan(OPEN, priority=1, daily_units=None, description="no cap"),
            Plan(CAPPED, priority=1, daily_units=None, description="capped", max_running=cap),
        )
    )


# The open tenants `caps_open_<t>` and the one capped tenant.
_TENANTS = """
insert into fairqueue.tenants (id, plan)
select 'caps_open_' || t, 'open' from generate_series(0, %(tenants)s - 1) as t
union all
select 'caps_capped', 'capped'
"""

# `jobs` due jobs of the open tenants over their groups, and `capped_jobs` of the capped tenant
# over `capped_groups` groups, all in turn, created one millisecond apart, the last just now.
_JOBS = """
insert into fairqueue.jobs (type, payload, tenant_id, group_id, created_at, run_after)
select %(type)s, '{}'::jsonb, j.tenant_id, j.group_id, t.at, t.at
  from (select i, 'caps_open_' || (i %% %(tenants)s) as tenant_id,
               'g' || ((i / %(tenants)s) %% %(groups)s) as group_id
          from generate_series(0, %(jobs)s - 1) as i
        union all
        select i * (%(jobs)s / %(capped_jobs)s), 'caps_capped', 'g' || (i %% %(capped_groups)s)
          from generate_series(0, %(capped_jobs)s - 1) as i) j,
       lateral (select now() - make_interval(secs => (%(jobs)s - j.i) / 1000.0) as at) as t
"""

_RUNNING = """
select count(*) as n from fairqueue.jobs
 where type = %(type)s and tenant_id = 'caps_capped' and status = 'running'
"""

# The open tenants' jobs done and when each was claimed (done jobs move to finished_jobs).
_OTHERS = """
select count(*) as n, max(j.locked_at) - min(j.locked_at) as span
  from (select f.locked_at from fairqueue.finished_jobs f
         where f.type = %(type)s and f.status = 'done' and f.tenant_id <> 'caps_capped'
        union all
        select j.locked_at from fairqueue.jobs j
         where j.type = %(type)s and j.status = 'done' and j.tenant_id <> 'caps_capped') j
"""


@dataclass(frozen=True)
class CapsRun:
    cap: int | None
    workers: int
    others: int
    seconds: float
    # The capped tenant's most running jobs of the type, as sampled and as its handlers saw.
    most_running: int

    @property
    def others_per_s(self) -> float:
        return self.others / self.seconds if self.seconds else 0.0


def _load(conn: Connection, sizes: Sizes) -> None:
    database.reset(conn)
    conn.execute(_TENANTS, {"tenants": sizes.caps_tenants})
    conn.execute(
        _JOBS,
        {
            "type": JOB_TYPE,
            "tenants": sizes.caps_tenants,
            "groups": sizes.caps_groups_per_tenant,
            "jobs": sizes.caps_jobs,
            "capped_jobs": sizes.caps_capped_jobs,
            "capped_groups": sizes.caps_capped_groups,
        },
    )
    database.vacuum_analyze(conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants")


def measure_run(conn: Connection, dsn: str, sizes: Sizes, cap: int | None) -> CapsRun:
    _load(conn, sizes)
    seen = [0]
    lock = threading.Lock()
    local = threading.local()
    opened: list[Connection] = []

    def count(look: Connection) -> None:
        row = look.execute(_RUNNING, {"type": JOB_TYPE}).fetchone()
        assert row is not None
        with lock:
            seen[0] = max(seen[0], int(row["n"]))

    def handler(job: Job) -> None:
        if job.tenant_id != CAPPED_TENANT:
            return
        if not hasattr(local, "conn"):
            local.conn = connect(dsn, autocommit=True)
            with lock:
                opened.append(local.conn)
        count(local.conn)

    stage = Stage(JOB_TYPE, handler, batch=sizes.throughput_batch, lease_s=LEASE_S)
    done = threading.Event()

    def sample() -> None:
        with connect(dsn, autocommit=True) as look:
            while not done.wait(0.005):
                count(look)

    sampler = threading.Thread(target=sample, name="caps-sampler")
    sampler.start()
    try:
        _drain(dsn, stage, sizes.caps_workers, plans(cap))
    finally:
        done.set()
        sampler.join()
        for opened_conn in opened:
            opened_conn.close()
    row = conn.execute(_OTHERS, {"type": JOB_TYPE}).fetchone()
    assert row is not None
    if row["n"] != sizes.caps_jobs:
        raise BenchError(f"caps drain (cap {cap}): {row['n']} of the others' jobs done")
    return CapsRun(cap, sizes.caps_workers, row["n"], row["span"].total_seconds(), seen[0])


def _drain(dsn: str, stage: Stage, workers: int, drain_plans: Plans) -> None:
    """`workers` pipelines, one thread each, until the type is drained."""
    errors: list[str] = []

    def work() -> None:
        with connect(dsn, autocommit=True) as conn:
            while True:
                run = run_pipeline(
                    dsn,
                    [stage],
                    conn=conn,
                    plans=drain_plans,
                    time_budget_s=DRAIN_TIMEOUT_S,
                    trigger="bench",
                )
                left = conn.execute(
                    "select exists (select 1 from fairqueue.jobs where type = %s"
                    " and status in ('pending', 'running')) as left",
                    (stage.name,),
                ).fetchone()
                # A run stops with no_work when what is left is its cap's; the others finish it.
                if run.stop_reason == "no_work" and left is not None and not left["left"]:
                    return
                if run.stop_reason not in ("no_work", "time_budget"):
                    errors.append(f"{run.stop_reason}: {run.error}")
                    return
                if run.stop_reason == "no_work":
                    time.sleep(0.005)

    threads = [threading.Thread(target=work, name=f"caps-{k}") for k in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DRAIN_TIMEOUT_S + 60)
    if errors or any(t.is_alive() for t in threads):
        raise BenchError(f"caps drain: {errors or 'a pipeline hung'}")


def measure(
    conn: Connection, dsn: str, sizes: Sizes, progress: Callable[[str], None]
) -> list[CapsRun]:
    """Capped and uncapped, `caps_repeats` times, interleaved."""
    runs = []
    for _ in range(sizes.caps_repeats):
        for cap in (CAP, None):
            run = measure_run(conn, dsn, sizes, cap)
            runs.append(run)
            progress(
                f"caps: cap {_cell(run.cap)} x{run.workers}: the others' {run.others:,} jobs in"
                f" {run.seconds:.2f} s ({run.others_per_s:,.0f} jobs/s); the capped tenant ran"
                f" at most {run.most_running} at once"
            )
    database.reset(conn)
    return runs


def figures(runs: Sequence[CapsRun]) -> dict[str, float | None]:
    """The medians the targets read: the others' rate with the cap over without it, and the
    most the capped tenant ran at once in any capped run."""
    capped = [r.others_per_s for r in runs if r.cap is not None]
    uncapped = [r.others_per_s for r in runs if r.cap is None]
    most = [r.most_running for r in runs if r.cap is not None]
    return {
        "others_ratio": statistics.median(capped) / statistics.median(uncapped)
        if capped and uncapped
        else None,
        "capped_per_s": statistics.median(capped) if capped else None,
        "uncapped_per_s": statistics.median(uncapped) if uncapped else None,
        "most_running": max(most) if most else None,
    }


def as_json(runs: Sequence[CapsRun]) -> dict[str, Any]:
    return {"runs": [asdict(r) for r in runs], "figures": figures(runs)}


def _cell(value: int | None) -> str:
    return "none" if value is None else str(value)


def section(runs: Sequence[CapsRun], sizes: Sizes) -> list[str]:
    rows = [
        [_cell(r.cap), str(r.workers), f"{r.others_per_s:,.0f}", str(r.most_running)] for r in runs
    ]
    return [
        "### Caps per tenant: one capped tenant beside uncapped ones",
        "",
        f"{sizes.caps_jobs:,} jobs of {sizes.caps_tenants} uncapped tenants x"
        f" {sizes.caps_groups_per_tenant} groups, and {sizes.caps_capped_jobs:,} of one tenant"
        f" over {sizes.caps_capped_groups} groups, drained by {sizes.caps_workers} pipelines"
        f" (batch {sizes.throughput_batch}) with that tenant's plan capped at {CAP} running and"
        " with no cap (bench/caps.py). The others' jobs/s run from the first claim to their last.",
        "",
        *table(
            ["cap", "pipelines", "others' jobs/s", "capped tenant's most running"],
            "lrrr",
            rows,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.caps --dsn DSN``: this workload alone, at the full run's sizes, in a
    scratch database (superuser); prints its section of the report and the figures."""
    runs = measured_alone("python -m bench.caps", __doc__, measure, argv)
    print("\n".join(section(runs, FULL)))
    print(figures(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

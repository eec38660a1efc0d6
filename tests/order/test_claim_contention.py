"""Claimers that overlap: a claim whose candidates another claimer holds looks further down the
order, so a run stops with no_work only when nothing claimable is left that nobody holds."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from fairqueue import PLANS, Plans, Stage, connect, run_pipeline
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import Order, set_plan
from fairqueue.stage import FairBy
from support.rows import race

BATCH = 50


def _due_pending(conn: Connection, job_type: str) -> int:
    row = conn.execute(
        "select count(*) as n from fairqueue.jobs"
        " where type = %s and status = 'pending' and run_after <= now()",
        (job_type,),
    ).fetchone()
    assert row is not None
    return int(row["n"])


def _backlog(
    conn: Connection, job_type: str, jobs: int, groups: int, *, costs: int = 1
) -> list[str]:
    """``jobs`` over ``groups`` groups of 200 tenants, costing 1 to ``costs`` in turn."""
    rows = conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id, cost)"
        " select %s, 't' || (i %% 200), 'g' || (i %% %s), 1 + i %% %s"
        " from generate_series(1, %s) i returning id::text",
        (job_type, groups, costs, jobs),
    ).fetchall()
    conn.execute("analyze fairqueue.jobs")
    return [row["id"] for row in rows]


@pytest.mark.parametrize("quantum", [1, 4])
def test_a_claim_whose_candidates_are_held_takes_the_next_ones(
    conn: Connection, dsn: str, quantum: int
) -> None:
    stage = Stage(f"held_q{quantum}", handler=lambda _job: None, quantum=quantum)
    _backlog(conn, stage.name, jobs=3000, groups=1000)
    with psycopg.connect(dsn) as holder, connect(dsn, autocommit=True) as claimer:
        # The stage's quantum stamped as a pipeline's claim stamps it, in its own transaction;
        # then another claimer's batch of 200, its transaction still open: the best candidates.
        claimer.execute(
            "select fairqueue.ready_for_claim(%s, '{}', '{}', %s)", (stage.name, quantum)
        )
        held = holder.execute(
            "select id from fairqueue.claim(%s, 200, 600, 'holder', null, array[]::text[],"
            " array[]::integer[], 1, array[]::integer[], %s, array[]::integer[], 0)",
            (stage.name, quantum),
        ).fetchall()
        claimed = claim_batch(claimer, stage.name, batch=BATCH, lease_s=600, locked_by="claimer")
        assert len(claimed) == BATCH
        assert not {row[0] for row in held} & {job.id for job in claimed}
        holder.rollback()


# Under shares the tenants' plans weigh 1, 2 and 3: groups of three quanta side by side.
WEIGHED = Plans(
    tuple(replace(plan, weight=w) for plan, w in zip(PLANS.plans, (1, 2, 3), strict=True))
)


@pytest.mark.parametrize(
    ("quantum", "order", "fair_by"),
    [
        (1, "priority", "jobs"),
        (4, "priority", "jobs"),
        (2, "shares", "jobs"),
        (4, "shares", "cost"),
    ],
)
def test_concurrent_pipelines_stop_only_when_nothing_unheld_is_due(
    conn: Connection, dsn: str, admin_dsn: str, quantum: int, order: Order, fair_by: FairBy
) -> None:
    ran: list[str] = []
    lock = threading.Lock()

    def record(job: Any) -> None:
        with lock:
            ran.append(str(job.id))

    stage = Stage(
        f"crowded_q{quantum}_{order}_{fair_by}",
        batch=BATCH,
        handler=record,
        quantum=quantum,
        order=order,
        fair_by=fair_by,
    )
    stages = [stage]
    # Counted by cost, jobs of costs 1 to 3 against a quantum of 4 (8 for the heaviest plan):
    # a group's run ends within the jobs its quantum reads.
    every = _backlog(conn, stage.name, jobs=8000, groups=1000, costs=3 if fair_by == "cost" else 1)
    for t in range(200):
        set_plan(conn, f"t{t}", WEIGHED.plans[t % 3].name, plans=WEIGHED)
    pipelines = 8
    left_at_stop: list[int] = []

    def drain() -> str:
        result = run_pipeline(dsn, stages, trigger="test", plans=WEIGHED)
        # As the superuser: the application role sees no tenant's jobs without a tenant set.
        with connect(admin_dsn, autocommit=True) as check:
            left_at_stop.append(_due_pending(check, stage.name))
        return result.stop_reason

    outcomes = race([drain] * pipelines)
    assert outcomes == ["no_work"] * pipelines
    # When a pipeline stopped, what still looked due was at most what the other seven held in
    # claims not yet committed.
    assert max(left_at_stop) <= (pipelines - 1) * BATCH
    assert _due_pending(conn, stage.name) == 0
    assert Counter(ran) == Counter(every)

"""Every batch is exactly the next picks of the order, written out plainly in Python
(support.order_workloads.next_picks): plan priority, then the whole quanta of jobs of the type
served to the (tenant, group) in the last day (each pick counting for the next), then the
oldest due job, the group at the top giving the rest of its quantum in a row. Workloads are
generated: plans, tenants, groups, paused groups, jobs due and not yet due, history inside and
outside the day, batch sizes from one to more than the groups, quanta from 1 (the exact order)
to 8, both orders (plan priority, or shares by the plans' weights, each plan's groups taking a
quantum in proportion to its weight), service counted in jobs or in their drawn costs
(Stage(fair_by="cost")), each job counting its cost from its claim on."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairqueue import PLANS, Stage
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import ORDERS, Order, Plans
from fairqueue.stage import FairBy
from support.order_workloads import (
    Workload,
    assert_within_caps,
    finish_running,
    next_picks,
    running_before,
    served_before,
    workloads,
)
from support.order_workloads import load as load_workload

Stage("ordered", handler=lambda _job: None)

TENANTS = ["t1", "t2", "t3", "t4", "t5", "t6", None]
GROUPS = ["inbox", "archive", "news", "mail", None]
ORDERED = workloads(TENANTS, GROUPS, costs=True)


def _reset(conn: Connection) -> None:
    conn.execute("truncate fairqueue.jobs, fairqueue.served, fairqueue.groups, fairqueue.tenants")


WEIGHTS = st.sampled_from([0.25, 0.5, 1, 1.5, 2, 3])
# A plan's cap of running jobs per tenant: mostly none, else small enough to bind.
CAPS = st.one_of(st.none(), st.none(), st.integers(min_value=1, max_value=4))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    load=ORDERED,
    quantum=st.one_of(st.just(1), st.integers(min_value=1, max_value=8)),
    order=st.sampled_from(ORDERS),
    weights=st.tuples(WEIGHTS, WEIGHTS, WEIGHTS),
    fair_by=st.sampled_from(["jobs", "cost"]),
    caps=st.tuples(CAPS, CAPS, CAPS),
    finished=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_every_batch_is_the_next_picks_of_the_plain_model(
    conn: Connection,
    load: Workload,
    quantum: int,
    order: Order,
    weights: tuple[float, float, float],
    fair_by: FairBy,
    caps: tuple[int | None, int | None, int | None],
    finished: list[bool],
) -> None:
    # One type whose quanta change from example to example (the stage's quantum, its order, the
    # plans' weights): each change restamps the type's standings (the claim door's
    # quanta_stamped), which the batches then rank by.
    plans = Plans(
        tuple(
            replace(plan, weight=w, max_running=c)
            for plan, w, c in zip(PLANS.plans, weights, caps, strict=True)
        )
    )
    _reset(conn)
    due = load_workload(conn, "ordered", load)
    # The history's rows count their costs whatever the stage counts by: a type's served counts
    # are the units its jobs were counted as when claimed, however they were claimed.
    served = served_before(load)
    running = running_before(load)
    for batch, finish in zip(load.batches, finished, strict=False):
        expected = next_picks(
            load,
            due,
            served,
            quantum,
            batch,
            plans=plans,
            order=order,
            fair_by=fair_by,
            running=running,
        )
        claimed = claim_batch(
            conn,
            "ordered",
            batch=batch,
            lease_s=600,
            locked_by="property",
            quantum=quantum,
            order=order,
            plans=plans,
            fair_by=fair_by,
        )
        assert sorted(str(c.id) for c in claimed) == sorted(str(i) for i in expected)
        assert_within_caps(conn, "ordered", load, plans)
        if finish:
            finish_running(conn, "ordered")
            running.clear()

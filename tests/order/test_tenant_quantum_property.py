"""Every batch at the tenant level with a quantum is exactly the next picks of the tenant order
written out plainly in Python (support.order_workloads.next_tenant_picks): plan priority, then
the tenant's whole quanta served, then its best group (its count, then its oldest due job); the
tenant at the top gives the rest of its quantum in a row, one job a turn among its groups.
Workloads as the group level's property test generates them, quanta from 1 (the exact order) to
8, the quantum changing from example to example so that the tenant standings are restamped; both
orders (plan priority, or shares by the plans' weights, each plan's tenants taking a quantum in
proportion to its weight)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairqueue import PLANS, Plans, Stage
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import ORDERS, Order
from fairqueue.stage import FairBy
from support.order_workloads import (
    Workload,
    assert_within_caps,
    finish_running,
    next_tenant_picks,
    running_before,
    served_before,
    workloads,
)
from support.order_workloads import load as load_workload

Stage("tenant_quanta", handler=lambda _job: None, fair_share="tenant")

TENANTS = ["t1", "t2", "t3", "t4", None]
GROUPS = ["inbox", "archive", "news", "mail", "a", "b", None]
BY_TENANT = workloads(TENANTS, GROUPS, costs=True)
WEIGHTS = st.sampled_from([0.25, 0.5, 1, 1.5, 2, 3])
# A plan's cap of running jobs per tenant: mostly none, else small enough to bind.
CAPS = st.one_of(st.none(), st.none(), st.integers(min_value=1, max_value=4))


def _reset(conn: Connection, quantum: int) -> None:
    conn.execute(
        "truncate fairqueue.jobs, fairqueue.served, fairqueue.groups, fairqueue.tenants,"
        " fairqueue.tenant_level_types, fairqueue.tenant_standings, fairqueue.tenant_changes"
    )
    # Listed at another quantum before the workload arrives: its tenants' standings are folded
    # in from the log at that quantum, and the first batch restamps them.
    other = quantum % 8 + 1
    claim_batch(conn, "tenant_quanta", batch=1, lease_s=600, locked_by="property", quantum=other)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    load=BY_TENANT,
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
    # Under shares each tenant's quantum is the stage's times its plan's weight: the weights
    # change from example to example, so the tenant standings are restamped by plan too.
    plans = Plans(
        tuple(
            replace(plan, weight=w, max_running=c)
            for plan, w, c in zip(PLANS.plans, weights, caps, strict=True)
        )
    )
    _reset(conn, quantum)
    due = load_workload(conn, "tenant_quanta", load)
    group_served = served_before(load)
    tenant_served: Counter[str | None] = Counter()
    for (tenant, _), units in group_served.items():
        tenant_served[tenant] += units
    running = running_before(load)
    for batch, finish in zip(load.batches, finished, strict=False):
        expected = next_tenant_picks(
            load,
            due,
            tenant_served,
            group_served,
            quantum,
            batch,
            plans=plans,
            order=order,
            fair_by=fair_by,
            running=running,
        )
        claimed = claim_batch(
            conn,
            "tenant_quanta",
            batch=batch,
            lease_s=600,
            locked_by="property",
            quantum=quantum,
            order=order,
            plans=plans,
            fair_by=fair_by,
        )
        assert sorted(str(c.id) for c in claimed) == sorted(str(i) for i in expected)
        assert_within_caps(conn, "tenant_quanta", load, plans)
        if finish:
            finish_running(conn, "tenant_quanta")
            running.clear()


def test_the_guides_batch_at_quantum_3(conn: Connection) -> None:
    # docs/guide/fairness.md: acme (groups a, b), bolt (c), cora (d, one job served today), five
    # jobs a group created in turn. In batches of 3, acme's quantum goes round its groups, bolt
    # gives its own, cora the two left of its quantum, and acme, whose group b has been served
    # least, goes first again.
    _reset(conn, 3)
    keys = {"a": ("acme", "a"), "b": ("acme", "b"), "c": ("bolt", "c"), "d": ("cora", "d")}
    workload = Workload(
        plans={"acme": "free", "bolt": "free", "cora": "free"},
        paused=frozenset(),
        history=[(keys["d"], True)],
        jobs=[(keys[g], True) for _ in range(5) for g in "abcd"],
        batches=[],
    )
    due = load_workload(conn, "tenant_quanta", workload)
    names = {job_id: f"{key[1].upper()}{age // 4 + 1}" for job_id, key, age, _ in due}
    batches = [
        {
            names[c.id]
            for c in claim_batch(
                conn, "tenant_quanta", batch=3, lease_s=600, locked_by="guide", quantum=3
            )
        }
        for _ in range(3)
    ]
    assert batches == [{"A1", "B1", "A2"}, {"C1", "C2", "C3"}, {"D1", "D2", "B2"}]

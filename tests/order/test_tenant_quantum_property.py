"""Every batch at the tenant level with a quantum is exactly the next picks of the tenant order
written out plainly in Python (support.order_workloads.next_tenant_picks): plan priority, then
the tenant's whole quanta served, then its best group (its count, then its oldest due job); the
tenant at the top gives the rest of its quantum in a row, one job a turn among its groups.
Workloads as the group level's property test generates them, quanta from 1 (the exact order) to
8, the quantum changing from example to example so that the tenant standings are restamped."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairqueue import Stage
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from support.order_workloads import Workload, next_tenant_picks, workloads
from support.order_workloads import load as load_workload

Stage("tenant_quanta", handler=lambda _job: None, fair_share="tenant")

TENANTS = ["t1", "t2", "t3", "t4", None]
GROUPS = ["inbox", "archive", "news", "mail", "a", "b", None]
BY_TENANT = workloads(TENANTS, GROUPS)


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
@given(load=BY_TENANT, quantum=st.one_of(st.just(1), st.integers(min_value=1, max_value=8)))
def test_every_batch_is_the_next_picks_of_the_plain_model(
    conn: Connection, load: Workload, quantum: int
) -> None:
    _reset(conn, quantum)
    due = load_workload(conn, "tenant_quanta", load)
    group_served = Counter(key for key, recent in load.history if recent)
    tenant_served = Counter(key[0] for key, recent in load.history if recent)
    for batch in load.batches:
        expected = next_tenant_picks(load, due, tenant_served, group_served, quantum, batch)
        claimed = claim_batch(
            conn, "tenant_quanta", batch=batch, lease_s=600, locked_by="property", quantum=quantum
        )
        assert sorted(str(c.id) for c in claimed) == sorted(str(i) for i in expected)

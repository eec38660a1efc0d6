"""Every batch is exactly the next picks of the order, written out plainly in Python
(support.order_workloads.next_picks): plan priority, then the whole quanta of jobs of the type
served to the (tenant, group) in the last day (each pick counting for the next), then the
oldest due job, the group at the top giving the rest of its quantum in a row. Workloads are
generated: plans, tenants, groups, paused groups, jobs due and not yet due, history inside and
outside the day, batch sizes from one to more than the groups, quanta from 1 (the exact order)
to 8."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairqueue import Stage
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from support.order_workloads import Workload, next_picks, workloads
from support.order_workloads import load as load_workload

Stage("ordered", handler=lambda _job: None)

TENANTS = ["t1", "t2", "t3", "t4", "t5", "t6", None]
GROUPS = ["inbox", "archive", "news", "mail", None]
ORDERED = workloads(TENANTS, GROUPS)


def _reset(conn: Connection) -> None:
    conn.execute("truncate fairqueue.jobs, fairqueue.served, fairqueue.groups, fairqueue.tenants")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(load=ORDERED, quantum=st.one_of(st.just(1), st.integers(min_value=1, max_value=8)))
def test_every_batch_is_the_next_picks_of_the_plain_model(
    conn: Connection, load: Workload, quantum: int
) -> None:
    # One type whose quantum changes from example to example: each change restamps the type's
    # standings (the claim door's quantum_stamped), which the batches then rank by.
    _reset(conn)
    due = load_workload(conn, "ordered", load)
    served = Counter(key for key, recent in load.history if recent)
    for batch in load.batches:
        expected = next_picks(load, due, served, quantum, batch)
        claimed = claim_batch(
            conn, "ordered", batch=batch, lease_s=600, locked_by="property", quantum=quantum
        )
        assert sorted(str(c.id) for c in claimed) == sorted(str(i) for i in expected)

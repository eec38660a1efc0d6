"""Every batch is exactly the next picks of the order, written out plainly in Python: plan
priority, then the fewest jobs of the type served to the (tenant, group) in the last day (each
pick counting for the next), then the oldest due job. Workloads are generated: plans, tenants,
groups, paused groups, jobs due and not yet due, history inside and outside the day, batch
sizes from one to more than the groups."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings

from fairqueue import Stage
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from support.order_workloads import Workload, priority, workloads
from support.order_workloads import load as load_workload

Stage("ordered", handler=lambda _job: None)

TENANTS = ["t1", "t2", "t3", "t4", "t5", "t6", None]
GROUPS = ["inbox", "archive", "news", "mail", None]
ORDERED = workloads(TENANTS, GROUPS)


def _reset(conn: Connection) -> None:
    conn.execute("truncate fairqueue.jobs, fairqueue.served, fairqueue.groups, fairqueue.tenants")


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(load=ORDERED)
def test_every_batch_is_the_next_picks_of_the_plain_model(conn: Connection, load: Workload) -> None:
    _reset(conn)
    due = load_workload(conn, "ordered", load)
    served = Counter(key for key, recent in load.history if recent)
    for batch in load.batches:
        expected = []
        for _ in range(min(batch, len(due))):
            best = min(due, key=lambda d: (-priority(load, d[1][0]), served[d[1]], d[2]))
            due.remove(best)
            served[best[1]] += 1
            expected.append(best[0])
        claimed = claim_batch(conn, "ordered", batch=batch, lease_s=600, locked_by="property")
        assert sorted(str(c.id) for c in claimed) == sorted(str(i) for i in expected)

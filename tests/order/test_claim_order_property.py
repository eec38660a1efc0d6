"""Every batch is exactly the next picks of the order, written out plainly in Python: plan
priority, then the fewest jobs of the type served to the (tenant, group) in the last day (each
pick counting for the next), then the oldest due job. Workloads are generated: plans, tenants,
groups, paused groups, jobs due and not yet due, history inside and outside the day, batch
sizes from one to more than the groups."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairqueue import PLANS, Stage, enqueue
from fairqueue.claim import claim_batch
from fairqueue.db import Connection
from fairqueue.groups import pause_group
from fairqueue.plans import set_plan

Stage("ordered", handler=lambda _job: None)

TENANTS = ["t1", "t2", "t3", "t4", "t5", "t6", None]
GROUPS = ["inbox", "archive", "news", "mail", None]
PLAN_NAMES = [plan.name for plan in PLANS.plans] + [None]

Key = tuple[str | None, str | None]


@dataclass(frozen=True)
class Workload:
    plans: dict[str, str | None]
    paused: frozenset[Key]
    history: list[tuple[Key, bool]]  # (group, finished within the last day)
    jobs: list[tuple[Key, bool]]  # (group, due now), oldest first
    batches: list[int]


keys = st.tuples(st.sampled_from(TENANTS), st.sampled_from(GROUPS))
workloads = st.builds(
    Workload,
    plans=st.fixed_dictionaries({t: st.sampled_from(PLAN_NAMES) for t in TENANTS if t}),
    paused=st.frozensets(keys.filter(lambda k: k[1] is not None), max_size=3),
    history=st.lists(st.tuples(keys, st.booleans()), max_size=25),
    jobs=st.lists(st.tuples(keys, st.booleans()), min_size=10, max_size=80),
    # Mostly batches smaller than the groups, the case where a batch must take several jobs
    # of one group and none of another; sometimes more than all of them.
    batches=st.lists(
        st.one_of(st.integers(min_value=1, max_value=6), st.integers(min_value=1, max_value=60)),
        min_size=1,
        max_size=6,
    ),
)


def _reset(conn: Connection) -> None:
    conn.execute("truncate fairqueue.jobs, fairqueue.served, fairqueue.groups, fairqueue.tenants")


def _load(conn: Connection, load: Workload) -> list[tuple[object, Key, int]]:
    for tenant, plan in load.plans.items():
        if plan is not None:
            set_plan(conn, tenant, plan)
    for tenant, group in load.paused:
        pause_group(conn, group or "", tenant_id=tenant)
    for (tenant, group), recent in load.history:
        done = enqueue(conn, "ordered", {}, tenant_id=tenant, group_id=group)
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() - %s::interval"
            " where id = %s",
            ("1 hour" if recent else "2 days", done),
        )
    due: list[tuple[object, Key, int]] = []
    for age, ((tenant, group), is_due) in enumerate(load.jobs):
        job_id = enqueue(conn, "ordered", {}, tenant_id=tenant, group_id=group, run_after=None)
        conn.execute(
            "update fairqueue.jobs set created_at = now() - interval '2 hours' + %s * interval"
            " '1 second', run_after = case when %s then now() - interval '1 minute'"
            " else now() + interval '1 hour' end where id = %s",
            (age, is_due, job_id),
        )
        if is_due and (tenant, group) not in load.paused:
            due.append((job_id, (tenant, group), age))
    return due


def _priority(load: Workload, tenant: str | None) -> int:
    plan = load.plans.get(tenant) if tenant else None
    return (PLANS.get(plan) if plan else PLANS.middle).priority


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(load=workloads)
def test_every_batch_is_the_next_picks_of_the_plain_model(conn: Connection, load: Workload) -> None:
    _reset(conn)
    due = _load(conn, load)
    served = Counter(key for key, recent in load.history if recent)
    for batch in load.batches:
        expected = []
        for _ in range(min(batch, len(due))):
            best = min(due, key=lambda d: (-_priority(load, d[1][0]), served[d[1]], d[2]))
            due.remove(best)
            served[best[1]] += 1
            expected.append(best[0])
        claimed = claim_batch(conn, "ordered", batch=batch, lease_s=600, locked_by="property")
        assert sorted(str(c.id) for c in claimed) == sorted(str(i) for i in expected)

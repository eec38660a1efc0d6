"""Generated workloads for the order's property tests: plans, paused groups, history inside and
outside the day, jobs due and not yet due, and batch sizes, loaded into a type's jobs; each
test keeps its own plain model of the order and compares every batch with it."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from fairqueue import PLANS, enqueue
from fairqueue.db import Connection
from fairqueue.groups import pause_group
from fairqueue.plans import set_plan

PLAN_NAMES = [plan.name for plan in PLANS.plans] + [None]

Key = tuple[str | None, str | None]


@dataclass(frozen=True)
class Workload:
    plans: dict[str, str | None]
    paused: frozenset[Key]
    history: list[tuple[Key, bool]]  # (group, finished within the last day)
    jobs: list[tuple[Key, bool]]  # (group, due now), oldest first
    batches: list[int]


def workloads(tenants: list[str | None], groups: list[str | None]) -> st.SearchStrategy[Workload]:
    keys = st.tuples(st.sampled_from(tenants), st.sampled_from(groups))
    return st.builds(
        Workload,
        plans=st.fixed_dictionaries({t: st.sampled_from(PLAN_NAMES) for t in tenants if t}),
        paused=st.frozensets(keys.filter(lambda k: k[1] is not None), max_size=3),
        history=st.lists(st.tuples(keys, st.booleans()), max_size=25),
        jobs=st.lists(st.tuples(keys, st.booleans()), min_size=10, max_size=80),
        # Mostly batches smaller than the groups, the case where a batch must take several
        # jobs of one group and none of another; sometimes more than all of them.
        batches=st.lists(
            st.one_of(
                st.integers(min_value=1, max_value=6), st.integers(min_value=1, max_value=60)
            ),
            min_size=1,
            max_size=6,
        ),
    )


def load(conn: Connection, job_type: str, workload: Workload) -> list[tuple[object, Key, int]]:
    """The workload's plans, pauses, history and jobs; the claimable jobs as (id, group, age)."""
    for tenant, plan in workload.plans.items():
        if plan is not None:
            set_plan(conn, tenant, plan)
    for tenant, group in workload.paused:
        pause_group(conn, group or "", tenant_id=tenant)
    for (tenant, group), recent in workload.history:
        done = enqueue(conn, job_type, {}, tenant_id=tenant, group_id=group)
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() - %s::interval"
            " where id = %s",
            ("1 hour" if recent else "2 days", done),
        )
    due: list[tuple[object, Key, int]] = []
    for age, ((tenant, group), is_due) in enumerate(workload.jobs):
        job_id = enqueue(conn, job_type, {}, tenant_id=tenant, group_id=group, run_after=None)
        conn.execute(
            "update fairqueue.jobs set created_at = now() - interval '2 hours' + %s * interval"
            " '1 second', run_after = case when %s then now() - interval '1 minute'"
            " else now() + interval '1 hour' end where id = %s",
            (age, is_due, job_id),
        )
        if is_due and (tenant, group) not in workload.paused:
            due.append((job_id, (tenant, group), age))
    return due


def priority(workload: Workload, tenant: str | None) -> int:
    """The tenant's plan priority; the middle plan's without a tenant or a plan."""
    plan = workload.plans.get(tenant) if tenant else None
    return (PLANS.get(plan) if plan else PLANS.middle).priority

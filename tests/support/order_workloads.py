"""Generated workloads for the order's property tests: plans, paused groups, history inside and
outside the day, jobs running and due and not yet due, and batch sizes, loaded into a type's
jobs; and the group order's plain model (next_picks) and the tenant order's (next_tenant_picks),
which the tests compare every batch with. Both models keep every tenant within its plan's cap of
running jobs (Plan.max_running): a tenant at its cap is not eligible, and a run ends when its
tenant reaches the cap."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import strategies as st

from fairqueue import PLANS, enqueue
from fairqueue.db import Connection
from fairqueue.groups import pause_group
from fairqueue.plans import Order, Plan, Plans, set_plan
from fairqueue.stage import FairBy

PLAN_NAMES = [plan.name for plan in PLANS.plans] + [None]

Key = tuple[str | None, str | None]


@dataclass(frozen=True)
class Workload:
    plans: dict[str, str | None]
    paused: frozenset[Key]
    history: list[tuple[Key, bool]]  # (group, finished within the last day)
    jobs: list[tuple[Key, bool]]  # (group, due now), oldest first
    batches: list[int]
    # The costs of the jobs and of the history, in turn: job or history entry i costs
    # costs[i % len(costs)] (a history entry counts its cost as served).
    costs: tuple[int, ...] = (1,)
    # Jobs another claimer runs as the workload arrives, claimed within the day (each counts 1).
    running: tuple[Key, ...] = ()

    def cost(self, place: int) -> int:
        return self.costs[place % len(self.costs)]


COSTS = st.lists(
    st.one_of(st.just(1), st.integers(min_value=1, max_value=12), st.sampled_from([100, 10_000])),
    min_size=1,
    max_size=8,
).map(tuple)


def workloads(
    tenants: list[str | None], groups: list[str | None], *, costs: bool = False
) -> st.SearchStrategy[Workload]:
    """Workloads over these tenants and groups; with ``costs``, jobs and history of drawn costs
    (else every one costs 1)."""
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
        costs=COSTS if costs else st.just((1,)),
        running=st.lists(keys, max_size=6).map(tuple),
    )


def load(conn: Connection, job_type: str, workload: Workload) -> list[Due]:
    """The workload's plans, pauses, history and jobs; the claimable jobs as (id, group, age)."""
    for tenant, plan in workload.plans.items():
        if plan is not None:
            set_plan(conn, tenant, plan)
    for tenant, group in workload.paused:
        pause_group(conn, group or "", tenant_id=tenant)
    for place, ((tenant, group), recent) in enumerate(workload.history):
        done = enqueue(conn, job_type, {}, tenant_id=tenant, group_id=group)
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() - %s::interval,"
            " counted = %s where id = %s",
            ("1 hour" if recent else "2 days", workload.cost(place), done),
        )
    for tenant, group in workload.running:
        held = enqueue(conn, job_type, {}, tenant_id=tenant, group_id=group)
        conn.execute(
            "update fairqueue.jobs set status = 'running', attempts = 1, locked_at = now(),"
            " lease_until = now() + interval '1 hour', locked_by = 'another' where id = %s",
            (held,),
        )
    due: list[Due] = []
    for age, ((tenant, group), is_due) in enumerate(workload.jobs):
        cost = workload.cost(age)
        job_id = enqueue(
            conn, job_type, {}, tenant_id=tenant, group_id=group, run_after=None, cost=cost
        )
        conn.execute(
            "update fairqueue.jobs set created_at = now() - interval '2 hours' + %s * interval"
            " '1 second', run_after = case when %s then now() - interval '1 minute'"
            " else now() + interval '1 hour' end where id = %s",
            (age, is_due, job_id),
        )
        if is_due and (tenant, group) not in workload.paused:
            due.append((job_id, (tenant, group), age, cost))
    return due


def priority(workload: Workload, tenant: str | None) -> int:
    """The tenant's plan priority; the middle plan's without a tenant or a plan."""
    return plan_of(workload, tenant).priority


def plan_of(workload: Workload, tenant: str | None, plans: Plans = PLANS) -> Plan:
    """The tenant's plan; the middle plan without a tenant or a plan."""
    plan = workload.plans.get(tenant) if tenant else None
    return plans.get(plan) if plan else plans.middle


# (job id, group, age: its place in the order of creation, cost)
Due = tuple[object, Key, int, int]


def served_before(workload: Workload) -> Counter[Key]:
    """Each group's served count as the workload arrives: its history within the day, each
    entry its cost (as the history's rows count it, whatever the stage counts by), and its
    running jobs, one each."""
    served: Counter[Key] = Counter(workload.running)
    for place, (key, recent) in enumerate(workload.history):
        if recent:
            served[key] += workload.cost(place)
    return served


def running_before(workload: Workload) -> Counter[str | None]:
    """Each tenant's running jobs as the workload arrives."""
    return Counter(key[0] for key in workload.running)


def has_room(
    workload: Workload, plans: Plans, running: Counter[str | None], tenant: str | None
) -> bool:
    """Whether the tenant may have one more job running: it has no tenant, its plan has no cap,
    or it runs fewer than the cap."""
    cap = plan_of(workload, tenant, plans).max_running if tenant else None
    return cap is None or running[tenant] < cap


def next_picks(
    workload: Workload,
    due: list[Due],
    served: Counter[Key],
    quantum: int,
    batch: int,
    *,
    plans: Plans = PLANS,
    order: Order = "priority",
    fair_by: FairBy = "jobs",
    running: Counter[str | None] | None = None,
) -> list[object]:
    """The next ``batch`` picks of the group order, one job at a time, taken out of ``due`` and
    counted in ``served`` (each job one, or by cost its cost) and in ``running`` (each tenant's
    running jobs): the groups of tenants below their plan's cap ranked by plan priority (highest
    first; under shares every plan ranks alike), then by whole quanta served (served // the
    group's quantum), then by their oldest due job; the group at the top gives its oldest due
    jobs until it completes its current quantum (its count passes into the next one) or has
    none left, and then the ranking is taken again. A group's quantum is
    ``quantum``, or under shares ``quantum`` x its plan's weight rounded half up (at least 1).
    With a quantum of 1 under priority that is one job a turn. A group's run also ends when its
    tenant reaches its cap."""
    running = Counter() if running is None else running

    def quantum_of(key: Key) -> int:
        return plan_of(workload, key[0], plans).quantum(quantum) if order == "shares" else quantum

    def rank(job: Due) -> tuple[int, int, int]:
        tier = 0 if order == "shares" else -plan_of(workload, job[1][0], plans).priority
        return (tier, served[job[1]] // quantum_of(job[1]), job[2])

    picks: list[object] = []
    while len(picks) < batch:
        eligible = [d for d in due if has_room(workload, plans, running, d[1][0])]
        if not eligible:
            break
        top = min(eligible, key=rank)[1]
        while len(picks) < batch and has_room(workload, plans, running, top[0]):
            jobs = [d for d in due if d[1] == top]
            if not jobs:
                break
            job = min(jobs, key=lambda d: d[2])
            due.remove(job)
            level = served[top] // quantum_of(top)
            served[top] += job[3] if fair_by == "cost" else 1
            running[top[0]] += 1
            picks.append(job[0])
            if served[top] // quantum_of(top) != level:
                break
    return picks


def next_tenant_picks(
    workload: Workload,
    due: list[Due],
    tenant_served: Counter[str | None],
    group_served: Counter[Key],
    quantum: int,
    batch: int,
    *,
    plans: Plans = PLANS,
    order: Order = "priority",
    fair_by: FairBy = "jobs",
    running: Counter[str | None] | None = None,
) -> list[object]:
    """The next ``batch`` picks of the tenant order (Stage(fair_share="tenant")), one job at a
    time, taken out of ``due`` and counted in both counters (each job one, or by cost its
    cost): the tenants ranked by plan priority
    (highest first; under shares every plan ranks alike), then by whole quanta served (their
    count // their quantum), then by their best group (its count, then its oldest due job); the
    tenant at the top gives picks until it completes its current quantum or has none left, each
    from its own best group at that moment (one job a turn among its groups), and then the
    ranking is taken again. A tenant's quantum is ``quantum``, or under shares ``quantum`` x its
    plan's weight rounded half up (at least 1). With a quantum of 1 under priority that is one
    pick a turn at both levels. A tenant at its plan's cap of running jobs (``running``, counted
    with each pick) is not eligible, and its run ends when it reaches the cap."""
    running = Counter() if running is None else running

    def quantum_of(tenant: str | None) -> int:
        return plan_of(workload, tenant, plans).quantum(quantum) if order == "shares" else quantum

    def in_tenant(job: Due) -> tuple[int, int]:
        return (group_served[job[1]], job[2])

    def rank(job: Due) -> tuple[int, int, tuple[int, int]]:
        tenant = job[1][0]
        tier = 0 if order == "shares" else -plan_of(workload, tenant, plans).priority
        return (tier, tenant_served[tenant] // quantum_of(tenant), in_tenant(job))

    picks: list[object] = []
    while len(picks) < batch:
        eligible = [d for d in due if has_room(workload, plans, running, d[1][0])]
        if not eligible:
            break
        top = min(eligible, key=rank)[1][0]
        while len(picks) < batch and has_room(workload, plans, running, top):
            jobs = [d for d in due if d[1][0] == top]
            if not jobs:
                break
            job = min(jobs, key=in_tenant)
            due.remove(job)
            level = tenant_served[top] // quantum_of(top)
            units = job[3] if fair_by == "cost" else 1
            group_served[job[1]] += units
            tenant_served[top] += units
            running[top] += 1
            picks.append(job[0])
            if tenant_served[top] // quantum_of(top) != level:
                break
    return picks


def finish_running(conn: Connection, job_type: str) -> None:
    """Every running job of the type done now: its tenant's room back, its served count kept."""
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now()"
        " where type = %s and status = 'running'",
        (job_type,),
    )


def assert_within_caps(conn: Connection, job_type: str, workload: Workload, plans: Plans) -> None:
    """No tenant runs more of the type's jobs than its plan's cap."""
    rows = conn.execute(
        "select tenant_id, count(*) as n from fairqueue.jobs"
        " where type = %s and status = 'running' and tenant_id is not null group by 1",
        (job_type,),
    ).fetchall()
    for row in rows:
        cap = plan_of(workload, row["tenant_id"], plans).max_running
        # Jobs running as the workload arrived may pass the cap; the claim adds none past it.
        arrived = sum(1 for key in workload.running if key[0] == row["tenant_id"])
        assert cap is None or row["n"] <= max(cap, arrived), (row, cap)

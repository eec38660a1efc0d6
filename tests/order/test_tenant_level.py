"""The tenant level of the fair order (Stage(fair_share="tenant")): plan priority, then the
tenant served least of the type in the last day, then its group served least, then the oldest
job, each pick counting for the next at both levels. Every batch is checked against the same
order written out plainly in Python."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from fairqueue import PLANS, NewJob, Stage, connect, enqueue, enqueue_many, run_pipeline
from fairqueue.db import Connection
from fairqueue.errors import ConfigurationError
from fairqueue.groups import pause_group, resume_group
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import set_plan
from support.order_workloads import Workload, priority, served_before, workloads
from support.order_workloads import load as load_workload
from support.rows import race, wait_until_waiting_on_a_lock

Stage("by_tenant", handler=lambda _job: None, fair_share="tenant")

TENANTS = ["t1", "t2", "t3", "t4", None]
GROUPS = ["inbox", "archive", "news", "mail", "a", "b", None]
BY_TENANT = workloads(TENANTS, GROUPS)


def _reset(conn: Connection) -> None:
    conn.execute(
        "truncate fairqueue.jobs, fairqueue.served, fairqueue.groups, fairqueue.tenants,"
        " fairqueue.tenant_level_types, fairqueue.tenant_standings, fairqueue.tenant_changes"
    )


def _claim(conn: Connection, batch: int) -> list[str]:
    claimed = claim_batch(conn, "by_tenant", batch=batch, lease_s=600, locked_by="test")
    return [str(c.id) for c in claimed]


def _age(conn: Connection, job_id: object, seconds: int) -> None:
    conn.execute(
        "update fairqueue.jobs set created_at = now() - interval '2 hours'"
        " + %s * interval '1 second' where id = %s",
        (seconds, job_id),
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(load=BY_TENANT)
def test_every_batch_is_the_next_picks_of_the_plain_model(conn: Connection, load: Workload) -> None:
    _reset(conn)
    due = load_workload(conn, "by_tenant", load)
    # The history within the day and the jobs running as the workload arrives count as served.
    group_served = served_before(load)
    tenant_served = Counter(key[0] for key in group_served.elements())
    for batch in load.batches:
        expected = []
        for _ in range(min(batch, len(due))):
            best = min(
                due,
                key=lambda d: (
                    -priority(load, d[1][0]),
                    tenant_served[d[1][0]],
                    group_served[d[1]],
                    d[2],
                ),
            )
            due.remove(best)
            group_served[best[1]] += 1
            tenant_served[best[1][0]] += 1
            expected.append(str(best[0]))
        assert sorted(_claim(conn, batch)) == sorted(expected)


def _backlog(conn: Connection, tenant: str, groups: list[str], per_group: int) -> None:
    for group in groups:
        jobs = [NewJob({"n": n}, group_id=group) for n in range(per_group)]
        enqueue_many(conn, "by_tenant", jobs, tenant_id=tenant)


def _tenant_and_group(conn: Connection, ids: list[str]) -> list[tuple[str, str]]:
    rows = conn.execute(
        "select tenant_id, group_id from fairqueue.jobs where id = any(%s::uuid[])", (ids,)
    ).fetchall()
    return [(row["tenant_id"], row["group_id"]) for row in rows]


def test_a_tenant_with_fifty_groups_gets_half_not_fifty_of_fifty_one(conn: Connection) -> None:
    _reset(conn)
    _backlog(conn, "many", [f"g{k}" for k in range(50)], 4)
    _backlog(conn, "one", ["only"], 200)
    picked = _tenant_and_group(conn, _claim(conn, 100))
    by_tenant = Counter(tenant for tenant, _ in picked)
    assert by_tenant == {"many": 50, "one": 50}
    # The half of the tenant with fifty groups goes round them: one job from each.
    assert Counter(group for tenant, group in picked if tenant == "many") == {
        f"g{k}": 1 for k in range(50)
    }


def test_the_same_backlog_by_group_gives_the_tenant_with_more_groups_more(
    conn: Connection,
) -> None:
    _reset(conn)
    _backlog(conn, "many", [f"g{k}" for k in range(50)], 4)
    _backlog(conn, "one", ["only"], 200)
    claimed = claim_batch(
        conn, "by_tenant", batch=102, lease_s=600, locked_by="test", fair_share="group"
    )
    by_tenant = Counter(t for t, _ in _tenant_and_group(conn, [str(c.id) for c in claimed]))
    assert by_tenant == {"many": 100, "one": 2}


def test_priority_first_then_tenants_then_their_groups(conn: Connection) -> None:
    _reset(conn)
    plans = [plan.name for plan in PLANS.plans]
    tenants = {plan: [f"{plan}-{k}" for k in range(3)] for plan in plans}
    for plan, names in tenants.items():
        for tenant in names:
            set_plan(conn, tenant, plan)
            _backlog(conn, tenant, ["x", "y"], 5)
    order = sorted(plans, key=lambda name: -PLANS.get(name).priority)
    for plan in order:
        # Three tenants of two groups with five jobs each: 30 jobs a plan, claimed by six.
        for _ in range(5):
            picked = _tenant_and_group(conn, _claim(conn, 6))
            assert {tenant for tenant, _ in picked} == set(tenants[plan])
            assert Counter(picked) == {(t, g): 1 for t in tenants[plan] for g in ("x", "y")}


def test_a_tenant_whose_groups_are_all_paused_takes_no_turns(conn: Connection) -> None:
    _reset(conn)
    _backlog(conn, "paused", ["p1", "p2"], 10)
    _backlog(conn, "a", ["g"], 10)
    _backlog(conn, "b", ["g"], 10)
    pause_group(conn, "p1", tenant_id="paused")
    pause_group(conn, "p2", tenant_id="paused")
    picked = _tenant_and_group(conn, _claim(conn, 20))
    assert Counter(t for t, _ in picked) == {"a": 10, "b": 10}
    assert _claim(conn, 5) == []


def test_a_top_tenant_whose_small_group_runs_out_takes_its_turns_from_its_other_group(
    conn: Connection,
) -> None:
    # One team tenant with a group of one job and a group of twenty, five free tenants with a
    # backlog each. A batch of ten is the team tenant's ten first picks: its small group's job
    # and nine of the other's. A claim that offered each of its groups only as deep as the two
    # would share ten picks found seven of them and filled the batch with free jobs.
    _reset(conn)
    set_plan(conn, "rich", "team")
    _backlog(conn, "rich", ["small"], 1)
    _backlog(conn, "rich", ["large"], 20)
    for k in range(5):
        set_plan(conn, f"poor{k}", "free")
        _backlog(conn, f"poor{k}", ["g"], 10)
    picked = _tenant_and_group(conn, _claim(conn, 10))
    assert Counter(picked) == {("rich", "small"): 1, ("rich", "large"): 9}


def test_a_tenant_arriving_mid_drain_is_served_within_one_round(conn: Connection) -> None:
    _reset(conn)
    for tenant in ("a", "b", "c"):
        _backlog(conn, tenant, ["g1", "g2"], 20)
    for _ in range(3):
        _claim(conn, 9)
    _backlog(conn, "late", ["g"], 5)
    # Every other tenant has been served nine times: the newcomer's first job comes before any
    # other tenant's next one, and its backlog is served until it has caught up.
    picked = _tenant_and_group(conn, _claim(conn, 4))
    assert Counter(t for t, _ in picked) == {"late": 4}


def test_a_claim_by_group_of_a_type_claimed_by_tenant_keeps_no_tenant_standings(
    conn: Connection,
) -> None:
    _reset(conn)
    _backlog(conn, "a", ["g"], 3)
    _claim(conn, 1)
    listed = "select count(*) as n from fairqueue.tenant_level_types where type = 'by_tenant'"
    assert conn.execute(listed).fetchone() == {"n": 1}
    claim_batch(conn, "by_tenant", batch=1, lease_s=600, locked_by="test", fair_share="group")
    assert conn.execute(listed).fetchone() == {"n": 0}
    # By tenant again: the standings are built again from the groups, the two claims counted.
    _backlog(conn, "b", ["g"], 3)
    picked = _tenant_and_group(conn, _claim(conn, 2))
    assert Counter(t for t, _ in picked) == {"b": 2}


def test_an_unknown_level_is_refused(conn: Connection) -> None:
    with pytest.raises(ConfigurationError, match="fair_share must be one of group, tenant"):
        claim_batch(
            conn,
            "by_tenant",
            batch=1,
            lease_s=600,
            locked_by="test",
            fair_share="customer",  # type: ignore[arg-type]
        )


def test_a_stage_with_an_unknown_level_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="fair_share"):
        Stage("bad_level", handler=lambda _job: None, fair_share="customer")  # type: ignore[arg-type]


@pytest.mark.parametrize("quantum", [1, 4])
def test_concurrent_pipelines_drain_every_job_once_and_stop_only_when_nothing_is_due(
    conn: Connection, dsn: str, quantum: int
) -> None:
    _reset(conn)
    ran: list[str] = []
    lock = threading.Lock()

    def record(job: Any) -> None:
        with lock:
            ran.append(str(job.id))

    batch = 50
    stages = [
        Stage(
            "crowded_by_tenant", batch=batch, handler=record, fair_share="tenant", quantum=quantum
        )
    ]
    rows = conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'crowded_by_tenant', 't' || (i % 200), 'g' || (i % 1000)"
        " from generate_series(1, 8000) i returning id::text"
    ).fetchall()
    every = [row["id"] for row in rows]
    pipelines = 8
    left_at_stop: list[int] = []

    def drain() -> str:
        result = run_pipeline(dsn, stages, trigger="test")
        with connect(dsn, autocommit=True) as check:
            row = check.execute(
                "select count(*) as n from fairqueue.jobs where type = 'crowded_by_tenant'"
                " and status = 'pending' and run_after <= now()"
            ).fetchone()
            assert row is not None
            left_at_stop.append(int(row["n"]))
        return result.stop_reason

    outcomes = race([drain] * pipelines)
    assert outcomes == ["no_work"] * pipelines
    # Claims by tenant take turns: a pipeline that found nothing found nothing due at all.
    assert max(left_at_stop) == 0
    assert Counter(ran) == Counter(every)


STANDINGS = """
select t.tenant_key, t.n, t.best_n, t.best_created_at, t.best_id, t.best_group_key
  from fairqueue.tenant_standings t
 where t.type = %(type)s
 order by 1
"""
RECOUNTED = """
select a.tenant_key, a.n, b.n as best_n, b.head_created_at as best_created_at,
       b.head_id as best_id, b.group_key as best_group_key
  from (select s.tenant_key, sum(s.n)::bigint as n
          from fairqueue.served s
         where s.type = %(type)s
         group by 1) a
  left join lateral fairqueue.tenant_best_group(%(type)s, a.tenant_key) b on true
 order by 1
"""


def _standings_match_the_groups(conn: Connection, job_type: str) -> None:
    conn.execute("select fairqueue.tenant_standings_fold(%s)", (job_type,))
    found = conn.execute(STANDINGS, {"type": job_type}).fetchall()
    assert found == conn.execute(RECOUNTED, {"type": job_type}).fetchall()


def test_the_standings_stay_exact_while_enqueuers_claimers_pauses_and_plans_race(
    conn: Connection, dsn: str
) -> None:
    _reset(conn)
    Stage("raced_by_tenant", handler=lambda _job: None, fair_share="tenant")
    tenants = [f"t{k}" for k in range(6)]
    sent: list[str] = []
    claimed: list[str] = []
    lock = threading.Lock()

    def enqueuer(offset: int) -> None:
        with connect(dsn, autocommit=True) as app:
            for n in range(150):
                tenant = tenants[(n + offset) % len(tenants)]
                job_id = enqueue(app, "raced_by_tenant", {}, tenant_id=tenant, group_id=f"g{n % 7}")
                with lock:
                    sent.append(str(job_id))

    def claimer() -> None:
        with connect(dsn, autocommit=True) as app:
            for _ in range(40):
                found = claim_batch(app, "raced_by_tenant", batch=7, lease_s=600, locked_by="race")
                with lock:
                    claimed.extend(str(c.id) for c in found)

    def operator() -> None:
        with connect(dsn, autocommit=True) as app:
            for round_ in range(10):
                pause_group(app, "g3", tenant_id="t1")
                set_plan(app, "t2", PLANS.plans[round_ % len(PLANS.plans)].name)
                resume_group(app, "g3", tenant_id="t1")

    outcomes = race([lambda: enqueuer(0), lambda: enqueuer(3), claimer, claimer, operator])
    assert outcomes == [None] * 5
    _standings_match_the_groups(conn, "raced_by_tenant")
    while found := claim_batch(conn, "raced_by_tenant", batch=50, lease_s=600, locked_by="rest"):
        claimed.extend(str(c.id) for c in found)
    assert Counter(claimed) == Counter(sent)
    _standings_match_the_groups(conn, "raced_by_tenant")


def test_a_plan_change_that_waited_for_a_types_listing_waits_for_its_claims_too(
    conn: Connection, dsn: str
) -> None:
    # A plan change holds the tenant-level claims off before it writes standings. Here the type
    # is being listed while the change starts: the change must see the listing once it may go
    # on, and wait for the claim queued behind the listing before it holds any standing that
    # claim will write (else each waits for the other).
    _reset(conn)
    Stage("listed_meanwhile", handler=lambda _job: None, fair_share="tenant")
    set_plan(conn, "t2", "free")
    jobs = [
        enqueue(conn, "listed_meanwhile", {}, tenant_id="t2", group_id=f"g{n}") for n in range(3)
    ]
    with (
        connect(dsn) as lister,
        connect(dsn, autocommit=True) as operator,
        connect(dsn, autocommit=True) as claimer,
    ):
        # The first claim of the type lists it, and holds the listing until it commits.
        listed = claim_batch(lister, "listed_meanwhile", batch=1, lease_s=600, locked_by="first")
        assert len(listed) == 1
        outcomes: list[Any] = []
        operator_pid = operator.execute("select pg_backend_pid() as pid").fetchone()["pid"]
        claimer_pid = claimer.execute("select pg_backend_pid() as pid").fetchone()["pid"]

        def change_plan() -> None:
            try:
                set_plan(operator, "t2", "pro")
                outcomes.append("changed")
            except Exception as exc:
                outcomes.append(exc)

        def claim_the_rest() -> None:
            try:
                found = claim_batch(
                    claimer, "listed_meanwhile", batch=5, lease_s=600, locked_by="second"
                )
                outcomes.append(sorted(str(c.id) for c in found))
            except Exception as exc:
                outcomes.append(exc)

        changing = threading.Thread(target=change_plan)
        changing.start()
        wait_until_waiting_on_a_lock(conn, operator_pid)
        claiming = threading.Thread(target=claim_the_rest)
        claiming.start()
        wait_until_waiting_on_a_lock(conn, claimer_pid)
        lister.commit()
        changing.join(30)
        claiming.join(30)
    assert not changing.is_alive() and not claiming.is_alive()
    assert sorted(outcomes, key=str) == sorted(
        ["changed", sorted(str(j) for j in jobs if str(j) != str(listed[0].id))], key=str
    )
    assert conn.execute(
        "select distinct plan from fairqueue.served where type = 'listed_meanwhile'"
    ).fetchall() == [{"plan": "pro"}]
    _standings_match_the_groups(conn, "listed_meanwhile")


def test_a_standing_no_trigger_saw_change_is_set_again_and_the_claim_goes_on(
    conn: Connection,
) -> None:
    _reset(conn)
    for tenant in ("a", "b"):
        enqueue(conn, "by_tenant", {}, tenant_id=tenant, group_id="g")
    assert len(_claim(conn, 2)) == 2
    # Both served once; a's next job is the older, so a stands first.
    stale = enqueue(conn, "by_tenant", {}, tenant_id="a", group_id="g")
    _age(conn, stale, 0)
    waiting = enqueue(conn, "by_tenant", {}, tenant_id="b", group_id="g")
    _age(conn, waiting, 1)
    # a's job goes away behind the triggers' back: its standings still name it.
    conn.execute("alter table fairqueue.jobs disable trigger user")
    try:
        conn.execute("delete from fairqueue.jobs where id = %s", (stale,))
    finally:
        conn.execute("alter table fairqueue.jobs enable trigger user")
    assert _claim(conn, 1) == [str(waiting)]

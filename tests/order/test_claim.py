"""The claim: what is claimable, and in which order."""

import random
from collections import Counter
from uuid import UUID

import pytest

from fairqueue import PLANS, ConfigurationError, Stage, enqueue
from fairqueue.groups import pause_group, resume_group
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import set_plan
from support.rows import age_job, job


def noop(_job: object) -> None:
    pass


Stage("work", handler=noop)
Stage("other", handler=noop)


def claim(conn, n: int = 10, job_type: str = "work", lease_s: float = 60.0) -> list[UUID]:
    return [c.id for c in claim_batch(conn, job_type, batch=n, lease_s=lease_s, locked_by="test")]


def test_claim_flips_to_running_with_an_attempt_and_a_lease(conn) -> None:
    job_id = enqueue(conn, "work", {})
    assert claim(conn, lease_s=90) == [job_id]
    row = job(conn, job_id)
    assert row["status"] == "running"
    assert row["attempts"] == 1
    assert row["locked_by"] == "test"
    lease = conn.execute(
        "select lease_until - locked_at as lease from fairqueue.jobs where id = %s", (job_id,)
    ).fetchone()["lease"]
    assert lease.total_seconds() == 90
    assert claim(conn) == []


def test_only_the_type_asked_for_and_only_due_jobs(conn) -> None:
    due = enqueue(conn, "work", {})
    enqueue(conn, "other", {})
    later = enqueue(conn, "work", {})
    conn.execute(
        "update fairqueue.jobs set run_after = now() + interval '1 hour' where id = %s", (later,)
    )
    assert claim(conn) == [due]


def test_running_job_with_expired_lease_and_attempts_left_is_claimed_again(conn) -> None:
    job_id = enqueue(conn, "work", {}, max_attempts=2)
    claim(conn)
    assert claim(conn) == []  # lease still held
    age_job(conn, job_id, lease_until=1)
    assert claim(conn) == [job_id]
    assert job(conn, job_id)["attempts"] == 2
    age_job(conn, job_id, lease_until=1)
    assert claim(conn) == []  # attempts used up: the sweep fails it, nobody claims it


def test_paused_group_is_not_claimed_until_resumed(conn) -> None:
    paused = enqueue(conn, "work", {}, group_id="g-paused")
    active = enqueue(conn, "work", {}, group_id="g-active")
    pause_group(conn, "g-paused")
    assert claim(conn) == [active]
    resume_group(conn, "g-paused")
    assert claim(conn) == [paused]


def test_done_failed_and_cancelled_jobs_are_never_claimed(conn) -> None:
    for status in ("done", "failed", "cancelled", "queued"):
        job_id = enqueue(conn, "work", {})
        conn.execute("update fairqueue.jobs set status = %s where id = %s", (status, job_id))
    assert claim(conn) == []


def test_plan_priority_first_and_no_tenant_ranks_as_the_middle_plan(conn) -> None:
    for tenant in ("free-co", "pro-co", "team-co"):
        set_plan(conn, tenant, tenant.split("-")[0])
    free = enqueue(conn, "work", {}, tenant_id="free-co", group_id="a")
    none = enqueue(conn, "work", {}, group_id="b")
    pro = enqueue(conn, "work", {}, tenant_id="pro-co", group_id="c")
    team = enqueue(conn, "work", {}, tenant_id="team-co", group_id="d")
    order = [claim(conn, 1)[0] for _ in range(4)]
    assert order[0] == team
    assert set(order[1:3]) == {pro, none}  # tie on priority: older first
    assert order[1:3] == [none, pro]
    assert order[3] == free
    assert PLANS.middle.name == "pro"


def test_unknown_tenant_ranks_as_the_middle_plan(conn) -> None:
    set_plan(conn, "free-co", "free")
    free = enqueue(conn, "work", {}, tenant_id="free-co", group_id="a")
    stranger = enqueue(conn, "work", {}, tenant_id="no-row", group_id="b")
    assert claim(conn, 1) == [stranger]
    assert claim(conn, 1) == [free]


def test_fewest_served_in_the_last_day_goes_first(conn) -> None:
    # Group "busy" was served three times in the last day, "idle" once more than a day ago.
    for _ in range(3):
        served = enqueue(conn, "work", {}, group_id="busy")
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() - interval '2 hours'"
            " where id = %s",
            (served,),
        )
    old = enqueue(conn, "work", {}, group_id="idle")
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now() - interval '2 days'"
        " where id = %s",
        (old,),
    )
    busy = enqueue(conn, "work", {}, group_id="busy")
    idle = enqueue(conn, "work", {}, group_id="idle")
    assert claim(conn, 1) == [idle]
    assert claim(conn, 1) == [busy]


def test_served_counts_only_the_same_type(conn) -> None:
    for _ in range(3):
        other = enqueue(conn, "other", {}, group_id="g1")
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() where id = %s", (other,)
        )
    first = enqueue(conn, "work", {}, group_id="g1")
    second = enqueue(conn, "work", {}, group_id="g2")
    assert claim(conn, 1) == [first]  # g1's "other" work does not count against its "work"
    assert claim(conn, 1) == [second]


def test_running_counts_as_served(conn) -> None:
    in_flight = enqueue(conn, "work", {}, group_id="g1")
    assert claim(conn, 1) == [in_flight]
    mine = enqueue(conn, "work", {}, group_id="g1")
    theirs = enqueue(conn, "work", {}, group_id="g2")
    assert claim(conn, 1) == [theirs]
    assert claim(conn, 1) == [mine]


def test_oldest_first_among_equals(conn) -> None:
    ids = [enqueue(conn, "work", {}, group_id="g") for _ in range(3)]
    assert claim(conn, 1) == [ids[0]]
    assert claim(conn, 1) == [ids[1]]


def test_one_batch_interleaves_groups(conn) -> None:
    a = [enqueue(conn, "work", {}, group_id="a") for _ in range(4)]
    b = [enqueue(conn, "work", {}, group_id="b") for _ in range(2)]
    got = claim(conn, 4)
    assert set(got) == {a[0], a[1], b[0], b[1]}


def test_a_group_whose_oldest_job_is_not_due_offers_its_oldest_due_one(conn) -> None:
    waiting, due = (enqueue(conn, "work", {}, group_id="g") for _ in range(2))
    age_job(conn, waiting, run_after=-3600)  # retried: back in an hour
    assert claim(conn, 5) == [due]


def test_with_more_groups_than_the_pool_each_batch_takes_the_least_served(conn) -> None:
    # 60 groups, batch 5 (a pool of 20 groups): the first 30 groups were served once already.
    for n in range(60):
        enqueue(conn, "work", {}, group_id=f"g{n:02d}")
        enqueue(conn, "work", {}, group_id=f"g{n:02d}")
    served = claim(conn, 30)
    assert len(served) == 30
    groups = {job(conn, i)["group_id"] for i in claim(conn, 5) + claim(conn, 5)}
    fresh = {f"g{n:02d}" for n in range(60)} - {job(conn, i)["group_id"] for i in served}
    assert len(groups) == 10
    assert groups <= fresh


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_batch_is_the_next_picks_of_the_plain_model(conn, seed: int) -> None:
    """Each claim against the order written out plainly: plan priority, then the fewest served
    to the (tenant, group) in the last day, each pick counting for the next, then the oldest.
    Batches of several: test_claim_order_property.py."""
    rng = random.Random(seed)
    tenants = {"t1": "free", "t2": "pro", "t3": "free", None: None}
    for tenant, plan in tenants.items():
        if tenant is not None:
            set_plan(conn, tenant, plan)
    groups = ["inbox", "archive", None]
    served: Counter[tuple[str | None, str | None]] = Counter()
    for _ in range(12):  # history: done in the last day, counted for its group
        tenant, group = rng.choice(list(tenants)), rng.choice(groups)
        done = enqueue(conn, "work", {}, tenant_id=tenant, group_id=group)
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() - interval '1 hour'"
            " where id = %s",
            (done,),
        )
        served[(tenant, group)] += 1
    pending = []
    for minute in range(30):
        tenant, group = rng.choice(list(tenants)), rng.choice(groups)
        job_id = enqueue(conn, "work", {}, tenant_id=tenant, group_id=group)
        conn.execute(
            "update fairqueue.jobs set created_at = now() - %s * interval '1 minute' where id = %s",
            (60 - minute, job_id),
        )
        pending.append((job_id, tenant, group, minute))

    def priority(tenant: str | None) -> int:
        plan = tenants[tenant]
        return (PLANS.get(plan) if plan else PLANS.middle).priority

    left = list(pending)
    for _ in range(15):
        best = min(left, key=lambda p: (-priority(p[1]), served[(p[1], p[2])], p[3]))
        left.remove(best)
        served[(best[1], best[2])] += 1
        assert claim(conn, 1) == [best[0]]


def test_paid_work_with_a_backlog_fills_the_batch_before_free_groups(conn) -> None:
    # More free groups than the pool, each with one job; two pro groups with a backlog each.
    set_plan(conn, "paid", "pro")
    set_plan(conn, "cheap", "free")
    for n in range(30):
        enqueue(conn, "work", {}, tenant_id="cheap", group_id=f"g{n:02d}")
    paid = [enqueue(conn, "work", {}, tenant_id="paid", group_id=g) for g in ["a", "b"] * 6]
    assert set(claim(conn, 5)) <= set(paid)
    assert len(set(claim(conn, 7)) & set(paid)) == 7


def test_a_batch_past_a_few_top_plan_jobs_goes_deep_into_the_least_served_groups(conn) -> None:
    # Three team groups with two jobs each, then free groups: three never served with ten jobs
    # each, twenty served five times today with three each. A batch of 20 is the six team jobs,
    # then the fresh free groups' jobs up to their fifth (each of their jobs stands before any
    # job of the groups served five times), the fifth ones oldest first.
    set_plan(conn, "rich", "team")
    set_plan(conn, "poor", "free")
    team = [enqueue(conn, "work", {}, tenant_id="rich", group_id=g) for g in ["t1", "t2", "t3"] * 2]
    served_groups = [f"s{n:02d}" for n in range(20)]
    for group in served_groups * 5:
        done = enqueue(conn, "work", {}, tenant_id="poor", group_id=group)
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() - interval '1 hour'"
            " where id = %s",
            (done,),
        )
    fresh: dict[str, list[UUID]] = {g: [] for g in ["f1", "f2", "f3"]}
    for _ in range(10):
        for group, jobs in fresh.items():
            jobs.append(enqueue(conn, "work", {}, tenant_id="poor", group_id=group))
    for group in served_groups * 3:
        enqueue(conn, "work", {}, tenant_id="poor", group_id=group)
    first_four = [j for jobs in fresh.values() for j in jobs[:4]]
    assert set(claim(conn, 20)) == {*team, *first_four, fresh["f1"][4], fresh["f2"][4]}


def _quanta(conn, job_type: str) -> set[int]:
    rows = conn.execute(
        "select distinct quantum from fairqueue.served where type = %s", (job_type,)
    ).fetchall()
    return {row["quantum"] for row in rows}


def test_a_change_of_quantum_stamps_every_standing_of_the_type_and_only_its(conn) -> None:
    for group in ["a", "b"]:
        enqueue(conn, "work", {}, tenant_id="t", group_id=group)
    enqueue(conn, "other", {}, tenant_id="t", group_id="a")
    claim_batch(conn, "work", batch=1, lease_s=60, locked_by="test", quantum=3)
    assert _quanta(conn, "work") == {3}
    # A group's first standing, written by the enqueue's trigger, takes the type's quantum.
    enqueue(conn, "work", {}, tenant_id="t", group_id="c")
    assert _quanta(conn, "work") == {3}
    assert _quanta(conn, "other") == {1}
    claim_batch(conn, "work", batch=1, lease_s=60, locked_by="test", quantum=1)
    assert _quanta(conn, "work") == {1}


@pytest.mark.parametrize(
    ("quantum", "fair_share", "message"),
    [
        (0, "group", "quantum must be from 1 to 1000, got 0"),
        (1001, "group", "got 1001"),
        (0, "tenant", "quantum must be from 1 to 1000, got 0"),
        (1001, "tenant", "got 1001"),
    ],
)
def test_a_quantum_out_of_bounds_is_refused_and_changes_nothing(
    conn, quantum: int, fair_share: str, message: str
) -> None:
    job = enqueue(conn, "work", {}, tenant_id="t", group_id="a")
    with pytest.raises(ConfigurationError, match=message):
        claim_batch(
            conn,
            "work",
            batch=1,
            lease_s=60,
            locked_by="test",
            quantum=quantum,
            fair_share=fair_share,  # type: ignore[arg-type]
        )
    assert conn.execute("select status from fairqueue.jobs where id = %s", (job,)).fetchone() == {
        "status": "pending"
    }
    assert _quanta(conn, "work") == {1}

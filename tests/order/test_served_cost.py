"""Service measured in cost (Stage(fair_by="cost")): the served count of a group is the units its
jobs count (`counted`: 1, or their cost when claimed by cost, or what they spent), however they
were written: claims by cost and by jobs, completions with spent units, retries, give-ups, a
lease that expired and the job claimed again, the day's window moving, moves to finished_jobs.
Bad costs are refused on every path, and nothing is enqueued."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from fairqueue import Job, NewJob, Stage, define_quota, enqueue, enqueue_many, run_pipeline
from fairqueue.db import Connection
from fairqueue.doorbells import MemoryDoorbells, ringing
from fairqueue.errors import ConfigurationError, FairqueueError
from fairqueue.inputs import MAX_COST
from fairqueue.lanes import admit
from fairqueue.pipeline.claim import claim_batch, complete_claimed, fail_now, retry_or_fail
from fairqueue.roles.worker import ring_all

Stage("by_cost", handler=lambda _job: None, fair_by="cost")

# The definition: every served job (done or running, served in the last day) counts its units.
DEFINITION = """
select a.type, a.group_key, sum(a.counted) as n
  from fairqueue.all_jobs a, fairqueue.served_watermark w
 where a.served_at > w.watermark
 group by 1, 2
"""


def by_definition(conn: Connection) -> dict[tuple[str, str], int]:
    return {(r["type"], r["group_key"]): int(r["n"]) for r in conn.execute(DEFINITION).fetchall()}


def by_counter(conn: Connection) -> dict[tuple[str, str], int]:
    conn.execute("select fairqueue.expire_served()")
    rows = conn.execute("select type, group_key, n from fairqueue.served where n <> 0").fetchall()
    return {(r["type"], r["group_key"]): int(r["n"]) for r in rows}


def settle(conn: Connection, job_id: Any, units: int, locked_by: str = "t") -> None:
    conn.execute(
        "select fairqueue.settle_spent(array[null]::text[], array[%s]::uuid[],"
        " array[%s]::bigint[], %s)",
        (job_id, units, locked_by),
    )


@pytest.mark.timeout(120)
def test_the_counts_are_the_units_counted_through_random_transitions(conn: Connection) -> None:
    rng = random.Random(20261208)
    groups = ["g1", "g2", "g3", None]
    ids: list[Any] = []
    for step in range(400):
        action = rng.random()
        if action < 0.25 or not ids:
            cost = rng.choice([1, 2, 7, 100, 10_000, MAX_COST])
            ids.append(enqueue(conn, "by_cost", {}, group_id=rng.choice(groups), cost=cost))
        elif action < 0.4:
            claim_batch(
                conn,
                "by_cost",
                batch=3,
                lease_s=60,
                locked_by="t",
                quantum=rng.choice([1, 4]),
                fair_by=rng.choice(["cost", "jobs"]),
            )
        elif action < 0.47:
            # A completion that spent units settles them first (0 spent: no settlement).
            job_id = rng.choice(ids)
            spent = rng.choice([0, 1, 5, 3_000, 2 * MAX_COST])
            if spent:
                settle(conn, job_id, spent)
            complete_claimed(conn, [(None, job_id)], "t")
        elif action < 0.55:
            retry_or_fail(conn, rng.choice(ids), "t", "boom", tenant_id=None)
        elif action < 0.6:
            fail_now(conn, rng.choice(ids), "t", "given up", tenant_id=None)
        elif action < 0.67:
            # A lease expired (its claimer died): the next claim takes the job again.
            conn.execute(
                "update fairqueue.jobs set lease_until = now() - interval '1 second'"
                " where id = %s and status = 'running'",
                (rng.choice(ids),),
            )
        elif action < 0.75:
            # History near the day's edge, which the window's expiry takes out by its units.
            hours = rng.choice([1, 23.99, 24.01, 30])
            conn.execute(
                "update fairqueue.jobs set status = 'done', lease_until = null,"
                " finished_at = now() - %s * interval '1 hour' where id = %s",
                (hours, rng.choice(ids)),
            )
        elif action < 0.8:
            conn.execute("select fairqueue.move_finished(5, interval '1 s')")
        elif action < 0.85:
            settle(conn, rng.choice(ids), rng.choice([1, 9, 50_000]))
        elif action < 0.9:
            conn.execute(
                "delete from fairqueue.jobs where id = %s", (ids.pop(rng.randrange(len(ids))),)
            )
        else:
            conn.execute(
                "select fairqueue.recompute_standings(array_agg(type), array_agg(group_key))"
                " from fairqueue.served"
            )
        if step % 20 == 0:
            assert by_counter(conn) == by_definition(conn), f"diverged at step {step}"
    assert by_counter(conn) == by_definition(conn)
    assert max(by_definition(conn).values()) > 100


@pytest.mark.timeout(60)
def test_a_claim_by_cost_counts_the_cost_and_a_completion_what_was_spent(
    conn: Connection,
) -> None:
    cheap = enqueue(conn, "by_cost", {}, group_id="cheap", cost=3)
    dear = enqueue(conn, "by_cost", {}, group_id="dear", cost=500)
    claimed = claim_batch(conn, "by_cost", batch=2, lease_s=60, locked_by="t")
    assert {c.id for c in claimed} == {cheap, dear}
    assert by_counter(conn) == {("by_cost", "/cheap"): 3, ("by_cost", "/dear"): 500}
    settle(conn, dear, 120)
    complete_claimed(conn, [(None, cheap), (None, dear)], "t")
    assert by_counter(conn) == by_definition(conn)
    assert by_counter(conn) == {("by_cost", "/cheap"): 3, ("by_cost", "/dear"): 120}


def spending(job: Job) -> None:
    units = job.payload["spend"]
    if units:
        job.spend("tokens", units)


SPENDS = Stage("spends", handler=spending, fair_by="cost", batch=10)


@pytest.mark.timeout(60)
def test_a_pipeline_settles_what_each_job_spent(conn: Connection, dsn: str) -> None:
    define_quota(conn, "tokens", capacity=10**9, period=timedelta(days=1))
    for spend, cost in [(0, 40), (7, 40), (250, 40), (0, 1)]:
        enqueue(conn, "spends", {"spend": spend}, group_id=f"g{spend}-{cost}", cost=cost)
    result = run_pipeline(dsn, [SPENDS])
    assert result.jobs_done == 4
    # A job that spent nothing keeps its cost; one that spent counts what it spent.
    assert by_counter(conn) == by_definition(conn)
    assert by_counter(conn) == {
        ("spends", "/g0-40"): 40,
        ("spends", "/g7-40"): 7,
        ("spends", "/g250-40"): 250,
        ("spends", "/g0-1"): 1,
    }


BAD_COSTS = [0, -1, True, 1.5, "3", None, MAX_COST + 1]


def _jobs(conn: Connection) -> int:
    row = conn.execute("select count(*) as n from fairqueue.jobs").fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cost", BAD_COSTS)
def test_a_bad_cost_is_refused_by_enqueue_and_by_new_job(conn: Connection, cost: Any) -> None:
    with pytest.raises(FairqueueError, match="cost"):
        enqueue(conn, "by_cost", {}, cost=cost)
    with pytest.raises(FairqueueError, match=r"jobs\[1\].*cost"):
        enqueue_many(conn, "by_cost", [NewJob({}), NewJob({}, cost=cost)])
    assert _jobs(conn) == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cost", [0, -5, MAX_COST + 1, None])
def test_the_enqueue_doors_refuse_a_bad_cost(conn: Connection, cost: int | None) -> None:
    with pytest.raises(Exception, match="cost must be a whole number from 1 to 1000000000"):
        conn.execute(
            "select * from fairqueue.enqueue_job('by_cost', null, '{}', null, null, 3, null, 0,"
            " %s)",
            (cost,),
        )
    with pytest.raises(Exception, match="cost must be a whole number from 1 to 1000000000"):
        conn.execute(
            "select * from fairqueue.enqueue_jobs('by_cost', null, '[{}, {}]', null, null,"
            " array[3, 3], null, array[0, 0]::float8[], array[1, %s]::integer[])",
            (cost,),
        )
    assert _jobs(conn) == 0


def test_fair_by_is_checked_where_the_stage_is_declared() -> None:
    with pytest.raises(ConfigurationError, match=r"Stage 'odd'.*fair_by"):
        Stage("odd", handler=lambda _job: None, fair_by="tokens")  # type: ignore[arg-type]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cost", BAD_COSTS)
def test_a_bad_cost_is_refused_by_admit(conn: Connection, cost: Any) -> None:
    with pytest.raises(FairqueueError, match="cost"):
        admit(conn, "lane", "by_cost", {}, tenant_id="t", fair_cost=cost)
    assert _jobs(conn) == 0


@pytest.mark.timeout(60)
def test_admit_and_the_admission_door_carry_the_cost(conn: Connection) -> None:
    admission = admit(conn, "lane", "by_cost", {}, tenant_id="t", fair_cost=70)
    row = conn.execute(
        "select cost from fairqueue.jobs where id = %s", (admission.job_id,)
    ).fetchone()
    assert row is not None and row["cost"] == 70
    # One statement, clamped to the tenant the job is for, as admission's own is.
    with pytest.raises(Exception, match="cost must be a whole number from 1 to 1000000000"):
        conn.execute(
            "select i.* from (select fairqueue.clamp('t')) c, lateral"
            " fairqueue.admission_insert(gen_random_uuid(), 'by_cost', '{}', 't', null, null, 3,"
            " 'lane', null, 0, null, 'pending', 0) i"
        )
    assert _jobs(conn) == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("quantum", "batch"),
    [
        (1, ["A1", "B1", "B2", "B3", "B4", "A2", "B5", "B6", "B7", "B8"]),
        (8, ["A1", "A2", "B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8"]),
    ],
)
def test_the_guides_batch_by_cost(conn: Connection, quantum: int, batch: list[str]) -> None:
    # docs/guide/fairness.md: groups A (jobs of cost 4) and B (cost 1), ten jobs each created
    # in turn, none served.
    names = {}
    for k in range(10):
        for group, cost in (("A", 4), ("B", 1)):
            job_id = enqueue(conn, "by_cost", {}, group_id=group, cost=cost)
            names[job_id] = f"{group}{k + 1}"
    claimed = claim_batch(conn, "by_cost", batch=10, lease_s=60, locked_by="t", quantum=quantum)
    assert {names[c.id] for c in claimed} == set(batch)
    assert by_counter(conn) == {("by_cost", "/A"): 8, ("by_cost", "/B"): 8}


@pytest.mark.timeout(60)
def test_a_doorbell_counts_a_job_as_its_stage_counts_it(conn: Connection, dsn: str) -> None:
    # The doorbell's claim counts as the cron's: the cost under fair_by="cost", else one.
    by_cost = Stage("bell_by_cost", handler=lambda _job: None, delivery="doorbell", fair_by="cost")
    by_jobs = Stage("bell_by_jobs", handler=lambda _job: None, delivery="doorbell")
    bells = MemoryDoorbells()
    ringing.use_doorbells(bells)
    try:
        costly = enqueue(conn, "bell_by_cost", {}, tenant_id="t", group_id="g", cost=7)
        counted_one = enqueue(conn, "bell_by_jobs", {}, tenant_id="t", group_id="g", cost=7)
        result = ring_all(dsn, [by_cost, by_jobs], bells.drain())
    finally:
        ringing.use_doorbells(None)
    assert result.jobs_done == 2
    counted = conn.execute(
        "select id, counted from fairqueue.all_jobs where id = any(%s)", ([costly, counted_one],)
    ).fetchall()
    assert {r["id"]: r["counted"] for r in counted} == {costly: 7, counted_one: 1}
    assert (
        by_counter(conn)
        == by_definition(conn)
        == {("bell_by_cost", "t/g"): 7, ("bell_by_jobs", "t/g"): 1}
    )

"""Weighted shares (Stage(order="shares"), Plan(weight=)): no tiers between plans; each plan's
groups take a quantum of the stage's quantum x the plan's weight, so while every plan has work
each is served in proportion to its weight, and a plan with none leaves the rest all of it.
Every batch against the plain model is in test_claim_order_property.py; these show the shares
themselves, the quanta a standing carries, and what is refused."""

from __future__ import annotations

from collections import Counter
from uuid import UUID

import pytest

from fairqueue import ConfigurationError, Plan, Plans, Stage, enqueue
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import set_plan

SHARES = Plans(
    (
        Plan("basic", priority=1, daily_units=None, description="", weight=1),
        Plan("plus", priority=2, daily_units=None, description="", weight=2),
        Plan("gold", priority=3, daily_units=None, description="", weight=3),
    )
)

Stage("shared", handler=lambda _job: None, order="shares")


def _claim(conn: Connection, batch: int, quantum: int = 1, plans: Plans = SHARES) -> list[UUID]:
    claimed = claim_batch(
        conn, "shared", batch=batch, lease_s=600, locked_by="test", quantum=quantum, plans=plans
    )
    return [job.id for job in claimed]


def _backlog(conn: Connection, tenant: str, plan: str, groups: int, jobs: int) -> set[UUID]:
    set_plan(conn, tenant, plan, plans=SHARES)
    return {
        enqueue(conn, "shared", {}, tenant_id=tenant, group_id=f"g{g}")
        for _ in range(jobs)
        for g in range(groups)
    }


def _quanta(conn: Connection) -> dict[str, int]:
    rows = conn.execute(
        "select group_key, quantum from fairqueue.served where type = 'shared'"
    ).fetchall()
    return {row["group_key"]: row["quantum"] for row in rows}


def test_two_backlogged_plans_of_weights_three_and_one_are_served_three_to_one(
    conn: Connection,
) -> None:
    gold = _backlog(conn, "g", "gold", groups=10, jobs=20)
    basic = _backlog(conn, "b", "basic", groups=10, jobs=20)
    served: Counter[str] = Counter()
    for _ in range(10):
        picks = set(_claim(conn, 8))
        assert len(picks) == 8
        served["gold"] += len(picks & gold)
        served["basic"] += len(picks & basic)
    # Every group stands at whole quanta served: gold's groups give 3 a turn, basic's 1, so each
    # 40 picks (one turn of all twenty groups) are 30 and 10.
    assert served == {"gold": 60, "basic": 20}


def test_a_plan_with_no_work_leaves_the_others_every_pick(conn: Connection) -> None:
    basic = _backlog(conn, "b", "basic", groups=3, jobs=10)
    gold = _backlog(conn, "g", "gold", groups=1, jobs=3)
    first = set(_claim(conn, 10))
    # Gold's one group gives its whole quantum of 3, then has nothing: basic takes the rest.
    assert gold <= first
    assert len(first & basic) == 7
    assert set(_claim(conn, 10)) <= basic


def test_plan_priority_makes_no_tier_under_shares(conn: Connection) -> None:
    # Gold ranks first by priority, but under shares a basic group served less goes first.
    gold = _backlog(conn, "g", "gold", groups=1, jobs=6)
    for job_id in list(gold)[:3]:
        conn.execute(
            "update fairqueue.jobs set status = 'done', finished_at = now() where id = %s",
            (job_id,),
        )
    basic = _backlog(conn, "b", "basic", groups=1, jobs=2)
    assert len(set(_claim(conn, 1)) & basic) == 1


def test_each_standing_carries_its_plans_quantum_and_no_tenant_the_middle_plans(
    conn: Connection,
) -> None:
    _backlog(conn, "g", "gold", groups=1, jobs=1)
    _backlog(conn, "p", "plus", groups=1, jobs=1)
    enqueue(conn, "shared", {}, group_id="alone")
    _claim(conn, 1, quantum=2)
    assert _quanta(conn) == {"g/g0": 6, "p/g0": 4, "/alone": 4}
    # A standing written after the stamp takes its plan's quantum from the enqueue's trigger.
    _backlog(conn, "b", "basic", groups=1, jobs=1)
    assert _quanta(conn)["b/g0"] == 2


def test_a_tenants_plan_change_restamps_its_standings(conn: Connection) -> None:
    _backlog(conn, "t", "gold", groups=2, jobs=1)
    _claim(conn, 1)
    assert set(_quanta(conn).values()) == {3}
    set_plan(conn, "t", "basic", plans=SHARES)
    assert set(_quanta(conn).values()) == {1}


def test_a_weight_change_restamps_the_plans_standings_only(conn: Connection) -> None:
    _backlog(conn, "g", "gold", groups=1, jobs=2)
    _backlog(conn, "b", "basic", groups=1, jobs=2)
    _claim(conn, 1)
    assert _quanta(conn) == {"g/g0": 3, "b/g0": 1}
    heavier = Plans(
        tuple(
            Plan(p.name, p.priority, p.daily_units, p.description, weight=5)
            if p.name == "gold"
            else p
            for p in SHARES.plans
        )
    )
    _claim(conn, 1, plans=heavier)
    assert _quanta(conn) == {"g/g0": 5, "b/g0": 1}


@pytest.mark.parametrize("weight", [0, -1, float("nan"), float("inf"), "3", True, None])
def test_a_plan_weight_that_is_not_a_positive_number_is_refused(weight: object) -> None:
    with pytest.raises(ConfigurationError, match="plan 'odd': weight must be a positive number"):
        Plan("odd", priority=1, daily_units=None, description="", weight=weight)  # type: ignore[arg-type]


def test_a_plan_quantum_past_the_bound_is_refused_and_changes_nothing(conn: Connection) -> None:
    job = enqueue(conn, "shared", {}, tenant_id="g")
    huge = Plans((Plan("gold", priority=1, daily_units=None, description="", weight=300),))
    with pytest.raises(
        ConfigurationError, match="plan 'gold': a quantum of 4 x weight 300 is 1200"
    ):
        _claim(conn, 1, quantum=4, plans=huge)
    assert conn.execute("select status from fairqueue.jobs where id = %s", (job,)).fetchone() == {
        "status": "pending"
    }
    assert conn.execute("select count(*) as n from fairqueue.type_quanta").fetchone() == {"n": 0}


def test_a_stage_order_that_cannot_be_kept_is_refused() -> None:
    with pytest.raises(
        ConfigurationError, match="order must be 'priority' or 'shares', got 'fair'"
    ):
        Stage("odd_order", handler=lambda _job: None, order="fair")  # type: ignore[arg-type]


@pytest.mark.parametrize("fair_share", ["group", "tenant"])
def test_a_claim_order_that_cannot_be_kept_is_refused(conn: Connection, fair_share: str) -> None:
    job = enqueue(conn, "shared", {}, tenant_id="g")
    with pytest.raises(ConfigurationError, match="order must be one of priority, shares"):
        claim_batch(
            conn,
            "shared",
            batch=1,
            lease_s=60,
            locked_by="test",
            order="fair",  # type: ignore[arg-type]
            fair_share=fair_share,  # type: ignore[arg-type]
        )
    assert conn.execute("select status from fairqueue.jobs where id = %s", (job,)).fetchone() == {
        "status": "pending"
    }


@pytest.mark.parametrize(
    ("order", "quantum", "batch"),
    [
        ("priority", 1, "G1 G2 G3 G4 G5 G6 G7 G8"),
        ("shares", 1, "G1 G2 G3 B1 B2 G4 G5 G6"),
        ("shares", 2, "G1 G2 G3 G4 G5 G6 B1 B2"),
    ],
)
def test_the_guides_worked_example(conn: Connection, order: str, quantum: int, batch: str) -> None:
    # docs/guide/fairness.md, "Weighted shares": a gold group G and a basic group B, ten jobs
    # each created in turn, none served today; a batch of 8.
    set_plan(conn, "g", "gold", plans=SHARES)
    set_plan(conn, "b", "basic", plans=SHARES)
    names: dict[UUID, str] = {}
    for k in range(1, 11):
        names[enqueue(conn, "shared", {}, tenant_id="g", group_id="G")] = f"G{k}"
        names[enqueue(conn, "shared", {}, tenant_id="b", group_id="B")] = f"B{k}"
    claimed = claim_batch(
        conn,
        "shared",
        batch=8,
        lease_s=600,
        locked_by="test",
        quantum=quantum,
        order=order,  # type: ignore[arg-type]
        plans=SHARES,
    )
    # A batch comes in no order; the guide writes it in the order's.
    picked = {names[job.id] for job in claimed}
    assert picked == set(batch.split())


def test_the_plans_table_shows_each_plans_weight() -> None:
    lines = SHARES.table().splitlines()
    assert lines[0].split()[:3] == ["plan", "priority", "weight"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert [rows[name][2] for name in ("gold", "plus", "basic")] == ["3", "2", "1"]
    # A job with no tenant weighs as the middle plan.
    assert "(no tenant)" in lines[-1] and lines[-1].split()[3] == "2"


def test_more_plans_than_the_claim_takes_are_refused() -> None:
    many = tuple(Plan(f"p{k}", priority=k, daily_units=None, description="") for k in range(101))
    with pytest.raises(ConfigurationError, match="at most 100 plans, got 101"):
        Plans(many)


Stage("shared_tenants", handler=lambda _job: None, fair_share="tenant", order="shares")


def test_at_the_tenant_level_tenants_share_by_weight_whatever_their_groups(
    conn: Connection,
) -> None:
    # A gold tenant with one group against a basic tenant with five: 3:1 between the tenants,
    # not between their groups.
    set_plan(conn, "g", "gold", plans=SHARES)
    set_plan(conn, "b", "basic", plans=SHARES)
    gold = {enqueue(conn, "shared_tenants", {}, tenant_id="g", group_id="x") for _ in range(60)}
    basic = {
        enqueue(conn, "shared_tenants", {}, tenant_id="b", group_id=f"g{k % 5}") for k in range(60)
    }
    served: Counter[str] = Counter()
    for _ in range(5):
        claimed = claim_batch(
            conn, "shared_tenants", batch=8, lease_s=600, locked_by="test", plans=SHARES
        )
        picks = {job.id for job in claimed}
        served["gold"] += len(picks & gold)
        served["basic"] += len(picks & basic)
    assert served == {"gold": 30, "basic": 10}

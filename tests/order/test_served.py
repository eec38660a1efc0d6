"""The served counter keeps exactly the definition: done or running jobs of a type whose
coalesce(finished_at, locked_at) is within the last day, per group, however they were written,
in the hot table or moved to the finished one."""

import random
import time

import pytest

from fairqueue import Stage, enqueue
from fairqueue.pipeline.claim import claim_batch, complete_claimed, retry_or_fail


def noop(_job: object) -> None:
    pass


Stage("s1", handler=noop)
Stage("s2", handler=noop)

DEFINITION = """
select type, fairqueue.group_key(tenant_id, group_id) as group_key, count(*) as n
  from fairqueue.all_jobs
 where status in ('done', 'running')
   and coalesce(finished_at, locked_at) > now() - interval '1 day'
 group by 1, 2
"""


def by_definition(conn) -> dict[tuple[str, str], int]:
    return {(r["type"], r["group_key"]): r["n"] for r in conn.execute(DEFINITION).fetchall()}


def by_counter(conn) -> dict[tuple[str, str], int]:
    conn.execute("select fairqueue.expire_served()")
    rows = conn.execute("select type, group_key, n from fairqueue.served where n <> 0").fetchall()
    return {(r["type"], r["group_key"]): r["n"] for r in rows}


def test_counter_matches_the_definition_through_random_transitions(conn) -> None:
    rng = random.Random(20261129)
    groups = ["g1", "g2", "g3", None]
    ids = []
    for step in range(300):
        action = rng.random()
        if action < 0.3 or not ids:
            ids.append(enqueue(conn, rng.choice(["s1", "s2"]), {}, group_id=rng.choice(groups)))
        elif action < 0.45:
            claim_batch(conn, rng.choice(["s1", "s2"]), batch=3, lease_s=60, locked_by="t")
        elif action < 0.6:
            complete_claimed(conn, [(None, rng.choice(ids))], "t")
        elif action < 0.7:
            retry_or_fail(conn, rng.choice(ids), "t", "boom", tenant_id=None)
        elif action < 0.8:
            # Rewrite history: served at some point of the last two days, near the edge too.
            hours = rng.choice([1, 12, 23.99, 24.01, 30, 47])
            conn.execute(
                "update fairqueue.jobs set status = 'done',"
                " finished_at = now() - %s * interval '1 hour' where id = %s",
                (hours, rng.choice(ids)),
            )
        elif action < 0.85:
            # A job moved to another group, or another tenant's group of the same name.
            conn.execute(
                "update fairqueue.jobs set group_id = %s, tenant_id = %s where id = %s",
                (rng.choice(groups), rng.choice(["a", None]), rng.choice(ids)),
            )
        elif action < 0.88:
            conn.execute(
                "delete from fairqueue.jobs where id = %s", (ids.pop(rng.randrange(len(ids))),)
            )
        elif action < 0.94:
            # The finished ones leave the hot table, dated as they are.
            conn.execute("select fairqueue.move_finished(5, interval '1 s')")
        else:
            conn.execute(
                "update fairqueue.jobs set status = 'cancelled' where id = %s", (rng.choice(ids),)
            )
        if step % 25 == 0:
            assert by_counter(conn) == by_definition(conn), f"diverged at step {step}"
    assert by_counter(conn) == by_definition(conn)
    assert sum(by_definition(conn).values()) > 0


@pytest.mark.parametrize("where", ["done in the hot table", "moved out of it", "still running"])
def test_a_served_job_leaves_the_count_when_it_turns_a_day_old(conn, where: str) -> None:
    job_id = enqueue(conn, "s1", {}, group_id="g")
    if where == "still running":
        conn.execute(
            "update fairqueue.jobs set status = 'running', attempts = 1,"
            " locked_at = now() - interval '1 day' + interval '2 seconds',"
            " lease_until = now() + interval '1 hour' where id = %s",
            (job_id,),
        )
    else:
        conn.execute(
            "update fairqueue.jobs set status = 'done',"
            " finished_at = now() - interval '1 day' + interval '2 seconds' where id = %s",
            (job_id,),
        )
    if where == "moved out of it":
        row = conn.execute("select fairqueue.move_finished(10, interval '1 s') as n").fetchone()
        assert row["n"] == 1
    assert by_counter(conn) == by_definition(conn) == {("s1", "/g"): 1}
    time.sleep(2.5)
    assert by_definition(conn) == {}
    assert by_counter(conn) == {}


def test_a_claim_reads_counts_expired_up_to_its_own_time(conn) -> None:
    for _ in range(2):
        old = enqueue(conn, "s1", {}, group_id="old")
        conn.execute(
            "update fairqueue.jobs set status = 'done',"
            " finished_at = now() - interval '1 day' + interval '2 seconds' where id = %s",
            (old,),
        )
    recent = enqueue(conn, "s1", {}, group_id="recent")
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now() where id = %s", (recent,)
    )
    assert by_counter(conn) == {("s1", "/old"): 2, ("s1", "/recent"): 1}
    time.sleep(2.5)
    # "old" now has nothing served in the last day, "recent" has one: old goes first, though
    # nothing but the claim itself has expired the counter since.
    recent_job = enqueue(conn, "s1", {}, group_id="recent")
    old_job = enqueue(conn, "s1", {}, group_id="old")
    first = claim_batch(conn, "s1", batch=1, lease_s=60, locked_by="t")
    assert [j.id for j in first] == [old_job]
    second = claim_batch(conn, "s1", batch=1, lease_s=60, locked_by="t")
    assert [j.id for j in second] == [recent_job]

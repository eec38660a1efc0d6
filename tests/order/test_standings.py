"""Each group's standing in the claim's order (its head, wake time, plan, pause) stays exactly
what its jobs say, whatever writes them and however writers overlap."""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

import pytest

from fairqueue import Stage, connect, enqueue
from fairqueue.db import Connection
from fairqueue.groups import pause_group, resume_group
from fairqueue.pipeline.claim import claim_batch, complete_claimed
from fairqueue.plans import PLANS, set_plan
from fairqueue.queries import query
from fairqueue.stage import FairShare
from support.rows import race, wait_until_waiting_on_a_lock

STAGE = Stage("standing", handler=lambda _job: None)


def standings_drift(conn: Connection) -> list[dict[str, Any]]:
    """Rows whose stored head or pause differs from what the jobs and groups say now."""
    return conn.execute(
        """
        select s.group_key, s.head_id, h.id as actual
          from fairqueue.served s
          left join lateral (select * from fairqueue.group_head(s.type, s.group_key)) h on true
         where s.type = %s
           and (s.head_id is distinct from h.id
                or s.paused <> exists (select 1 from fairqueue.groups g
                                        where g.key = s.group_key and g.status = 'paused'))
        """,
        (STAGE.name,),
    ).fetchall()


def claim_all(conn: Connection, locked_by: str) -> list[UUID]:
    return claim_all_of(conn, locked_by, batch=20)


def claim_all_of(
    conn: Connection, locked_by: str, *, batch: int, fair_share: FairShare = "group"
) -> list[UUID]:
    """Claims up to `batch` jobs and completes them: their ids, in the order taken."""
    jobs = claim_batch(
        conn, STAGE.name, batch=batch, lease_s=60, locked_by=locked_by, fair_share=fair_share
    )
    complete_claimed(conn, [(j.tenant_id, j.id) for j in jobs], locked_by)
    return [j.id for j in jobs]


def claim_in(conn: Connection) -> list[UUID]:
    """The claim's statement alone, in the caller's transaction: the ids it takes, up to 5."""
    rows = conn.execute(
        query("claim_batch"),
        {
            "type": STAGE.name,
            "batch": 5,
            "lease_s": 60,
            "locked_by": "first",
            "run_id": None,
            "quantum": 1,
            "by_cost": False,
            **PLANS.claim_params(),
        },
    ).fetchall()
    return [row["id"] for row in rows]


def enqueue_that_waits(conn: Connection, adder: Connection) -> tuple[threading.Thread, list[Any]]:
    """Starts an enqueue into group g on `adder` in a thread and returns once it waits on a lock:
    the thread, and the list its job id goes into when the enqueue is done."""
    pid = adder.execute("select pg_backend_pid() as pid").fetchone()
    assert pid is not None
    added: list[Any] = []

    def add() -> None:
        added.append(enqueue(adder, STAGE.name, {}, tenant_id="t", group_id="g"))

    thread = threading.Thread(target=add)
    thread.start()
    wait_until_waiting_on_a_lock(conn, pid["pid"])
    return thread, added


def test_enqueuers_and_claimers_overlapping_on_few_groups_lose_no_job(
    conn: Connection, dsn: str
) -> None:
    enqueued: list[UUID] = []
    lock = threading.Lock()
    writing = threading.Event()
    writing.set()

    def enqueuer(k: int) -> list[UUID]:
        mine: list[UUID] = []
        with connect(dsn, autocommit=True) as own:
            for i in range(60):
                # A transaction that stays open a little after its insert: the window in which
                # a claim may take the group's last job without seeing this one.
                with own.transaction():
                    job_id = enqueue(own, STAGE.name, {"i": i}, tenant_id="t", group_id=f"g{i % 3}")
                    assert job_id is not None
                    time.sleep(0.002 * (k % 3))
                mine.append(job_id)
        with lock:
            enqueued.extend(mine)
        return mine

    def claimer(k: int) -> list[UUID]:
        taken: list[UUID] = []
        with connect(dsn, autocommit=True) as own:
            while True:
                still_writing = writing.is_set()
                got = claim_all(own, f"claimer-{k}")
                taken += got
                if not got and not still_writing:
                    return taken

    def enqueuers() -> list[UUID]:
        try:
            done = race([lambda k=k: enqueuer(k) for k in range(4)])
        finally:
            writing.clear()
        for part in done:
            if isinstance(part, BaseException):
                raise part
        return [job_id for part in done for job_id in part]

    results = race([enqueuers, *[lambda k=k: claimer(k) for k in range(3)]])
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome
    claimed = [job_id for part in results[1:] for job_id in part]
    # A job that became pending while its group's last job was being claimed would be left out
    # of the standing; the claimers would then stop with it still pending.
    assert len(claimed) == len(set(claimed))
    assert set(claimed) == set(results[0]) == set(enqueued)
    assert standings_drift(conn) == []


def test_a_job_added_while_its_group_was_emptied_is_claimed_after_it_commits(
    conn: Connection, dsn: str
) -> None:
    head = enqueue(conn, STAGE.name, {}, tenant_id="t", group_id="g")
    with connect(dsn, autocommit=True) as adder, connect(dsn, autocommit=True) as claimer:
        with adder.transaction():
            # The group has a head, so this enqueue writes nothing to its standing.
            added = enqueue(adder, STAGE.name, {}, tenant_id="t", group_id="g")
            # The claim takes the head and cannot see the job above: the group looks empty.
            assert claim_all(claimer, "first") == [head]
        assert claim_all(claimer, "second") == [added]
    assert standings_drift(conn) == []


def test_a_job_added_while_a_claim_that_emptied_its_group_is_open_is_claimed_after_it(
    conn: Connection, dsn: str
) -> None:
    head = enqueue(conn, STAGE.name, {}, tenant_id="t", group_id="g")
    with connect(dsn, autocommit=True) as claimer, connect(dsn, autocommit=True) as adder:
        with claimer.transaction():
            # The claim takes the group's only job and leaves its standing headless.
            assert claim_in(claimer) == [head]
            # The enqueue reads the standing as it was before the claim: it must wait for the
            # claim, then read it again, and put its job at the head.
            thread, added = enqueue_that_waits(conn, adder)
        thread.join(timeout=10)
    assert added and added[0] is not None
    assert claim_all(conn, "second") == [added[0]]
    assert standings_drift(conn) == []


def test_a_job_enqueued_after_a_claim_began_and_committed_before_it_empties_the_group_is_claimed(
    conn: Connection, dsn: str
) -> None:
    head = enqueue(conn, STAGE.name, {}, tenant_id="t", group_id="g")
    with (
        connect(dsn, autocommit=True) as claimer,
        connect(dsn, autocommit=True) as adder,
        claimer.transaction(),
    ):
        # The claim's clock starts here: now() is when its transaction began.
        claimer.execute("select now()")
        time.sleep(0.01)
        # The group has a head, so this enqueue writes nothing to its standing; its job is
        # due from a moment later than the claim's now().
        added = enqueue(adder, STAGE.name, {}, tenant_id="t", group_id="g")
        # The claim sees the job but not as due by its clock: it takes the head alone.
        assert claim_in(claimer) == [head]
    assert claim_all(conn, "second") == [added]
    assert standings_drift(conn) == []


@pytest.mark.parametrize("level", ["group", "tenant"])
@pytest.mark.parametrize("late_enqueue", ["while the claim is open", "before the claim"])
def test_a_job_enqueued_behind_a_head_a_claim_is_setting_is_claimed_in_order_or_next_but_one(
    conn: Connection, dsn: str, level: FairShare, late_enqueue: str
) -> None:
    head = enqueue(conn, STAGE.name, {}, tenant_id="t", group_id="g")
    with (
        connect(dsn, autocommit=True) as claimer,
        connect(dsn, autocommit=True) as adder,
    ):
        with adder.transaction():
            # The late job's time is when its transaction began: before the jobs below.
            adder.execute("select now()")
            time.sleep(0.01)
            later = [enqueue(conn, STAGE.name, {}, tenant_id="t", group_id="g") for _ in range(3)]
            if late_enqueue == "before the claim":
                # The late enqueue reads the head, older than its job, writes nothing and holds
                # the standing key share until it commits.
                late = [enqueue(adder, STAGE.name, {}, tenant_id="t", group_id="g")]
            with claimer.transaction():
                taken = claim_batch(
                    claimer, STAGE.name, batch=1, lease_s=60, locked_by="first", fair_share=level
                )
                assert [job.id for job in taken] == [head]
                if late_enqueue == "while the claim is open":
                    # The claim has set the head to the first of the later jobs and holds the
                    # standing until it commits: the late enqueue waits for it, then finds its
                    # job older than that head.
                    thread, late = enqueue_that_waits(conn, adder)
            if late_enqueue == "while the claim is open":
                thread.join(timeout=10)
        assert late and late[0] is not None
        next_two = [claim_all_of(conn, "next", batch=1, fair_share=level) for _ in range(2)]
    if late_enqueue == "while the claim is open":
        # The late job is the head: the next claim takes it, then the first later one.
        assert next_two == [[late[0]], [later[0]]]
    else:
        # The claim could not take the standing for update past the enqueue's key share, so the
        # head it set without seeing the late job is no floor. The next claim reads the jobs from
        # that head on and takes the first later one; the head it leaves is read from the
        # group's start, and is the late job.
        assert next_two == [[later[0]], [late[0]]]
    assert standings_drift(conn) == []


def test_a_job_that_comes_due_later_is_claimed_once_it_is_due(conn: Connection) -> None:
    later = enqueue(conn, STAGE.name, {}, tenant_id="t", run_after=_in_seconds(conn, 0.5))
    assert claim_all(conn, "early") == []
    time.sleep(0.7)
    assert claim_all(conn, "late") == [later]


def test_a_standing_follows_pause_resume_and_plan_changes(conn: Connection) -> None:
    first = enqueue(conn, STAGE.name, {}, tenant_id="free-co", group_id="inbox")
    second = enqueue(conn, STAGE.name, {}, tenant_id="team-co", group_id="inbox")
    set_plan(conn, "free-co", "free")
    set_plan(conn, "team-co", "team")
    pause_group(conn, "inbox", tenant_id="team-co")
    assert standings_drift(conn) == []
    # The team group is paused: the free one goes first.
    assert claim_all(conn, "a") == [first]
    resume_group(conn, "inbox", tenant_id="team-co")
    assert standings_drift(conn) == []
    assert claim_all(conn, "b") == [second]
    assert standings_drift(conn) == []


def test_a_truncated_queue_stands_again_at_the_next_claim(conn: Connection) -> None:
    enqueue(conn, STAGE.name, {}, tenant_id="t")
    conn.execute("truncate fairqueue.jobs")  # no trigger sees it
    fresh = enqueue(conn, STAGE.name, {}, tenant_id="t", group_id="other")
    assert claim_all(conn, "after") == [fresh]
    assert standings_drift(conn) == []


def _in_seconds(conn: Connection, seconds: float) -> Any:
    row = conn.execute("select now() + %s * interval '1 second' as at", (seconds,)).fetchone()
    assert row is not None
    return row["at"]

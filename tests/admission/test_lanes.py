"""Serial lanes and credits, under the application role against real Postgres."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
from pydantic import BaseModel

from fairqueue import InvalidPayload, Job, Stage, TenantMismatch, connect, run_pipeline
from fairqueue.lanes import (
    InsufficientCredit,
    add_credits,
    admit,
    balance,
    lane_history,
    lane_jobs,
    lock_key,
    lock_lane,
)
from fairqueue.tenancy import clamp_callers_transaction
from fairqueue.upstream import InProcessUpstream
from support import rows as support

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "fairqueue" / "fairqueue"


class Analysis(BaseModel):
    doc: str


class Serial:
    """Records the order handlers ran in, and how many ran at once."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()

    def __call__(self, job: Job) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.order.append(job.payload["doc"])
        time.sleep(0.01)
        with self.lock:
            self.running -= 1


SERIAL = Serial()
STAGE = Stage("analysis", handler=SERIAL, payload_model=Analysis, batch=10, concurrency=4)
FLAKY = Stage("analysis_doomed", handler=lambda job: 1 / 0, max_attempts=1)
# Admitted the other way: checks, the service holding the work, then the insert.
HELD_WORK = InProcessUpstream()
HELD = Stage("analysis_held", handler=lambda job: None, upstream=HELD_WORK)


@pytest.fixture
def app(dsn: str):
    with connect(dsn, autocommit=True) as c:
        yield c


def statuses(conn) -> list[str]:
    return [
        r["status"] for r in conn.execute("select status from fairqueue.jobs order by created_at")
    ]


def test_a_free_lane_admits_pending_a_busy_one_queued(app, conn) -> None:
    first = admit(app, "u1", "analysis", {"doc": "a"}, tenant_id="t")
    second = admit(app, "u1", "analysis", {"doc": "b"}, tenant_id="t")
    other_lane = admit(app, "u2", "analysis", {"doc": "c"}, tenant_id="t")
    other_tenant = admit(app, "u1", "analysis", {"doc": "d"}, tenant_id="s")
    assert (first.status, first.place) == ("pending", 1)
    assert (second.status, second.place) == ("queued", 2)
    assert other_lane.status == other_tenant.status == "pending"
    assert [j["status"] for j in lane_jobs(app, "t", "u1")] == ["pending", "queued"]


def test_a_delta_never_waits_in_a_lane_nor_blocks_it(app) -> None:
    first = admit(app, "u1", "analysis", {"doc": "a"}, tenant_id="t")
    delta = admit(app, "u1", "analysis", {"doc": "a again"}, tenant_id="t", delta_of=first.job_id)
    after = admit(app, "u1", "analysis", {"doc": "b"}, tenant_id="t")
    assert delta.status == "pending"
    assert after.status == "queued"
    assert after.place == 2


def test_a_delta_of_a_job_moved_out_of_the_hot_table_is_admitted(app, conn) -> None:
    first = admit(app, "u1", "analysis", {"doc": "a"}, tenant_id="t")
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now() where id = %s",
        (first.job_id,),
    )
    moved = conn.execute("select fairqueue.move_finished(10, interval '1 s') as n").fetchone()
    assert moved["n"] == 1
    delta = admit(app, "u1", "analysis", {"doc": "a again"}, tenant_id="t", delta_of=first.job_id)
    assert (delta.status, delta.place) == ("pending", 1)
    assert [(j["id"], j["status"]) for j in lane_history(app, "t", "analysis")] == [
        (first.job_id, "done")
    ]


def test_lane_history_since_a_time_leaves_out_what_was_admitted_before(app, conn) -> None:
    before = admit(app, "u1", "analysis", {"doc": "old"}, tenant_id="t")
    app.commit()
    conn.execute(
        "update fairqueue.jobs set created_at = created_at - interval '1 hour' where id = %s",
        (before.job_id,),
    )
    since = conn.execute("select now() - interval '1 minute' as t").fetchone()["t"]
    after = admit(app, "u2", "analysis", {"doc": "new"}, tenant_id="t")
    app.commit()
    assert [j["id"] for j in lane_history(app, "t", "analysis", since=since)] == [after.job_id]
    assert {j["id"] for j in lane_history(app, "t", "analysis")} == {before.job_id, after.job_id}


@pytest.mark.parametrize(
    ("payload", "cost", "error", "message"),
    [
        ({"doc": "a"}, 50, InsufficientCredit, "costs 50 credits; the balance is 10"),
        ({"nope": 1}, 5, InvalidPayload, "doc"),
        ({"doc": "a"}, -1, InvalidPayload, "credit cost"),
    ],
)
def test_every_error_on_the_first_click_and_nothing_lands(
    app, conn, payload, cost, error, message
) -> None:
    add_credits(app, "t", 10, note="welcome")
    with pytest.raises(error, match=message):
        admit(app, "u1", "analysis", payload, tenant_id="t", cost=cost)
    assert statuses(conn) == []
    assert balance(app, "t") == 10


def test_credits_are_debited_once_and_refunded_when_the_work_is_given_up(dsn, app, conn) -> None:
    add_credits(app, "t", 10)
    doomed = admit(app, "u1", "analysis_doomed", {}, tenant_id="t", cost=4)
    assert balance(app, "t") == 6
    assert add_credits(app, "t", -4, kind="debit", job_id=doomed.job_id) is False  # not twice
    run_pipeline(dsn, [FLAKY])
    assert balance(app, "t") == 10
    kinds = [r["kind"] for r in conn.execute("select kind from fairqueue.credits order by id")]
    assert kinds == ["grant", "debit", "refund"]


def race(targets: list) -> list:
    """Each target's result; none of them may raise."""
    results = support.race(targets)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    return results


def admit_on_own_connection(dsn: str, doc: str):
    def go():
        with connect(dsn, autocommit=True) as c:
            return admit(c, "busy-user", "analysis", {"doc": doc}, tenant_id="t")

    return go


def test_two_racing_admits_leave_exactly_one_pending(dsn, conn) -> None:
    results = race([admit_on_own_connection(dsn, d) for d in ("a", "b")])
    assert sorted(r.status for r in results) == ["pending", "queued"]


def test_fifty_admits_run_one_at_a_time_in_admission_order(dsn, conn) -> None:
    SERIAL.order.clear()
    SERIAL.most = 0
    docs = [f"doc-{n:02d}" for n in range(50)]
    results = race([admit_on_own_connection(dsn, d) for d in docs])
    assert sorted(r.status for r in results).count("pending") == 1
    admitted = [
        r["payload"]["doc"]
        for r in conn.execute("select payload from fairqueue.jobs order by created_at, id")
    ]
    # Two promoters at once (a rolling deploy): two pipelines drain the lane together.
    deadline = time.monotonic() + 60
    while conn.execute(
        "select count(*) as n from fairqueue.jobs where status <> 'done'"
    ).fetchone()["n"]:
        race([lambda: run_pipeline(dsn, [STAGE]), lambda: run_pipeline(dsn, [STAGE])])
        assert time.monotonic() < deadline
    assert SERIAL.order == admitted
    assert SERIAL.most == 1


def test_lane_keys_are_spelled_by_one_helper_only(app, dsn) -> None:
    assert lock_key("t", "u1") != lock_key("t", "U1") != lock_key("t ", "u1")
    with connect(dsn) as holder, connect(dsn, autocommit=True) as other:
        lock_lane(holder, "t", "u1")  # held until holder's transaction ends
        other.execute("set lock_timeout = '200ms'")
        with other.transaction():  # a differently spelled key is another lock: no wait
            lock_lane(other, "t", "U1")
        with pytest.raises(psycopg.errors.LockNotAvailable), other.transaction():
            lock_lane(other, "t", "u1")
        holder.rollback()
    takers = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.suffix in {".py", ".sql"} and "lane_lock" in path.read_text(encoding="utf-8")
    ]
    assert sorted(takers) == ["lanes.py", "queries/lanes.sql"]


def test_a_lost_promotion_is_made_good_by_the_sweeper(dsn, app, conn) -> None:
    from fairqueue.roles.sweeper import sweep

    first = admit(app, "u1", "analysis", {"doc": "a"}, tenant_id="t")
    second = admit(app, "u1", "analysis", {"doc": "b"}, tenant_id="t")
    # The first job finishes in a process that dies before it promotes the next.
    conn.execute("update fairqueue.jobs set status = 'done' where id = %s", (first.job_id,))
    result = sweep(dsn, [STAGE])
    assert result.lanes_promoted == 1
    row = conn.execute(
        "select status from fairqueue.jobs where id = %s", (second.job_id,)
    ).fetchone()
    assert row["status"] == "pending"
    assert sweep(dsn, [STAGE]).lanes_promoted == 0


@pytest.mark.parametrize("lane", [None, "", "u\x00", "u" * 201])
def test_a_lane_that_cannot_be_stored_is_refused_and_nothing_lands(app, conn, lane) -> None:
    with pytest.raises(InvalidPayload, match="the lane"):
        admit(app, lane, "analysis", {"doc": "a"}, tenant_id="t")
    assert conn.execute("select count(*) as n from fairqueue.jobs").fetchone()["n"] == 0


@pytest.mark.parametrize("job_type", ["analysis", "analysis_held"])
def test_an_admission_in_the_callers_transaction_lands_only_when_it_commits(
    app, conn, job_type
) -> None:
    with app.transaction(force_rollback=True):
        assert admit(app, "u1", job_type, {"doc": "a"}, tenant_id="t").place == 1
        assert statuses(app) == ["pending"]
    assert statuses(conn) == []
    with app.transaction():
        first = admit(app, "u1", job_type, {"doc": "b"}, tenant_id="t")
        second = admit(app, "u1", job_type, {"doc": "c"}, tenant_id="t")
    assert [(first.status, first.place), (second.status, second.place)] == [
        ("pending", 1),
        ("queued", 2),
    ]
    assert statuses(conn) == ["pending", "queued"]


@pytest.mark.parametrize("job_type", ["analysis", "analysis_held"])
def test_an_admission_in_a_transaction_working_for_another_tenant_is_refused(
    app, conn, job_type
) -> None:
    HELD_WORK.work.clear()
    with app.transaction():
        clamp_callers_transaction(app, "s")
        with pytest.raises(TenantMismatch, match="works for tenant 's'"):
            admit(app, "u1", job_type, {"doc": "a"}, tenant_id="t")
    assert statuses(conn) == []
    assert HELD_WORK.work == {}

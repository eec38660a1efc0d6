"""One invocation end to end: transitions, the loop's order, and every stop reason."""

import threading
import time
from datetime import timedelta

import pytest
from pydantic import BaseModel

from fairqueue import DatabaseUnavailable, Defer, Job, Stage, define_quota, enqueue, run_pipeline
from fairqueue.pipeline.claim import claim_batch, complete_claimed, count_completed
from support.rows import age_job, count, job, runs


class Always(Exception):
    pass


def seconds_until(conn, job_id) -> float:
    row = conn.execute(
        "select extract(epoch from run_after - now()) as s from fairqueue.jobs where id = %s",
        (job_id,),
    ).fetchone()
    return float(row["s"])


def test_failure_retries_after_2_then_4_minutes_then_fails_with_the_error(dsn, conn) -> None:
    given_up: list[tuple[Job, str]] = []

    def boom(j: Job) -> None:
        raise Always(f"attempt {j.attempts} broke")

    stage = Stage("flaky", handler=boom, on_give_up=lambda j, e: given_up.append((j, e)))
    job_id = enqueue(conn, "flaky", {"n": 1})

    first = run_pipeline(dsn, [stage])
    assert (first.stop_reason, first.jobs_failed, first.jobs_done) == ("no_work", 0, 0)
    row = job(conn, job_id)
    assert (row["status"], row["attempts"]) == ("pending", 1)
    assert "attempt 1 broke" in row["last_error"]
    assert 110 < seconds_until(conn, job_id) <= 120

    age_job(conn, job_id, run_after=1)
    run_pipeline(dsn, [stage])
    assert job(conn, job_id)["attempts"] == 2
    assert 230 < seconds_until(conn, job_id) <= 240

    age_job(conn, job_id, run_after=1)
    last = run_pipeline(dsn, [stage])
    row = job(conn, job_id)
    assert (row["status"], row["attempts"]) == ("failed", 3)
    assert "attempt 3 broke" in row["last_error"]
    assert row["finished_at"] is not None
    assert last.jobs_failed == 1
    assert [(j.id, "attempt 3 broke" in e) for j, e in given_up] == [(job_id, True)]


def test_max_attempts_is_settable_per_job(dsn, conn) -> None:
    stage = Stage("once", handler=lambda j: (_ for _ in ()).throw(Always("no")), max_attempts=5)
    job_id = enqueue(conn, "once", {}, max_attempts=1)
    result = run_pipeline(dsn, [stage])
    assert job(conn, job_id)["status"] == "failed"
    assert result.jobs_failed == 1


def test_defer_returns_the_job_at_until_without_burning_an_attempt(dsn, conn) -> None:
    def later(j: Job) -> None:
        raise Defer(timedelta(minutes=10))

    stage = Stage("later", handler=later)
    job_id = enqueue(conn, "later", {})
    result = run_pipeline(dsn, [stage])
    row = job(conn, job_id)
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert 590 < seconds_until(conn, job_id) <= 600
    assert result.jobs_deferred == 1
    assert result.stop_reason == "no_work"


class Strict(BaseModel):
    url: str


def test_payload_that_no_longer_validates_fails_at_once_without_retries(dsn, conn) -> None:
    calls: list[Job] = []
    stage = Stage("strict", handler=calls.append, payload_model=Strict)
    job_id = enqueue(conn, "strict", {"url": "u"})
    conn.execute("update fairqueue.jobs set payload = '{\"link\": 1}' where id = %s", (job_id,))
    result = run_pipeline(dsn, [stage])
    row = job(conn, job_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert "no longer fits" in row["last_error"] and "url" in row["last_error"]
    assert calls == []
    assert result.jobs_failed == 1


def test_a_claimer_that_lost_its_job_changes_nothing(conn) -> None:
    Stage("lease", handler=lambda j: None)
    job_id = enqueue(conn, "lease", {})
    claim_batch(conn, "lease", batch=1, lease_s=60, locked_by="first")
    age_job(conn, job_id, lease_until=1)
    claim_batch(conn, "lease", batch=1, lease_s=60, locked_by="second")
    assert complete_claimed(conn, [(None, job_id)], "first") == set()
    assert count_completed(conn, [(None, job_id)], "first") == 0
    row = job(conn, job_id)
    assert (row["status"], row["locked_by"], row["attempts"]) == ("running", "second", 2)
    assert count_completed(conn, [(None, job_id)], "second") == 1
    assert job(conn, job_id)["status"] == "done"


def test_the_loop_starts_again_at_the_top_after_every_batch(dsn, conn) -> None:
    order: list[str] = []
    lock = threading.Lock()

    def finish(j: Job) -> None:
        with lock:
            order.append(f"finish:{j.payload['n']}")

    def start(j: Job) -> None:
        with lock:
            order.append(f"start:{j.payload['n']}")
        j.enqueue("finish", {"n": j.payload["n"]})

    stages = [Stage("finish", handler=finish, batch=5), Stage("start", handler=start, batch=1)]
    for n in range(3):
        enqueue(conn, "start", {"n": n})
    result = run_pipeline(dsn, stages)
    assert order == ["start:0", "finish:0", "start:1", "finish:1", "start:2", "finish:2"]
    assert result.jobs_done == 6
    assert result.summary["stages"]["start"]["batches"] == 3


def test_follow_ups_of_a_failed_job_are_dropped(dsn, conn) -> None:
    def start(j: Job) -> None:
        j.enqueue("follow", {})
        raise Always("after enqueueing")

    stages = [Stage("follow", handler=lambda j: None), Stage("starter", handler=start)]
    enqueue(conn, "starter", {}, max_attempts=1)
    run_pipeline(dsn, stages)
    assert count(conn, "type = 'follow'") == 0


def test_follow_ups_inherit_tenant_and_group(dsn, conn) -> None:
    stages = [
        Stage("child", handler=lambda j: None),
        Stage("parent", handler=lambda j: j.enqueue("child", {"x": 1})),
    ]
    enqueue(conn, "parent", {}, tenant_id="t9", group_id="g9")
    run_pipeline(dsn, stages)
    row = conn.execute("select * from fairqueue.all_jobs where type = 'child'").fetchone()
    assert (row["tenant_id"], row["group_id"], row["status"]) == ("t9", "g9", "done")


def test_follow_up_with_bad_input_fails_the_parent_and_inserts_nothing(dsn, conn) -> None:
    stage = Stage("bad-parent", handler=lambda j: j.enqueue("no-such-type", {}), max_attempts=1)
    job_id = enqueue(conn, "bad-parent", {})
    run_pipeline(dsn, [stage])
    row = job(conn, job_id)
    assert row["status"] == "failed"
    assert "no-such-type" in row["last_error"]
    assert count(conn) == 1


def test_time_budget_never_starts_a_batch_that_cannot_finish(dsn, conn) -> None:
    calls: list[Job] = []
    stage = Stage("slow", handler=calls.append, job_timeout_s=5)
    enqueue(conn, "slow", {})
    result = run_pipeline(dsn, [stage], time_budget_s=2)
    assert result.stop_reason == "time_budget"
    assert calls == []
    assert count(conn, "status = 'pending' and attempts = 0") == 1


def test_time_budget_uses_the_longest_batch_seen_when_jobs_are_unbounded(dsn, conn) -> None:
    stage = Stage("naps", handler=lambda j: time.sleep(0.4), batch=1)
    for _ in range(10):
        enqueue(conn, "naps", {})
    result = run_pipeline(dsn, [stage], time_budget_s=1.0)
    assert result.stop_reason == "time_budget"
    assert 1 <= result.jobs_done <= 2
    assert count(conn, "status = 'running'") == 0


class Remaining:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def get_remaining_time_in_millis(self) -> int:
        return self.ms


def test_a_lambda_context_caps_the_budget_at_its_remaining_time_less_a_margin(dsn, conn) -> None:
    stage = Stage("quick", handler=lambda j: None)
    enqueue(conn, "quick", {})
    result = run_pipeline(dsn, [stage], time_budget_s=220, context=Remaining(14_000))
    assert result.stop_reason == "time_budget"
    assert count(conn, "status = 'pending'") == 1
    assert result.summary == {"stages": {}}
    result = run_pipeline(dsn, [stage], time_budget_s=220, context=Remaining(60_000))
    assert result.stop_reason == "no_work"
    assert result.jobs_done == 1


def spending(j: Job) -> None:
    j.spend("api", 1)


def test_quota_reserve_stops_the_run_before_the_reserve_is_spent(dsn, conn) -> None:
    define_quota(conn, "api", capacity=3, period=timedelta(hours=1), reserve=1)
    stage = Stage("spender", handler=spending, batch=1, quota="api")
    for _ in range(5):
        enqueue(conn, "spender", {})
    result = run_pipeline(dsn, [stage])
    assert (result.stop_reason, result.jobs_done, result.units) == ("quota_reserve", 2, 2)
    quota = conn.execute("select remaining from fairqueue.quotas where name = 'api'").fetchone()
    assert quota["remaining"] == 1
    assert runs(conn)[-1]["quota_units"] == 2


def test_quota_exhausted_when_nothing_is_left(dsn, conn) -> None:
    define_quota(conn, "api", capacity=2, period=timedelta(hours=1))
    stage = Stage("spender2", handler=spending, batch=1, quota="api")
    for _ in range(3):
        enqueue(conn, "spender2", {})
    result = run_pipeline(dsn, [stage])
    assert (result.stop_reason, result.jobs_done) == ("quota_exhausted", 2)


def test_a_handler_that_cannot_spend_is_deferred_until_the_reset(dsn, conn) -> None:
    define_quota(conn, "api", capacity=3, period=timedelta(hours=1), reserve=1)
    stage = Stage("spender3", handler=spending, batch=5, concurrency=1, quota="api")
    ids = [enqueue(conn, "spender3", {}) for _ in range(5)]
    result = run_pipeline(dsn, [stage])
    # The deferred jobs are not due, so nothing is left to claim.
    assert (result.jobs_done, result.jobs_deferred, result.stop_reason) == (2, 3, "no_work")
    resets = conn.execute("select resets_at from fairqueue.quotas").fetchone()["resets_at"]
    deferred = [job(conn, i) for i in ids if job(conn, i)["status"] == "pending"]
    assert len(deferred) == 3
    assert all(r["run_after"] == resets and r["attempts"] == 0 for r in deferred)


def test_a_quota_resets_when_its_period_passes(dsn, conn) -> None:
    define_quota(conn, "api", capacity=1, period=timedelta(seconds=1))
    stage = Stage("spender4", handler=spending, batch=1, quota="api")
    for _ in range(2):
        enqueue(conn, "spender4", {})
    assert run_pipeline(dsn, [stage]).stop_reason == "quota_exhausted"
    time.sleep(1.2)
    result = run_pipeline(dsn, [stage])
    assert result.jobs_done == 1


def test_a_handler_error_is_a_job_failure_not_a_run_error(dsn, conn) -> None:
    stage = Stage("broken", handler=lambda j: 1 / 0)
    enqueue(conn, "broken", {}, max_attempts=1)
    result = run_pipeline(dsn, [stage])
    assert (result.stop_reason, result.jobs_failed, result.error) == ("no_work", 1, None)
    assert "ZeroDivisionError" in count_error(conn)


def count_error(conn) -> str:
    return conn.execute("select last_error from fairqueue.jobs").fetchone()["last_error"]


def test_an_error_of_the_pipeline_closes_its_one_run_row_with_error(dsn, conn) -> None:
    stage = Stage("unfunded", handler=lambda j: None, quota="no-such-quota")
    enqueue(conn, "unfunded", {})
    result = run_pipeline(dsn, [stage])
    assert result.stop_reason == "error"
    assert "no-such-quota" in result.error
    [row] = runs(conn)
    assert row["stop_reason"] == "error" and row["finished_at"] is not None
    assert "no-such-quota" in row["error"]


def test_every_invocation_writes_exactly_one_closed_run_row(dsn, conn) -> None:
    stage = Stage("tick", handler=lambda j: None)
    for _ in range(3):
        run_pipeline(dsn, [stage], trigger="test")
    rows = runs(conn)
    assert len(rows) == 3
    assert all(r["finished_at"] is not None and r["stop_reason"] == "no_work" for r in rows)
    assert {r["trigger"] for r in rows} == {"test"}


def test_a_stop_request_finishes_the_job_in_flight_gives_back_the_rest_and_closes_the_run(
    dsn, conn
) -> None:
    stop = threading.Event()

    def stop_after(j: Job) -> None:
        stop.set()

    stage = Stage("stoppable", handler=stop_after, batch=2)
    for _ in range(3):
        enqueue(conn, "stoppable", {})
    result = run_pipeline(dsn, [stage], stop=stop)
    assert result.stop_reason == "time_budget"
    assert result.summary["interrupted"] == "stop requested"
    assert result.jobs_done == 1
    assert result.summary["stages"]["stoppable"]["given_back"] == 1
    assert count(conn, "status = 'pending' and attempts = 0") == 2
    assert runs(conn)[-1]["finished_at"] is not None


def test_a_stage_of_concurrency_one_runs_its_handlers_on_the_runs_own_thread(dsn, conn) -> None:
    threads: list[threading.Thread] = []
    stage = Stage("inline", handler=lambda j: threads.append(threading.current_thread()), batch=3)
    for _ in range(3):
        enqueue(conn, "inline", {})
    result = run_pipeline(dsn, [stage])
    assert result.jobs_done == 3
    assert threads == [threading.current_thread()] * 3


def test_an_unreachable_database_is_a_clear_error(monkeypatch) -> None:
    stage = Stage("nowhere", handler=lambda j: None)
    with pytest.raises(DatabaseUnavailable, match="cannot reach the database"):
        run_pipeline("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", [stage])
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    with pytest.raises(DatabaseUnavailable, match="FAIRQUEUE_ENV=production needs a DSN"):
        run_pipeline(None, [stage])


def test_bad_stage_definitions_are_refused() -> None:
    from fairqueue import ConfigurationError

    with pytest.raises(ConfigurationError, match="batch must be from 1 to 1000, got 0"):
        Stage("bad", handler=lambda j: None, batch=0)
    with pytest.raises(ConfigurationError, match="batch must be from 1 to 1000, got 1001"):
        Stage("bad", handler=lambda j: None, batch=1001)
    with pytest.raises(ConfigurationError, match="lease_s must be over 0 and at most 86400"):
        Stage("bad", handler=lambda j: None, lease_s=1e9)
    with pytest.raises(ConfigurationError, match="max_attempts must be from 1 to 1000"):
        Stage("bad", handler=lambda j: None, max_attempts=2**31)
    with pytest.raises(ConfigurationError, match="concurrency"):
        Stage("bad", handler=lambda j: None, concurrency=0)
    with pytest.raises(ConfigurationError, match="unique"):
        run_pipeline("unused", [Stage("dup", handler=print), Stage("dup", handler=print)])

"""Results: two writers, one row, explicit precedence; the backstop sweep and its hooks.
Real Postgres under the application role; time rules with short windows or past-dated rows."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from fairqueue import Job, Stage, connect, run_pipeline
from fairqueue.errors import ConfigurationError, InvalidPayload, UnknownJob
from fairqueue.jobs import enqueue
from fairqueue.lanes import admit
from fairqueue.results import (
    JobNotFinished,
    Result,
    ResultSettings,
    read_result,
    record_worker_result,
    results_by_writer,
    save_result,
)
from fairqueue.roles.backstop import Backstop
from fairqueue.status import missing_results
from support.rows import count, day_of, finished_days, holder

GRACE = ResultSettings(grace_s=0.3)


def summarize(job: Job) -> dict[str, Any]:
    return {"words": len(job.payload["text"].split())}


def render(output: dict[str, Any]) -> dict[str, Any]:
    return {"summary": f"{output['words']} words"}


def grade(result: Result, conn: psycopg.Connection[Any]) -> None:
    # The hook writes through the connection it is given: its write commits with the mark.
    conn.execute(
        "insert into public.hook_calls (job_id, body) values (%s, %s)",
        (result.job_id, result.body["summary"]),
    )


STAGE = Stage("res_summary", handler=summarize, render_result=render, after_result=grade)
NO_HOOK = Stage("res_plain", handler=summarize, render_result=render)
BAD_OUTPUT = Stage("res_bad_output", handler=lambda job: [1, 2], max_attempts=1)  # type: ignore[arg-type,return-value]


@pytest.fixture(autouse=True)
def counters(conn) -> None:
    """Count every write of a result row, and every hook call, in tables the app can write."""
    conn.execute("create table public.result_writes (job_id uuid, saved_by text)")
    conn.execute("create table public.hook_calls (job_id uuid, body text)")
    conn.execute("grant insert, select on public.result_writes, public.hook_calls to public")
    conn.execute(
        """
        create function public.count_result_write() returns trigger language plpgsql as $$
        begin
            insert into public.result_writes values (new.job_id, new.saved_by);
            return new;
        end $$
        """
    )
    conn.execute(
        "create trigger count_writes after insert or update of body on fairqueue.results"
        " for each row execute function public.count_result_write()"
    )


@pytest.fixture
def app(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(dsn, autocommit=True) as c:
        yield c


def finished_job(dsn: str, app, text: str = "one two three", *, stage: Stage = STAGE) -> UUID:
    job_id = enqueue(app, stage.name, {"text": text}, tenant_id="t")
    assert job_id is not None
    run_pipeline(dsn, [stage])
    return job_id


def writes(conn) -> list[tuple[UUID, str]]:
    return [(r["job_id"], r["saved_by"]) for r in conn.execute("select * from result_writes")]


def hook_calls(conn) -> list[tuple[UUID, str]]:
    return [(r["job_id"], r["body"]) for r in conn.execute("select * from hook_calls")]


def age(conn, job_id: UUID, seconds: float) -> None:
    """Date a finished job in the past, as if it finished ``seconds`` ago."""
    conn.execute(
        "update fairqueue.jobs set finished_at = now() - %s * interval '1 second' where id = %s",
        (seconds, job_id),
    )


def test_the_handler_output_is_stored_on_the_job(dsn, app, conn) -> None:
    job_id = finished_job(dsn, app)
    row = conn.execute(
        "select status, output, result_at from fairqueue.jobs where id = %s", (job_id,)
    ).fetchone()
    assert (row["status"], row["output"], row["result_at"]) == ("done", {"words": 3}, None)
    assert writes(conn) == []  # the worker does not write the result row


def test_an_output_that_is_not_an_object_fails_the_job(dsn, app, conn) -> None:
    job_id = enqueue(app, "res_bad_output", {}, tenant_id="t")
    run_pipeline(dsn, [BAD_OUTPUT])
    row = conn.execute(
        "select status, output, last_error from fairqueue.jobs where id = %s", (job_id,)
    ).fetchone()
    assert (row["status"], row["output"]) == ("failed", None)
    assert "res_bad_output's output must be a JSON object, got list" in row["last_error"]


def test_with_a_client_present_the_result_is_written_exactly_once(dsn, app, conn) -> None:
    job_id = finished_job(dsn, app)
    result = save_result(app, job_id, {"summary": "3 words, by the client"}, tenant_id="t")
    assert (result.saved_by, result.source_job_id) == ("client", job_id)
    assert hook_calls(conn) == [(job_id, "3 words, by the client")]
    age(conn, job_id, 60)
    assert Backstop(dsn, [STAGE], GRACE).rescue().written == 0
    assert writes(conn) == [(job_id, "client")]
    assert hook_calls(conn) == [(job_id, "3 words, by the client")]


def test_with_no_client_the_sweep_writes_it_once_after_the_grace_not_before(dsn, app, conn) -> None:
    job_id = finished_job(dsn, app)
    backstop = Backstop(dsn, [STAGE], GRACE)
    assert backstop.rescue().written == 0  # inside the grace window
    assert writes(conn) == []
    time.sleep(GRACE.grace_s + 0.1)
    swept = backstop.rescue()
    assert (swept.written, swept.hooks_fired) == (1, 1)
    assert backstop.rescue().written == 0
    assert writes(conn) == [(job_id, "worker")]
    assert hook_calls(conn) == [(job_id, "3 words")]
    stored = read_result(app, job_id, tenant_id="t")
    assert stored is not None
    assert (stored.saved_by, stored.body) == ("worker", {"summary": "3 words"})


def test_a_client_save_after_a_worker_save_wins_and_fires_the_hook_again(dsn, app, conn) -> None:
    job_id = finished_job(dsn, app)
    age(conn, job_id, 60)
    Backstop(dsn, [STAGE], GRACE).rescue()
    save_result(app, job_id, {"summary": "edited by the user"}, tenant_id="t")
    stored = read_result(app, job_id, tenant_id="t")
    assert stored is not None
    assert (stored.saved_by, stored.body) == ("client", {"summary": "edited by the user"})
    assert hook_calls(conn) == [(job_id, "3 words"), (job_id, "edited by the user")]


def test_a_worker_save_after_a_client_save_changes_nothing(dsn, app, conn) -> None:
    job_id = finished_job(dsn, app)
    save_result(app, job_id, {"summary": "the client's"}, tenant_id="t")
    with app.transaction():
        app.execute("select set_config('fairqueue.tenant_id', 't', true)")
        source = app.execute(
            "select id, type, tenant_id, status, output, created_at, id as result_job_id"
            " from fairqueue.jobs where id = %s",
            (job_id,),
        ).fetchone()
        assert record_worker_result(app, source, STAGE) is False
    stored = read_result(app, job_id, tenant_id="t")
    assert stored is not None
    assert (stored.saved_by, stored.body) == ("client", {"summary": "the client's"})
    assert writes(conn) == [(job_id, "client")]


def test_a_later_job_replaces_an_earlier_worker_row_but_never_the_reverse(dsn, app, conn) -> None:
    first = admit(app, "u1", "res_summary", {"text": "one"}, tenant_id="t").job_id
    recheck = admit(
        app, "u1", "res_summary", {"text": "one two"}, tenant_id="t", delta_of=first
    ).job_id
    run_pipeline(dsn, [STAGE])
    # The re-check is rescued first; its original, admitted earlier, cannot replace it.
    age(conn, recheck, 60)
    assert Backstop(dsn, [STAGE], GRACE).rescue().written == 1
    age(conn, first, 60)
    swept = Backstop(dsn, [STAGE], GRACE).rescue()
    assert (swept.written, swept.refused) == (0, 1)
    stored = read_result(app, first, tenant_id="t")
    assert stored is not None
    assert (stored.source_job_id, stored.body) == (recheck, {"summary": "2 words"})
    # One row for the job and its re-check, read through either id.
    assert read_result(app, recheck, tenant_id="t") == stored
    # A later re-check does replace the worker row.
    later = admit(
        app, "u1", "res_summary", {"text": "a b c d"}, tenant_id="t", delta_of=first
    ).job_id
    run_pipeline(dsn, [STAGE])
    age(conn, later, 60)
    assert Backstop(dsn, [STAGE], GRACE).rescue().written == 1
    stored = read_result(app, first, tenant_id="t")
    assert stored is not None
    assert (stored.saved_by, stored.source_job_id) == ("worker", later)


def test_a_legacy_row_with_no_saved_by_counts_as_a_client_row(dsn, app, conn) -> None:
    job_id = finished_job(dsn, app)
    conn.execute(
        "insert into fairqueue.results (job_id, tenant_id, type, body, saved_by, source_job_id,"
        " source_created_at, hook_fired_at)"
        ' select id, tenant_id, type, \'{"summary": "legacy"}\', null, id, created_at, now()'
        " from fairqueue.jobs where id = %s",
        (job_id,),
    )
    age(conn, job_id, 60)
    swept = Backstop(dsn, [STAGE], GRACE).rescue()
    assert (swept.written, swept.refused) == (0, 1)
    stored = read_result(app, job_id, tenant_id="t")
    assert stored is not None
    assert (stored.saved_by, stored.body) == (None, {"summary": "legacy"})
    save_result(app, job_id, {"summary": "new"}, tenant_id="t")
    stored = read_result(app, job_id, tenant_id="t")
    assert stored is not None
    assert (stored.saved_by, stored.body) == ("client", {"summary": "new"})


@pytest.mark.parametrize(
    ("job", "tenant", "body", "error", "message"),
    [
        ("missing", "t", {"summary": "x"}, UnknownJob, "no job"),
        ("done", "s", {"summary": "x"}, UnknownJob, "no job"),
        ("pending", "t", {"summary": "x"}, JobNotFinished, "is pending, not done"),
        ("done", "t", ["not", "an", "object"], InvalidPayload, "must be a JSON object"),
        ("done", "t", {"n": float("nan")}, InvalidPayload, "not JSON-serializable"),
        ("done", "t", {"text": "nul\x00"}, InvalidPayload, "NUL character"),
    ],
)
def test_a_client_save_that_is_wrong_changes_nothing(
    dsn, app, conn, job, tenant, body, error, message
) -> None:
    done = finished_job(dsn, app)
    pending = enqueue(app, "res_summary", {"text": "later"}, tenant_id="t")
    target = {"missing": UUID(int=7), "done": done, "pending": pending}[job]
    with pytest.raises(error, match=message):
        save_result(app, target, body, tenant_id=tenant)
    assert writes(conn) == []
    assert conn.execute("select count(*) as n from fairqueue.results").fetchone()["n"] == 0


def test_a_failed_client_path_hook_is_fired_by_a_later_sweep_once(dsn, app, conn) -> None:
    calls: list[UUID] = []

    def flaky(result: Result, c: psycopg.Connection[Any]) -> None:
        calls.append(result.job_id)
        if len(calls) == 1:
            raise RuntimeError("grader is down")
        grade(result, c)

    stage = Stage("res_flaky_hook", handler=summarize, render_result=render, after_result=flaky)
    job_id = finished_job(dsn, app, stage=stage)
    save_result(app, job_id, {"summary": "kept"}, tenant_id="t")  # the result stands
    assert hook_calls(conn) == []
    backstop = Backstop(dsn, [stage], GRACE)
    assert backstop.rescue().hooks_fired == 0  # owed, but inside the grace window
    time.sleep(GRACE.grace_s + 0.1)
    assert backstop.rescue().hooks_fired == 1
    assert backstop.rescue().hooks_fired == 0
    assert hook_calls(conn) == [(job_id, "kept")]
    assert writes(conn) == [(job_id, "client")]


def test_two_sweeps_at_once_write_each_result_once_and_fire_each_hook_once(dsn, app, conn) -> None:
    jobs = set()
    for n in range(60):
        job_id = enqueue(app, "res_summary", {"text": "w " * (n + 1)}, tenant_id=f"t{n % 3}")
        assert job_id is not None
        jobs.add(job_id)
    run_pipeline(dsn, [STAGE])
    conn.execute("update fairqueue.jobs set finished_at = now() - interval '1 minute'")
    settings = ResultSettings(grace_s=0.3, batch=7)
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def sweep() -> None:
        barrier.wait(timeout=10)
        outcomes.append(Backstop(dsn, [STAGE], settings).rescue())

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sum(o.written for o in outcomes) == 60
    assert sum(o.hooks_fired for o in outcomes) == 60
    written = writes(conn)
    assert sorted(j for j, _ in written) == sorted(jobs)
    assert {by for _, by in written} == {"worker"}
    assert sorted(j for j, _ in hook_calls(conn)) == sorted(jobs)


def test_a_sweep_never_stacks_on_itself_in_one_process(dsn, app, conn) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_render(output: dict[str, Any]) -> dict[str, Any]:
        entered.set()
        release.wait(timeout=10)
        return render(output)

    stage = Stage("res_slow", handler=summarize, render_result=slow_render)
    job_id = finished_job(dsn, app, stage=stage)
    age(conn, job_id, 60)
    backstop = Backstop(dsn, [stage], GRACE)
    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(backstop.rescue()))
    thread.start()
    assert entered.wait(timeout=10)
    assert backstop.rescue() is None  # skipped: one is in flight
    release.set()
    thread.join(timeout=10)
    assert first[0].written == 1


def test_a_render_error_skips_that_job_only(dsn, app, conn) -> None:
    def picky(output: dict[str, Any]) -> dict[str, Any]:
        if output["words"] == 2:
            raise ValueError("two words cannot be rendered")
        return render(output)

    stage = Stage("res_picky", handler=summarize, render_result=picky)
    bad = finished_job(dsn, app, "one two", stage=stage)
    good = finished_job(dsn, app, "one two three", stage=stage)
    conn.execute("update fairqueue.jobs set finished_at = now() - interval '1 minute'")
    swept = Backstop(dsn, [stage], GRACE).rescue()
    assert swept.written == 1
    assert "two words cannot be rendered" in swept.render_errors[0]
    assert writes(conn) == [(good, "worker")]
    row = conn.execute("select result_at from fairqueue.jobs where id = %s", (bad,)).fetchone()
    assert row["result_at"] is None  # still missing: the next sweep tries again


def test_retention_moves_finished_jobs_trims_old_outputs_and_drops_whole_days(
    dsn, app, conn
) -> None:
    day = 86_400
    settings = ResultSettings(grace_s=0.3, output_retention_s=7200, job_retention_s=2 * day)
    fresh = finished_job(dsn, app, stage=NO_HOOK)
    old = finished_job(dsn, app, stage=NO_HOOK)
    ancient = finished_job(dsn, app, stage=NO_HOOK)
    age(conn, old, 1.5 * day)  # past the output's retention, inside the job's
    age(conn, ancient, 4 * day)  # its whole day is past the job's retention
    conn.execute("update fairqueue.jobs set result_at = now()")  # results decided already
    before = finished_days(conn)
    now = conn.execute("select now() as t").fetchone()["t"]
    past = {name for name, ends_at in before.items() if ends_at <= now - timedelta(days=2)}
    assert day_of(conn, ancient) in past

    swept = Backstop(dsn, [NO_HOOK], settings).rescue()

    assert swept.jobs_moved == 3
    assert (swept.outputs_trimmed, swept.days_dropped, swept.days_skipped) == (2, len(past), 0)
    assert set(finished_days(conn)) == set(before) - past
    assert count(conn, "status <> 'pending'") == 0  # none finished is left in the hot table
    rows = {
        r["id"]: r["output"]
        for r in conn.execute("select id, output from fairqueue.finished_jobs").fetchall()
    }
    assert rows == {fresh: {"words": 3}, old: None}


def test_a_done_job_whose_output_waits_for_its_result_stays_until_the_result_is_saved(
    dsn, app, conn
) -> None:
    waiting = finished_job(dsn, app)
    decided = finished_job(dsn, app, stage=NO_HOOK)
    conn.execute("update fairqueue.jobs set result_at = now() where id = %s", (decided,))
    moved = conn.execute("select fairqueue.move_finished(100, interval '1 s') as n").fetchone()
    assert moved["n"] == 1
    assert holder(conn, waiting) == "fairqueue.jobs"
    assert holder(conn, decided) == "fairqueue.finished_jobs"
    # The backstop saves the missing result from where the job is, then moves it.
    age(conn, waiting, 60)
    swept = Backstop(dsn, [STAGE], GRACE).rescue()
    assert (swept.written, swept.jobs_moved) == (1, 1)
    assert holder(conn, waiting) == "fairqueue.finished_jobs"
    # A client's save later still finds the job, and wins over the worker's.
    result = save_result(app, waiting, {"summary": "by the client"}, tenant_id="t")
    assert result.saved_by == "client"
    assert writes(conn)[-1] == (waiting, "client")


def test_status_counts_missing_results_by_age(dsn, app, conn) -> None:
    ages = [0, 30, 600, 7200, 90_000]
    for seconds in ages:
        age(conn, finished_job(dsn, app, stage=NO_HOOK), seconds)
    counts = missing_results(app, grace_s=120)
    assert (counts.within_grace, counts.under_an_hour, counts.under_a_day, counts.older) == (
        2,
        1,
        1,
        1,
    )


def test_results_by_writer_since_a_time_counts_only_what_was_saved_since(dsn, app, conn) -> None:
    old, new = (finished_job(dsn, app, stage=NO_HOOK) for _ in range(2))
    for job_id in (old, new):
        save_result(app, job_id, {"summary": "x"}, tenant_id="t")
    conn.execute(
        "update fairqueue.results set saved_at = saved_at - interval '1 hour' where job_id = %s",
        (old,),
    )
    since = conn.execute("select now() - interval '1 minute' as t").fetchone()["t"]
    assert results_by_writer(app, "t", NO_HOOK.name, since=since) == {"client": 1}
    assert results_by_writer(app, "t", NO_HOOK.name) == {"client": 2}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FAIRQUEUE_RESULT_GRACE_S": "soon"}, "FAIRQUEUE_RESULT_GRACE_S"),
        ({"FAIRQUEUE_OUTPUT_RETENTION_S": "0"}, "FAIRQUEUE_OUTPUT_RETENTION_S"),
        # Past what the doors take.
        (
            {"FAIRQUEUE_OUTPUT_RETENTION_S": "60"},
            "FAIRQUEUE_OUTPUT_RETENTION_S must be at least 7200, got '60'",
        ),
        (
            {"FAIRQUEUE_RESULT_GRACE_S": "7200", "FAIRQUEUE_JOB_RETENTION_S": "1e12"},
            "FAIRQUEUE_RESULT_GRACE_S must be at most 3600, got '7200'; "
            "FAIRQUEUE_JOB_RETENTION_S must be at most 316224000, got '1e12'",
        ),
    ],
)
def test_result_settings_name_what_is_wrong(monkeypatch, env, message) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        ResultSettings.from_env()

"""The backstop always finishes its pass: a result that cannot be saved is recorded and backed
off, never handed back in the same pass, and the rest of the pass (hooks, moves, retention,
vacuum) runs whatever failed; a pass without a budget of its own (``serve --role backstop``)
ends within the backstop's. Real Postgres, the application role."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from fairqueue import Job, Stage, connect, run_pipeline
from fairqueue.jobs import enqueue
from fairqueue.results import Result, ResultSettings
from fairqueue.roles.backstop import PASS_BUDGET_S, Backstop
from fairqueue.tenancy import tenant_transaction

SETTINGS = ResultSettings(grace_s=0.3, batch=6)


def count_words(job: Job) -> dict[str, Any]:
    return {"words": len(job.payload["text"].split())}


class Poison:
    """A render_result that raises while ``on``, counting its calls."""

    def __init__(self) -> None:
        self.on = True
        self.calls = 0

    def __call__(self, output: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.on:
            raise ValueError("this output cannot be rendered")
        return {"summary": f"{output['words']} words"}


def note_hook(result: Result, conn: psycopg.Connection[Any]) -> None:
    conn.execute("insert into public.hook_calls (job_id) values (%s)", (result.job_id,))


def render(output: dict[str, Any]) -> dict[str, Any]:
    return {"summary": f"{output['words']} words"}


GOOD = Stage("pass_good", handler=count_words, render_result=render, after_result=note_hook)


@pytest.fixture(autouse=True)
def hook_calls_table(conn) -> None:
    conn.execute("create table public.hook_calls (job_id uuid)")
    conn.execute("grant insert, select on public.hook_calls to public")


@pytest.fixture
def app(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(dsn, autocommit=True) as c:
        yield c


def finished_jobs(dsn: str, app, stage: Stage, n: int) -> list[UUID]:
    """``n`` done jobs of ``stage`` waiting for their result."""
    ids = []
    for k in range(n):
        job_id = enqueue(app, stage.name, {"text": "one two " * (k + 1)}, tenant_id="t")
        assert job_id is not None
        ids.append(job_id)
    run_pipeline(dsn, [stage])
    return ids


def age(conn, ids: list[UUID], seconds: float) -> None:
    conn.execute(
        "update fairqueue.jobs set finished_at = now() - %s * interval '1 second'"
        " where id = any(%s)",
        (seconds, ids),
    )


def failures(conn) -> dict[UUID, tuple[int, float]]:
    """Each failed save kept: how many times, and seconds until its next try."""
    rows = conn.execute(
        "select job_id, failures, extract(epoch from retry_at - now())::float as wait_s"
        " from fairqueue.result_save_failures"
    ).fetchall()
    return {r["job_id"]: (r["failures"], r["wait_s"]) for r in rows}


def test_a_poisoned_batch_is_backed_off_and_the_pass_still_saves_hooks_and_moves(
    dsn, app, conn
) -> None:
    poison = Poison()
    poisoned_stage = Stage("pass_poisoned", handler=count_words, render_result=poison)
    poisoned = finished_jobs(dsn, app, poisoned_stage, 6)
    good = finished_jobs(dsn, app, GOOD, 4)
    age(conn, poisoned, 120)  # the oldest: the first batch is all poisoned
    age(conn, good, 60)
    backstop = Backstop(dsn, [poisoned_stage, GOOD], SETTINGS)

    swept = backstop.rescue()

    assert swept is not None
    assert poison.calls == 6  # each tried once in the pass, not once per batch
    assert (swept.written, swept.hooks_fired, swept.jobs_moved) == (4, 4, 4)
    assert len(swept.render_errors) == 6
    assert all("this output cannot be rendered" in e for e in swept.render_errors)
    assert (swept.results_failing, swept.step_errors, swept.interrupted) == (6, [], False)
    assert sorted(r["job_id"] for r in conn.execute("select job_id from hook_calls")) == sorted(
        good
    )
    kept = failures(conn)
    assert sorted(kept) == sorted(poisoned)
    assert all(n == 1 and 55 < wait_s <= 60 for n, wait_s in kept.values()), kept

    # The next pass leaves them alone: their retry time has not come.
    again = backstop.rescue()
    assert again is not None
    assert (poison.calls, again.written, again.results_failing) == (6, 0, 6)
    assert again.render_errors == []

    # Once it has, each is tried once more and waits twice as long.
    conn.execute("update fairqueue.result_save_failures set retry_at = now()")
    third = backstop.rescue()
    assert third is not None
    assert (poison.calls, len(third.render_errors), third.results_failing) == (12, 6, 6)
    assert all(n == 2 and 115 < wait_s <= 120 for n, wait_s in failures(conn).values())

    # Mended, they are saved, moved, and their failures forgotten.
    poison.on = False
    conn.execute("update fairqueue.result_save_failures set retry_at = now()")
    mended = backstop.rescue()
    assert mended is not None
    assert (mended.written, mended.jobs_moved, mended.results_failing) == (6, 6, 0)
    assert failures(conn) == {}


def test_a_pass_called_without_a_budget_ends_within_the_backstops_own(dsn, app, conn) -> None:
    def slow_render(output: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.3)
        return render(output)

    slow = Stage("pass_slow", handler=count_words, render_result=slow_render)
    ids = finished_jobs(dsn, app, slow, 20)
    age(conn, ids, 60)
    # As `serve --role backstop` calls it: a stop event and no budget.
    backstop = Backstop(dsn, [slow], ResultSettings(grace_s=0.3, batch=2), budget_s=1.0)
    started = time.monotonic()
    swept = backstop.rescue(threading.Event())
    took = time.monotonic() - started

    assert swept is not None
    # Saving stops after the batch that crosses half the budget (the first, 0.6 s); the rest of
    # the pass runs. Without a budget the pass would take 6 s.
    assert swept.interrupted
    assert (swept.written, swept.jobs_moved) == (2, 2)
    assert took < 2.0, took
    assert Backstop(dsn, [slow]).budget_s == PASS_BUDGET_S


def test_failed_saves_are_kept_only_through_the_door_and_only_for_the_clamps_tenant(
    dsn, app, conn
) -> None:
    poison = Poison()
    stage = Stage("pass_door", handler=count_words, render_result=poison)
    [job_id] = finished_jobs(dsn, app, stage, 1)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app.execute(
            "insert into fairqueue.result_save_failures (job_id, retry_at, last_error)"
            " values (%s, now() + interval '1 day', 'x')",
            (job_id,),
        )
    with tenant_transaction(app, "u"):
        noted = app.execute(
            "select * from fairqueue.note_result_failure(%s, 'not yours')", (job_id,)
        ).fetchall()
    assert noted == []
    with tenant_transaction(app, "t"):
        noted = app.execute(
            "select failures from fairqueue.note_result_failure(%s, 'yours')", (job_id,)
        ).fetchall()
    assert noted == [{"failures": 1}]
    assert list(failures(conn)) == [job_id]


def test_a_step_that_fails_is_listed_and_the_steps_after_it_still_run(dsn, app, conn) -> None:
    poison = Poison()
    poisoned_stage = Stage("pass_step_poisoned", handler=count_words, render_result=poison)
    finished_jobs(dsn, app, poisoned_stage, 2)
    good = finished_jobs(dsn, app, GOOD, 3)
    conn.execute("update fairqueue.jobs set finished_at = now() - interval '1 minute'")
    # Retention fails: the application role may no longer trim outputs.
    conn.execute(
        "revoke execute on function fairqueue.trim_outputs(interval, integer) from fairqueue_app"
    )

    swept = Backstop(dsn, [poisoned_stage, GOOD], SETTINGS).rescue()

    assert swept is not None
    assert [error.split(":")[0] for error in swept.step_errors] == ["retention"]
    assert "InsufficientPrivilege" in swept.step_errors[0]
    # Before it: saved, hooks fired, moved; after it: the failed saves still counted.
    assert (swept.written, swept.hooks_fired, swept.jobs_moved) == (3, 3, 3)
    assert swept.results_failing == 2
    assert sorted(r["job_id"] for r in conn.execute("select job_id from hook_calls")) == sorted(
        good
    )

"""A process killed mid-job (SIGKILL: no handler, no finally) loses nothing.

The claim counts the attempt and sets a lease before the handler starts; the row is all that
survives the process. The lease keeps the job from a second runner until it expires; then the
job runs again, or, if that was its last attempt, the next run's sweep fails it and calls the
stage's give-up hook. The killed run's row stays open until the sweeper closes it as abandoned.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from fairqueue import Job, Stage, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.pipeline.claim import has_claimable
from fairqueue.roles.sweeper import sweep
from support.rows import job, runs

WORKER = Path(__file__).resolve().parents[1] / "support" / "sigkill_worker.py"
READY_TIMEOUT_S = 30.0


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    """Starts sigkill_worker.py; whatever a test leaves running is killed at teardown."""
    started: list[Worker] = []

    def start(
        dsn: str, job_type: str, *, lease_s: float, max_attempts: int, mode: str = ""
    ) -> tuple[Worker, dict[str, Any]]:
        ready = tmp_path / f"ready-{len(started)}.json"
        log = tmp_path / f"worker-{len(started)}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    dsn,
                    job_type,
                    str(ready),
                    str(lease_s),
                    str(max_attempts),
                    *([mode] if mode else []),
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        worker = Worker(proc, log)
        started.append(worker)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if proc.poll() is not None:
                pytest.fail(
                    f"the worker exited with {proc.returncode} before its job started:\n"
                    + worker.output()
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the worker's handler did not start within {READY_TIMEOUT_S} s:\n"
                    + worker.output()
                )
            time.sleep(0.02)
        return worker, json.loads(ready.read_text())

    yield start
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.kill()
        worker.proc.wait(timeout=10)


def sigkill(worker: Worker) -> None:
    os.kill(worker.proc.pid, signal.SIGKILL)
    assert worker.proc.wait(timeout=10) == -signal.SIGKILL


def wait_for_lease_to_expire(conn: Connection, job_id: UUID, timeout_s: float) -> None:
    """Polls the database's clock (the one the claim compares with), never sleeps a guess."""
    deadline = time.monotonic() + timeout_s
    while True:
        row = conn.execute(
            "select lease_until < now() as expired from fairqueue.jobs where id = %s", (job_id,)
        ).fetchone()
        assert row is not None
        if row["expired"]:
            return
        assert time.monotonic() < deadline, f"the lease of {job_id} did not expire in {timeout_s} s"
        time.sleep(0.05)


class Seen:
    def __init__(self) -> None:
        self.calls: list[tuple[UUID, int]] = []
        self._lock = threading.Lock()

    def __call__(self, job: Job) -> None:
        with self._lock:
            self.calls.append((job.id, job.attempts))


def test_a_job_killed_mid_run_is_held_by_its_lease_then_runs_again(
    dsn: str, conn: Connection, spawn: Any
) -> None:
    lease_s = 3.0
    seen = Seen()
    stage = Stage("sigkill_retry", handler=seen, lease_s=lease_s, max_attempts=3)
    job_id = enqueue(conn, stage.name, {"doc": "a"})
    assert job_id is not None

    worker, started = spawn(dsn, stage.name, lease_s=lease_s, max_attempts=3)
    assert (started["job_id"], started["attempts"]) == (str(job_id), 1)
    sigkill(worker)

    held = job(conn, job_id)
    assert (held["status"], held["attempts"]) == ("running", 1)
    (killed_run,) = runs(conn)
    assert held["locked_by"] == f"run:{killed_run['id']}"
    assert held["run_id"] == killed_run["id"]
    assert killed_run["trigger"] == "sigkill-worker"
    # The killed process could not close its run: the row stays open. That is expected; the
    # open row (finished_at null, no stop reason) is how the audit shows a run that died.
    assert killed_run["finished_at"] is None
    assert killed_run["stop_reason"] is None

    # Before the lease expires, nobody may take the job.
    live = conn.execute(
        "select lease_until > now() as live from fairqueue.jobs where id = %s", (job_id,)
    ).fetchone()
    assert live is not None and live["live"], "the test was too slow for its lease"
    assert not has_claimable(conn, stage.name)
    early = run_pipeline(dsn, [stage], trigger="manual")
    assert (early.stop_reason, early.jobs_done, early.jobs_failed) == ("no_work", 0, 0)
    assert seen.calls == []
    still = job(conn, job_id)
    assert (still["status"], still["attempts"], still["locked_by"]) == (
        "running",
        1,
        held["locked_by"],
    )

    wait_for_lease_to_expire(conn, job_id, timeout_s=lease_s + 10)
    assert has_claimable(conn, stage.name)
    rescue = run_pipeline(dsn, [stage], trigger="manual")

    assert seen.calls == [(job_id, 2)]
    assert (rescue.stop_reason, rescue.jobs_done, rescue.jobs_failed) == ("no_work", 1, 0)
    done = job(conn, job_id)
    assert (done["status"], done["attempts"], done["run_id"]) == ("done", 2, rescue.run_id)
    assert done["finished_at"] is not None
    by_id = {r["id"]: r for r in runs(conn)}
    assert len(by_id) == 3
    assert by_id[killed_run["id"]]["finished_at"] is None  # its process never came back
    assert by_id[rescue.run_id]["stop_reason"] == "no_work"
    assert by_id[rescue.run_id]["jobs_done"] == 1

    # Once the killed run is older than any invocation lives, the sweeper closes its row.
    assert sweep(dsn, [stage]).abandoned_runs_closed == 0
    conn.execute(
        "update fairqueue.runs set started_at = now() - interval '21 minutes' where id = %s",
        (killed_run["id"],),
    )
    assert sweep(dsn, [stage]).abandoned_runs_closed == 1
    closed = {r["id"]: r for r in runs(conn)}[killed_run["id"]]
    assert closed["stop_reason"] == "error"
    assert closed["error"].startswith("abandoned:")
    assert all(r["finished_at"] is not None for r in runs(conn))


def test_a_job_killed_on_its_last_attempt_is_failed_by_the_next_runs_sweep(
    dsn: str, conn: Connection, spawn: Any
) -> None:
    lease_s = 2.0
    seen = Seen()
    gave_up: list[tuple[UUID, int, int, str]] = []

    def on_give_up(given: Job, error: str) -> None:
        gave_up.append((given.id, given.attempts, given.max_attempts, error))

    stage = Stage(
        "sigkill_last", handler=seen, lease_s=lease_s, max_attempts=1, on_give_up=on_give_up
    )
    job_id = enqueue(conn, stage.name, {"credits": 2}, tenant_id="acme")
    assert job_id is not None

    worker, started = spawn(dsn, stage.name, lease_s=lease_s, max_attempts=1)
    assert started["attempts"] == 1
    sigkill(worker)
    held = job(conn, job_id)
    assert (held["status"], held["attempts"], held["max_attempts"]) == ("running", 1, 1)

    # Inside the lease the sweep leaves it alone: the process might still be alive.
    early = run_pipeline(dsn, [stage], trigger="manual")
    assert (early.stop_reason, early.jobs_failed) == ("no_work", 0)
    assert gave_up == []
    assert job(conn, job_id)["status"] == "running"

    wait_for_lease_to_expire(conn, job_id, timeout_s=lease_s + 10)
    # No attempts left: the claim will never take it again; only the sweep can end it.
    assert not has_claimable(conn, stage.name)
    sweep = run_pipeline(dsn, [stage], trigger="manual")

    assert seen.calls == []  # it was never run again
    assert len(gave_up) == 1
    given_id, attempts, max_attempts, error = gave_up[0]
    assert (given_id, attempts, max_attempts) == (job_id, 1, 1)
    assert "lease expired on the last attempt (1 of 1)" in error
    failed = job(conn, job_id)
    assert failed["status"] == "failed"
    assert failed["finished_at"] is not None
    assert "lease expired on the last attempt" in failed["last_error"]
    assert (sweep.stop_reason, sweep.jobs_failed, sweep.jobs_done) == ("no_work", 1, 0)
    assert sweep.summary.get("abandoned_failed") == 1
    row = {r["id"]: r for r in runs(conn)}[sweep.run_id]
    assert (row["stop_reason"], row["jobs_failed"]) == ("no_work", 1)

    # Swept once, refunded once: the next run finds nothing to do.
    again = run_pipeline(dsn, [stage], trigger="manual")
    assert (again.stop_reason, again.jobs_failed) == ("no_work", 0)
    assert len(gave_up) == 1


def test_an_abandoned_job_is_refunded_even_when_a_run_of_other_stages_sweeps_first(
    dsn: str, conn: Connection
) -> None:
    # Functions with different stage lists share the table (the cron function, a worker). A
    # job that died on its last attempt must still reach its own stage's give-up hook: a run
    # that cannot call that hook must not be the one that fails it.
    gave_up: list[UUID] = []
    paid = Stage(
        "sigkill_paid",
        handler=Seen(),
        max_attempts=1,
        on_give_up=lambda given, error: gave_up.append(given.id),
    )
    other = Stage("sigkill_other", handler=Seen())
    job_id = enqueue(conn, paid.name, {"credits": 5}, tenant_id="acme")
    assert job_id is not None
    # What a process killed on the job's only attempt leaves behind (see the tests above),
    # with the lease already run out.
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_by = 'run:dead',"
        " locked_at = now() - interval '10 minutes', lease_until = now() - interval '1 minute'"
        " where id = %s",
        (job_id,),
    )

    run_pipeline(dsn, [other], trigger="manual")
    run_pipeline(dsn, [paid], trigger="manual")

    assert job(conn, job_id)["status"] == "failed"
    assert gave_up == [job_id]


@pytest.mark.timeout(90)
def test_a_give_up_hook_killed_mid_way_is_fired_again_by_the_sweeper(
    dsn: str, conn: Connection, spawn: Any
) -> None:
    gave_up: list[UUID] = []
    stage = Stage(
        "give_up_killed",
        handler=Seen(),
        max_attempts=1,
        on_give_up=lambda given, error: gave_up.append(given.id),
    )
    job_id = enqueue(conn, stage.name, {}, tenant_id="acme")
    assert job_id is not None

    worker, started = spawn(dsn, stage.name, lease_s=30.0, max_attempts=1, mode="give_up")
    assert started["job_id"] == str(job_id)
    sigkill(worker)  # inside the hook, after the failure committed

    assert (job(conn, job_id)["status"], job(conn, job_id)["give_up_owed"]) == ("failed", True)
    # Within its grace the sweeper leaves the hook to the process; past it, fires it.
    assert sweep(dsn, [stage]).owed_give_ups_fired == 0
    conn.execute(
        "update fairqueue.jobs set finished_at = now() - interval '5 minutes' where id = %s",
        (job_id,),
    )
    assert sweep(dsn, [stage]).owed_give_ups_fired == 1
    assert gave_up == [job_id]
    assert job(conn, job_id)["give_up_owed"] is False
    assert sweep(dsn, [stage]).owed_give_ups_fired == 0
    assert gave_up == [job_id]

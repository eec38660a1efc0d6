"""`fairqueue serve` as a real process: doorbells over LISTEN/NOTIFY, and SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairqueue import connect, enqueue
from fairqueue.doorbells import ringing
from support import serve_stages  # declares the stages' types in this process too

TESTS = Path(__file__).resolve().parents[1]


def wait_for(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail("timed out waiting")


@pytest.fixture
def start(dsn: str, monkeypatch) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    monkeypatch.setenv("FAIRQUEUE_DOORBELLS", "postgres")
    ringing.use_doorbells(None)
    started: list[subprocess.Popen[str]] = []

    def run(role: str, **extra_env: str) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "PYTHONPATH": str(TESTS),
            "FAIRQUEUE_DOORBELLS": "postgres",
            "FAIRQUEUE_STAGES": "support.serve_stages:STAGES",
            **extra_env,
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fairqueue",
                "--database-url",
                dsn,
                "serve",
                "--role",
                role,
                "--cron-interval",
                "0.5",
                "--sweep-interval",
                "0.5",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(process)
        return process

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)
    ringing.use_doorbells(None)


def status(conn, job_id) -> tuple[str, int]:
    row = conn.execute(
        "select status, attempts from fairqueue.all_jobs where id = %s", (job_id,)
    ).fetchone()
    return row["status"], row["attempts"]


def listening(conn) -> bool:
    row = conn.execute(
        # This test's database only: another suite on the server may be listening.
        "select count(*) as n from pg_stat_activity"
        " where datname = current_database() and query ilike 'listen%%'"
    ).fetchone()
    return row["n"] > 0


def test_a_doorbell_over_notify_is_run_by_the_worker_role(start, dsn, conn) -> None:
    process = start("worker")
    wait_for(lambda: listening(conn))
    with connect(dsn) as c:
        job_id = enqueue(c, "serve_bell", {}, tenant_id="t")
    wait_for(lambda: status(conn, job_id) == ("done", 1))
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    runs = conn.execute("select trigger, stop_reason, finished_at from fairqueue.runs").fetchall()
    assert runs and all(r["finished_at"] is not None for r in runs)
    assert {r["trigger"] for r in runs} == {"doorbell"}


def test_sigterm_to_the_worker_finishes_the_doorbell_job_in_flight_and_closes_its_run_row(
    start, dsn, conn, tmp_path: Path
) -> None:
    process = start("worker", TEST_HANDLERS_STARTED_DIR=str(tmp_path))
    wait_for(lambda: listening(conn))
    with connect(dsn) as c:  # one commit: the three doorbells come together
        ids = [enqueue(c, "serve_slow_bell", {"n": n}, tenant_id="t") for n in range(3)]
    wait_for(lambda: any((tmp_path / str(i)).exists() for i in ids))
    process.send_signal(signal.SIGTERM)  # the first handler is mid-sleep
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 0, output
    # One handler at a time: the one in flight finished; the two behind it were given back, or
    # never claimed if their doorbells came after the first's claim, pending either way.
    assert sorted(status(conn, i) for i in ids) == [("done", 1), ("pending", 0), ("pending", 0)]
    [run] = conn.execute("select * from fairqueue.runs").fetchall()
    assert (run["trigger"], run["stop_reason"], run["jobs_done"]) == ("doorbell", "time_budget", 1)
    assert run["finished_at"] is not None
    assert run["summary"]["interrupted"] == "stop requested"


def test_sigterm_finishes_the_job_in_flight_and_gives_back_the_rest(start, conn) -> None:
    ids = [enqueue(conn, "serve_slow", {"n": n}, tenant_id="t") for n in range(4)]
    process = start("cron")
    wait_for(lambda: any(status(conn, i)[0] == "running" for i in ids))
    time.sleep(0.3)  # the first handler is mid-sleep
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 0, output
    states = sorted(status(conn, i) for i in ids)
    assert states == [("done", 1), ("pending", 0), ("pending", 0), ("pending", 0)]
    [run] = conn.execute("select * from fairqueue.runs").fetchall()
    assert run["stop_reason"] == "time_budget"
    assert run["summary"]["interrupted"] == "stop requested"
    assert run["summary"]["stages"]["serve_slow"]["given_back"] == 3
    assert run["jobs_done"] == 1
    # The run's opening and closing are JSON lines, as the functions log them.
    logged = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    opened = [r for r in logged if r["message"] == "run opened"]
    closed = [r for r in logged if r["message"] == "run closed"]
    assert [r["run_id"] for r in opened] == [r["run_id"] for r in closed] == [str(run["id"])]
    assert (closed[0]["stop_reason"], closed[0]["jobs_done"]) == ("time_budget", 1)
    assert closed[0]["service"] == "fairqueue-serve-cron" and closed[0]["level"] == "INFO"


@pytest.mark.parametrize(
    ("second_signal", "grace"), [(True, "60"), (False, "1")], ids=["second_sigterm", "grace"]
)
def test_a_stop_that_would_wait_too_long_aborts_and_leaves_the_job_to_its_lease(
    start, conn, tmp_path: Path, second_signal: bool, grace: str
) -> None:
    job_id = enqueue(conn, "serve_sleepy", {}, tenant_id="t")
    process = start("cron", FAIRQUEUE_STOP_GRACE_S=grace, TEST_HANDLERS_STARTED_DIR=str(tmp_path))
    wait_for(lambda: (tmp_path / str(job_id)).exists())
    process.send_signal(signal.SIGTERM)
    if second_signal:
        time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 128 + signal.SIGTERM, output
    assert "aborted" in output
    # Its handler (30 s) never finished: the job waits for its lease, the run row for the
    # sweeper.
    assert status(conn, job_id) == ("running", 1)
    [run] = conn.execute("select finished_at from fairqueue.runs").fetchall()
    assert run["finished_at"] is None


def test_an_unknown_role_is_refused(dsn, capsys) -> None:
    from fairqueue.cli import main

    assert main(["--database-url", dsn, "serve", "--role", "everything"]) == 2
    assert "must be one of cron, worker, sweeper, backstop, all" in capsys.readouterr().err


def test_sigterm_mid_sweep_leaves_no_result_without_its_hook(start, dsn, conn) -> None:
    from fairqueue.results import ResultSettings
    from fairqueue.roles.backstop import Backstop

    conn.execute("create table public.hook_calls (job_id uuid)")
    conn.execute("grant insert, select on public.hook_calls to public")
    ids = {enqueue(conn, "serve_result", {"n": n}, tenant_id="t") for n in range(6)}
    conn.execute(
        "update fairqueue.jobs set status = 'done', output = '{\"n\": 1}',"
        " finished_at = now() - interval '1 minute'"
    )
    process = start("backstop", FAIRQUEUE_RESULT_GRACE_S="0.2", FAIRQUEUE_RESULT_BATCH="2")

    def hooks() -> list:
        return [r["job_id"] for r in conn.execute("select job_id from public.hook_calls")]

    wait_for(lambda: len(hooks()) >= 1)
    process.send_signal(signal.SIGTERM)  # mid-batch: the batch's second hook is still sleeping
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 0, output
    results = conn.execute("select job_id, hook_fired_at from fairqueue.results").fetchall()
    # It finished what it recorded: every row it wrote has had its hook, and it stopped there.
    assert 2 <= len(results) < 6
    assert all(r["hook_fired_at"] is not None for r in results)
    assert sorted(hooks()) == sorted(r["job_id"] for r in results)
    # What it left is the next sweep's, each result and hook once.
    Backstop(dsn, serve_stages.STAGES, ResultSettings(grace_s=0.2)).rescue()
    assert sorted(hooks()) == sorted(ids)
    assert conn.execute("select count(*) as n from fairqueue.results").fetchone()["n"] == 6

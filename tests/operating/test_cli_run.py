"""`fairqueue run` (what `make run` calls) as a real process, with the user's own stages: a row
per run with the drain's progress, and an abort that closes the run row and gives back the jobs
that never started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from fairqueue import enqueue
from fairqueue.db import Connection
from fairqueue.pipeline.run import ABORTED
from support import serve_stages  # noqa: F401 - declares the stages' types in this process too

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def start_run(dsn: str, *extra: str, started: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fairqueue",
            "run",
            "--database-url",
            dsn,
            "--stages",
            "support.serve_stages:RUN_STAGES",
            "--no-seed",
            "--interval",
            "0.2",
            *extra,
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(TESTS),
            **({"TEST_HANDLERS_STARTED_DIR": str(started)} if started else {}),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def statuses(conn: Connection) -> dict[str, list[tuple[str, int]]]:
    rows = conn.execute(
        "select type, status, attempts from fairqueue.all_jobs order by type, status"
    ).fetchall()
    found: dict[str, list[tuple[str, int]]] = {}
    for row in rows:
        found.setdefault(row["type"], []).append((row["status"], row["attempts"]))
    return found


@pytest.mark.timeout(60)
def test_run_drains_the_users_stages_showing_what_is_left_after_each_run(
    admin_dsn: str, conn: Connection
) -> None:
    # `run` migrates first: it runs as the schema's owner.
    for n in range(7):
        enqueue(conn, "run_quick", {"n": n}, tenant_id="t")
    process = start_run(admin_dsn)
    output, _ = process.communicate(timeout=45)
    assert process.returncode == 0, output
    lines = output.splitlines()
    header = next(line for line in lines if line.startswith("started"))
    assert header.split()[-1] == "open"
    rows = [line.split() for line in lines if line[:4].isdigit()]
    assert rows and rows[-1][-1] == "0"
    assert sum(int(row[4]) for row in rows) == 7  # done, across the runs
    assert statuses(conn) == {"run_quick": [("done", 1)] * 7}
    assert conn.execute(
        "select count(*) as n from fairqueue.runs where finished_at is null"
    ).fetchone() == {"n": 0}


@pytest.mark.timeout(60)
def test_a_second_ctrl_c_aborts_at_once_closing_the_row_and_giving_back_the_unstarted(
    admin_dsn: str, conn: Connection, tmp_path: Path
) -> None:
    for n in range(4):
        enqueue(conn, "run_sleepy", {"n": n}, tenant_id="t")
    process = start_run(admin_dsn, started=tmp_path)
    # Two handlers start (concurrency 2) and sleep for 30 s; the other two jobs wait.
    deadline = time.monotonic() + 30
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(list(tmp_path.iterdir())) == 2, "the two handlers did not start"
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    # Well inside the handlers' 30 s: an abort does not wait for them.
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 130, output
    assert "aborted" in output
    [run] = conn.execute("select * from fairqueue.runs").fetchall()
    assert (run["stop_reason"], run["error"]) == ("error", ABORTED)
    assert run["finished_at"] is not None
    assert run["summary"]["stages"]["run_sleepy"]["given_back"] == 2
    assert statuses(conn) == {"run_sleepy": [("pending", 0)] * 2 + [("running", 1)] * 2}


@pytest.mark.timeout(60)
def test_production_with_the_users_stages_never_loads_the_example(
    production_dsn: str, conn: Connection
) -> None:
    # The example's stand-in upstream refuses production at import: were the example loaded,
    # each command would fail.
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS),
        "FAIRQUEUE_ENV": "production",
        "DATABASE_URL": production_dsn,
        "FAIRQUEUE_STAGES": "support.serve_stages:RUN_STAGES",
    }
    env.pop("FAIRQUEUE_UPSTREAM_URL", None)

    def fairqueue(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "fairqueue", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    job_id = fairqueue("enqueue", "run_quick", '{"n": 1}', "--tenant", "t").strip()
    fairqueue("tick")
    shown = dict(line.split(":", 1) for line in fairqueue("jobs", "show", job_id).splitlines())
    assert shown["status"].strip() == "done"
    assert statuses(conn) == {"run_quick": [("done", 1)]}


def test_the_example_is_not_seeded_over_open_work_and_the_run_says_so(
    admin_dsn: str, conn: Connection
) -> None:
    from fairqueue.dev import example  # noqa: F401 - declares the example's types here

    # An open job, not due for an hour: the queue counts as drained at once.
    enqueue(conn, "ingest", {"doc": "mine.pdf"}, tenant_id="acme", run_after=timedelta(hours=1))
    env = {**os.environ}
    env.pop("FAIRQUEUE_STAGES", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fairqueue",
            "run",
            "--database-url",
            admin_dsn,
            "--interval",
            "0.1",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        "did not enqueue the example workload: the queue holds 1 open job(s) from earlier; this"
        " run drains them, and the tables at the end count only what it did (seeding starts"
        " again once the queue is empty)"
    )
    assert conn.execute("select count(*) as n from fairqueue.all_jobs").fetchone() == {"n": 1}

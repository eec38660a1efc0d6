"""kill -9 of pipeline processes at random points of a drain: no job lost, each job's writes
through job.conn exactly once, every run row closed by its process or by the sweeper."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairqueue import NewJob, enqueue_many, run_pipeline
from fairqueue.db import Connection
from fairqueue.roles.sweeper import sweep
from support.drain_worker import stage as drain_stage

WORKER = Path(__file__).resolve().parents[1] / "support" / "drain_worker.py"
JOBS = 400
KILLS = 6


@pytest.fixture
def effects(conn: Connection):
    conn.execute("create table public.effects (job_id uuid not null, attempt integer not null)")
    conn.execute("grant select, insert on public.effects to fairqueue_app")
    yield
    conn.execute("drop table public.effects")


@pytest.mark.timeout(180)
def test_kill_9_at_random_points_loses_nothing_and_writes_each_job_once(
    dsn: str, conn: Connection, effects: None
) -> None:
    stage = drain_stage("kill_drain")
    with conn.transaction():
        made = enqueue_many(conn, stage.name, [NewJob({"n": n}) for n in range(JOBS)])
    ids = {m.job_id for m in made}
    chance = random.Random(os.getpid())
    kills = 0
    for _ in range(KILLS):
        process = subprocess.Popen(
            [sys.executable, str(WORKER), dsn, stage.name],
            env={**os.environ, "PYTHONPATH": str(WORKER.parent)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(chance.uniform(0.3, 1.2))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait(timeout=30)
    assert kills > 0

    # What the killed processes held comes back after its lease; drain the rest here.
    deadline = time.monotonic() + 120
    while conn.execute(
        "select count(*) as n from fairqueue.jobs where type = %s and status <> 'done'",
        (stage.name,),
    ).fetchone()["n"]:
        assert time.monotonic() < deadline, "the drain never finished"
        run_pipeline(dsn, [stage])
        time.sleep(0.2)

    done = conn.execute(
        "select id, status from fairqueue.all_jobs where type = %s", (stage.name,)
    ).fetchall()
    assert {r["id"] for r in done} == ids
    assert {r["status"] for r in done} == {"done"}
    effects_by_job = conn.execute(
        "select job_id, count(*) as n from public.effects group by job_id"
    ).fetchall()
    assert {r["job_id"] for r in effects_by_job} == ids
    assert [r for r in effects_by_job if r["n"] != 1] == []

    # The killed runs' rows stay open until they are older than any invocation lives.
    killed_open = conn.execute(
        "select count(*) as n from fairqueue.runs where finished_at is null"
    ).fetchone()["n"]
    assert killed_open > 0, "no process was killed mid-run"
    conn.execute(
        "update fairqueue.runs set started_at = now() - interval '1 hour' where finished_at is null"
    )
    sweep(dsn, [stage])
    assert (
        conn.execute(
            "select count(*) as n from fairqueue.runs where finished_at is null"
        ).fetchone()["n"]
        == 0
    )

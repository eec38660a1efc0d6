"""Stages for test_serve.py, loaded by the `fairqueue serve` subprocess (FAIRQUEUE_STAGES)."""

import os
import time
from pathlib import Path
from typing import Any

import psycopg

from fairqueue import Job, Stage
from fairqueue.results import Result


def slow(job: Job) -> None:
    time.sleep(1.0)


def sleepy(job: Job) -> None:
    # A test waits for these marks to know the handler runs (a claimed job's status says
    # running before its handler starts).
    started = os.environ.get("TEST_HANDLERS_STARTED_DIR")
    if started:
        (Path(started) / str(job.id)).touch()
    time.sleep(30.0)


def slow_bell(job: Job) -> None:
    started = os.environ.get("TEST_HANDLERS_STARTED_DIR")
    if started:
        (Path(started) / str(job.id)).touch()
    time.sleep(1.0)


def slow_hook(result: Result, conn: psycopg.Connection[Any]) -> None:
    conn.execute("insert into public.hook_calls (job_id) values (%s)", (result.job_id,))
    time.sleep(0.5)


STAGES = [
    Stage("serve_bell", handler=lambda job: None, delivery="doorbell"),
    Stage("serve_slow_bell", handler=slow_bell, delivery="doorbell", job_timeout_s=5),
    Stage("serve_slow", handler=slow, batch=4, concurrency=1, job_timeout_s=2),
    Stage("serve_sleepy", handler=sleepy, batch=1),
    Stage(
        "serve_result",
        handler=lambda job: {"n": 1},
        render_result=lambda output: {"rendered": output["n"]},
        after_result=slow_hook,
    ),
]

# For test_cli_run.py: `fairqueue run` with the user's own stages.
RUN_STAGES = [
    Stage("run_quick", handler=lambda job: None, batch=3),
    Stage("run_sleepy", handler=sleepy, batch=4, concurrency=2),
]

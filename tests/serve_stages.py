"""Stages for test_serve.py, loaded by the `fairqueue serve` subprocess (FAIRQUEUE_STAGES)."""

import time

from fairqueue import Job, Stage


def slow(job: Job) -> None:
    time.sleep(1.0)


STAGES = [
    Stage("serve_bell", handler=lambda job: None, delivery="doorbell"),
    Stage("serve_slow", handler=slow, batch=4, concurrency=1, job_timeout_s=2),
]

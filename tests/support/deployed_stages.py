"""Stages for the functions-as-deployed tests that the example has no use for (the template's
StagesSpec set to deployed_stages:STAGES): a doorbell stage whose jobs each take a while."""

from __future__ import annotations

import threading
import time
from uuid import UUID

from fairqueue import Job, Stage

SLOW_JOB_S = 1.0
STARTED: list[UUID] = []
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        STARTED.clear()


def slow(job: Job) -> None:
    with _lock:
        STARTED.append(job.id)
    time.sleep(SLOW_JOB_S)


STAGES = [Stage("slow_bell", handler=slow, delivery="doorbell")]

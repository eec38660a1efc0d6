"""The doorbell stage the doorbell bench runs (``FAIRQUEUE_STAGES=bench.doorbell_stage:STAGES``).

Its handler's first line takes the time, which it appends with the job's id to the file
``BENCH_DOORBELL_STARTS`` names: ``time.monotonic`` is the machine's one monotonic clock, so the
bench compares it with the enqueuer's across processes. Imported without the variable (by the
enqueuing process), it only declares the stage.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TextIO

from fairqueue import Job, Stage

STARTS_VARIABLE = "BENCH_DOORBELL_STARTS"
JOB_TYPE = "bench_bell"
# A batch as big as the drains' (bench/throughput.py), one handler at a time: a no-op handler
# gains nothing from threads.
BATCH = 100

_lock = threading.Lock()
_starts: TextIO | None = None


def started(job: Job) -> None:
    at = time.monotonic()
    global _starts
    with _lock:
        if _starts is None:
            # Line-buffered: each start is in the file once its handler returns.
            _starts = open(os.environ[STARTS_VARIABLE], "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        _starts.write(f"{job.id} {at!r}\n")


STAGES = [Stage(JOB_TYPE, handler=started, delivery="doorbell", batch=BATCH)]

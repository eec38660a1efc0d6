"""A pipeline process for tests/faults/test_kill.py to kill at random points: it drains a stage
whose handler writes one row per attempt through job.conn, run after run, until nothing is left.

    python tests/drain_worker.py DSN JOB_TYPE

Not a test module: pytest collects only test_*.py.
"""

from __future__ import annotations

import sys
import time

from fairqueue import Job, Stage, run_pipeline


def write(job: Job) -> None:
    assert job.conn is not None
    job.conn.execute("insert into public.effects values (%s, %s)", (job.id, job.attempts))
    time.sleep(0.005)


def stage(job_type: str) -> Stage:
    return Stage(job_type, handler=write, batch=10, lease_s=1.0, max_attempts=50)


def main(argv: list[str]) -> int:
    dsn, job_type = argv
    drained = stage(job_type)
    while run_pipeline(dsn, [drained], trigger="kill-drain").stop_reason != "no_work":
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

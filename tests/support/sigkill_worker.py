"""A pipeline process for test_sigkill.py to kill: it claims a job and hangs in the handler.

    python tests/sigkill_worker.py DSN JOB_TYPE READY_FILE LEASE_S MAX_ATTEMPTS [give_up]

The handler writes READY_FILE (JSON: job id, attempts, pid) once it holds the job, then sleeps
until it is killed. With ``give_up`` the handler fails instead, and the stage's give-up hook
writes READY_FILE and sleeps. Not a test module: pytest collects only test_*.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from fairqueue import Job, Stage, run_pipeline


def main(argv: list[str]) -> int:
    dsn, job_type, ready_file, lease_s, max_attempts, *mode = argv
    ready = Path(ready_file)

    def hang(job: Job, *_error: str) -> None:
        partial = ready.with_suffix(".partial")
        partial.write_text(
            json.dumps({"job_id": str(job.id), "attempts": job.attempts, "pid": os.getpid()})
        )
        partial.rename(ready)  # appears whole or not at all
        while True:
            time.sleep(3600)

    def fail(job: Job) -> None:
        raise RuntimeError("failed for the test")

    in_hook = mode == ["give_up"]
    stage = Stage(
        job_type,
        handler=fail if in_hook else hang,
        on_give_up=hang if in_hook else None,
        lease_s=float(lease_s),
        max_attempts=int(max_attempts),
    )
    run_pipeline(dsn, [stage], trigger="sigkill-worker")
    return 3  # only reached if the handler returned, which it never should


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

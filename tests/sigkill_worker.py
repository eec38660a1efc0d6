"""A pipeline process for test_sigkill.py to kill: it claims a job and hangs in the handler.

    python tests/sigkill_worker.py DSN JOB_TYPE READY_FILE LEASE_S MAX_ATTEMPTS

The handler writes READY_FILE (JSON: job id, attempts, pid) once it holds the job, then sleeps
until it is killed. Not a test module: pytest collects only test_*.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from fairqueue import Job, Stage, run_pipeline


def main(argv: list[str]) -> int:
    dsn, job_type, ready_file, lease_s, max_attempts = argv
    ready = Path(ready_file)

    def hang(job: Job) -> None:
        partial = ready.with_suffix(".partial")
        partial.write_text(
            json.dumps({"job_id": str(job.id), "attempts": job.attempts, "pid": os.getpid()})
        )
        partial.rename(ready)  # appears whole or not at all
        while True:
            time.sleep(3600)

    stage = Stage(job_type, handler=hang, lease_s=float(lease_s), max_attempts=int(max_attempts))
    run_pipeline(dsn, [stage], trigger="sigkill-worker")
    return 3  # only reached if the handler returned, which it never should


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""One database holding the example's workload and one ``fairqueue serve --role dashboard``
process over it, shared by a test module; and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from fairqueue import enqueue, run_pipeline
from fairqueue.db import Connection, connect
from fairqueue.dev.example import STAGES, seed_workload
from support import jobs_stages
from support.dashboard import HOSTILE, SECRET, chromium_or_skip
from support.databases import ROOT, cloned_database

# The dashboard test's own workload beside the example's: a failed job to retry, an open one
# to cancel, and a tenant and group whose labels are markup.
FAILING_GROUP = "doomed-group"


@pytest.fixture(scope="module")
def board_admin_dsn(server_dsn: str, template_db: Any) -> Iterator[str]:
    """A migrated database for the module, as the server's superuser."""
    name = f"fq_dashboard_{uuid.uuid4().hex[:12]}"
    with cloned_database(server_dsn, name, template_db.current) as dsn:
        yield dsn


@pytest.fixture(scope="module")
def board_db(board_admin_dsn: str) -> str:
    """The example's workload, one run of it, a failed job, an open one and hostile labels;
    returns the application role's DSN."""
    app_dsn = psycopg.conninfo.make_conninfo(board_admin_dsn, options="-c role=fairqueue_app")
    with connect(board_admin_dsn, autocommit=True) as conn:
        seed_workload(conn)
    run_pipeline(app_dsn, STAGES)
    with connect(board_admin_dsn, autocommit=True) as conn:
        enqueue(conn, "doomed", {"n": 1}, tenant_id="acme", group_id=FAILING_GROUP)
        enqueue(conn, "doomed", {"n": 2}, tenant_id=HOSTILE, group_id=HOSTILE)
    run_pipeline(app_dsn, [jobs_stages.DOOMED])
    with connect(board_admin_dsn, autocommit=True) as conn:
        # The finished jobs leave the hot table, as retention moves them: the pages read both.
        conn.execute("select fairqueue.move_finished(100000, interval '1 s')")
    with connect(board_admin_dsn, autocommit=True) as conn:
        enqueue(conn, "ingest", {"doc": HOSTILE}, tenant_id=HOSTILE, group_id=HOSTILE)
        enqueue(conn, "ingest", {"doc": "to-cancel"}, tenant_id="globex", group_id="cancel-me")
        # The example retries some jobs seconds later: put them an hour off, so that a job does
        # not come due between a page and the SQL it is compared with.
        conn.execute(
            "update fairqueue.jobs set run_after = now() + interval '1 hour'"
            " where status = 'pending' and run_after > now()"
        )
    return app_dsn


@pytest.fixture(scope="module")
def board_url(board_db: str) -> Iterator[str]:
    """A dashboard server process over the module's database; its URL."""
    env = {
        **os.environ,
        "FAIRQUEUE_DASHBOARD_SECRET": SECRET,
        "FAIRQUEUE_DASHBOARD_PORT": "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "layers" / "fairqueue"), str(ROOT / "tests")]),
    }
    for name in ("FAIRQUEUE_STAGES", "FAIRQUEUE_ROLE", "FAIRQUEUE_POOLER"):
        env.pop(name, None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fairqueue",
            "--database-url",
            board_db,
            "serve",
            "--role",
            "dashboard",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    url = None
    seen: list[str] = []
    for line in process.stderr:
        seen.append(line)
        found = re.search(r"the dashboard listens on (http://\S+)", line)
        if found:
            url = found[1]
            break
    if url is None:
        process.kill()
        pytest.fail("the dashboard did not start:\n" + "".join(seen))
    # The rest of its stderr is read as it comes, so a full pipe never stalls the server.
    drain = threading.Thread(target=seen.extend, args=(process.stderr,), daemon=True)
    drain.start()
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=20)
            drain.join(timeout=20)
            process.stderr.close()


@pytest.fixture(scope="module")
def board_conn(board_admin_dsn: str) -> Iterator[Connection]:
    """A superuser connection to the module's database, to compare the pages with."""
    with connect(board_admin_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless."""
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(executable))
        yield launched
        launched.close()

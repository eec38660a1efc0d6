"""``fairqueue top``: one view with --once, and the live view until Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from fairqueue import enqueue, run_pipeline
from fairqueue.cli import main
from fairqueue.db import Connection
from fairqueue.groups import pause_group
from support import jobs_stages


def test_once_shows_types_runs_and_the_most_and_least_served_groups(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    for _ in range(3):
        enqueue(conn, "looked_at", {}, tenant_id="acme", group_id="busy")
    run_pipeline(dsn, [jobs_stages.LOOKED_AT])
    enqueue(conn, "looked_at", {}, tenant_id="acme", group_id="busy")
    enqueue(conn, "looked_at", {}, tenant_id="zed", group_id="fresh")
    enqueue(conn, "looked_at", {}, tenant_id="zed", group_id="held")
    pause_group(conn, "held", tenant_id="zed")

    assert main(["--database-url", dsn, "top", "--once"]) == 0
    lines = capsys.readouterr().out.splitlines()
    cells = [[c.strip() for c in line.split("│") if c.strip()] for line in lines]
    assert ["looked_at", "0", "3", "0", "0", "0", "0", "3"] in cells
    (run,) = [c for c in cells if "manual" in c]
    assert run[2:6] == ["no_work", "3", "0", "0"]
    groups = [c for c in cells if any("/" in x for x in c)]
    # Side by side: most served on the left (the busy group, waiting again), least served with
    # due work on the right, fewest first; the paused group is on neither side.
    assert groups[0][:3] == ["looked_at", "acme/busy", "3"]
    assert [g[-3:] for g in groups] == [
        ["looked_at", "zed/fresh", "0"],
        ["looked_at", "acme/busy", "3"],
    ]
    assert not any("zed/held" in line for line in lines)


def test_the_live_view_redraws_until_ctrl_c_and_exits_0(dsn: str, conn: Connection) -> None:
    enqueue(conn, "looked_at", {}, tenant_id="acme")
    top = subprocess.Popen(
        [sys.executable, "-m", "fairqueue", "--database-url", dsn, "top", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120"},
    )
    try:
        time.sleep(3)
        assert top.poll() is None, top.stderr.read() if top.stderr else ""
        top.send_signal(signal.SIGINT)
        out, err = top.communicate(timeout=20)
    finally:
        top.kill()
    assert top.returncode == 0, err
    assert b"jobs by type" in out
    assert b"Traceback" not in err


@pytest.mark.parametrize("interval", ["0", "-1", "soon"])
def test_an_interval_out_of_range_is_refused(
    dsn: str, capsys: pytest.CaptureFixture[str], interval: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--database-url", dsn, "top", "--interval", interval])
    assert exited.value.code == 2
    assert "--interval" in capsys.readouterr().err

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


def test_once_in_80x24_shows_types_the_fairness_panels_and_runs(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    for _ in range(3):
        enqueue(conn, "looked_at", {}, tenant_id="initech", group_id="initech/busy")
    run_pipeline(dsn, [jobs_stages.LOOKED_AT])
    enqueue(conn, "looked_at", {}, tenant_id="initech", group_id="initech/busy")
    enqueue(conn, "looked_at", {}, group_id="system/busy")
    enqueue(conn, "looked_at", {}, tenant_id="t1")
    enqueue(conn, "looked_at", {}, tenant_id="zed", group_id="held")
    pause_group(conn, "held", tenant_id="zed")

    assert main(["--database-url", dsn, "top", "--once"]) == 0
    lines = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert max(len(line) for line in lines) <= 80
    # What a 24-line terminal holds: the types and both fairness panels, whole.
    screen = lines[:24]
    cells = [[c.strip() for c in line.split("│") if c.strip()] for line in screen]
    assert ["looked_at", "0", "4", "0", "0", "0", "0", "3"] in cells
    most = screen.index("most served (day)")
    least = screen.index("least served, work waiting")
    rows = [line.split(None, 3) for line in screen]
    # Most served: the busy group of initech (named as it was given), waiting again.
    assert rows[most + 3] == ["looked_at", "initech", "initech/busy", "3"]
    # Least served with due work, fewest first: the default group of t1 and the group with
    # no tenant (the oldest first among equals), then the busy one; the paused group is on
    # neither side.
    assert [line.split() for line in screen[least + 3 : least + 6]] == [
        ["looked_at", "(no", "tenant)", "system/busy", "0"],
        ["looked_at", "t1", "(default", "group)", "0"],
        ["looked_at", "initech", "initech/busy", "3"],
    ]
    assert not any("held" in line for line in lines)
    # The runs come last: what a small terminal loses first.
    (run,) = [
        [c.strip() for c in line.split("│") if c.strip()] for line in lines if "manual" in line
    ]
    assert run[2:6] == ["no_work", "3", "0", "0"]
    assert lines.index("last runs") > least


def test_in_24_lines_each_panel_keeps_the_groups_that_fit_whole(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    # Five types, as the example has, and more groups than a panel holds.
    for stage in jobs_stages.JOBS_STAGES[:5]:
        for n in range(6):
            enqueue(conn, stage.name, {}, tenant_id="acme", group_id=f"g{n}")

    assert main(["--database-url", dsn, "top", "--once"]) == 0
    lines = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    most, least = lines.index("most served (day)"), lines.index("least served, work waiting")
    runs = lines.index("last runs")
    # The types take 5 lines and a row each; nothing was served yet, so the most served panel
    # is its title, header and rule; the least served one keeps 4 of its 30 groups, oldest
    # first, and ends within the 24 lines.
    assert (most, least, runs) == (10, 13, 20)
    assert [line.split()[::2] for line in lines[least + 3 : runs]] == [
        ["looked_at", f"g{n}"] for n in range(4)
    ]


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

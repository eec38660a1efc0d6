"""The embedded Postgres never outlives its users: a `fairqueue serve` that is aborted (two
quick SIGTERMs) gives its hold back as it ends; one that is killed leaves its pid among the
server's holders, and the next command drops it before joining, so the last live user stops the
server as it exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairqueue.dev.embedded import HOLDERS_FILE

TESTS = Path(__file__).resolve().parents[1]


def development_env() -> dict[str, str]:
    """No database named: every command below uses the embedded Postgres in ./.pgdata."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FAIRQUEUE_", "DATABASE_"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env["FAIRQUEUE_STAGES"] = "support.serve_stages:STAGES"
    return env


def fairqueue(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairqueue", *args],
        cwd=folder,
        env=development_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def start_serving(folder: Path) -> subprocess.Popen[str]:
    """`fairqueue serve --role cron`, returned once its signal handlers are in place."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fairqueue", "serve", "--role", "cron", "--cron-interval", "0.2"],
        cwd=folder,
        env={**development_env(), "TEST_HANDLERS_STARTED_DIR": str(folder)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    read_until(process, "fairqueue serve: role cron")
    return process


def wait_for_handler(mark: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not mark.exists():
        if time.monotonic() > deadline:
            pytest.fail("the handler never started")
        time.sleep(0.1)


def read_until(process: subprocess.Popen[str], text: str) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        if text in line:
            return
    pytest.fail(f"serve ended before it said {text!r} (exit {ended(process)})")


def ended(process: subprocess.Popen[str]) -> int:
    """The process's exit status once it has ended, its pipe read and closed; what it said
    last is passed on to the test's own standard error, which pytest shows when it fails."""
    _, said = process.communicate(timeout=60)
    print(said[-3000:], file=sys.stderr)
    return process.returncode


def holders(data: Path) -> list[int]:
    path = data / HOLDERS_FILE
    return json.loads(path.read_text()) if path.exists() else []


def postmaster(data: Path) -> int | None:
    """The running server's pid, from its postmaster.pid; None when no server runs there."""
    path = data / "postmaster.pid"
    if not path.exists():
        return None
    pid = int(path.read_text().splitlines()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def postgres_processes(data: Path) -> list[int]:
    """Every process on the machine whose command line names the data folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(data) in command and "postgres" in command:
            found.append(int(entry.name))
    return found


def wait_until_stopped(data: Path, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while postmaster(data) is not None or postgres_processes(data):
        if time.monotonic() > deadline:
            pytest.fail(f"a postgres for {data} still runs: {postgres_processes(data)}")
        time.sleep(0.1)


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder of the test's own, outside pytest's (which pytest makes private to root at the
    start of every session, where the server's own system user could no longer reach it).
    Whatever the test's outcome, no server of it outlives the test (a fast shutdown)."""
    with tempfile.TemporaryDirectory(prefix="fairqueue-holders-") as made:
        yield Path(made)
        pid = postmaster(Path(made) / ".pgdata")
        if pid is not None:
            os.kill(pid, signal.SIGINT)
            time.sleep(1)


@pytest.mark.timeout(300)
def test_an_aborted_or_killed_serve_does_not_keep_the_embedded_server(folder: Path) -> None:
    data = (folder / ".pgdata").resolve()
    migrated = fairqueue(folder, "migrate")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    wait_until_stopped(data)  # the migrate was the only user

    # Two quick SIGTERMs while a handler runs: the second aborts at once, with no exit
    # handlers run.
    enqueued = fairqueue(folder, "enqueue", "serve_sleepy", "{}", "--tenant", "t1")
    assert enqueued.returncode == 0, enqueued.stderr[-3000:]
    aborted = start_serving(folder)
    wait_for_handler(folder / enqueued.stdout.strip())
    assert holders(data) == [aborted.pid]
    assert postmaster(data) is not None
    aborted.send_signal(signal.SIGTERM)
    read_until(aborted, "again to abort")  # two signals sent at once may arrive as one
    aborted.send_signal(signal.SIGTERM)
    assert ended(aborted) == 128 + signal.SIGTERM
    # The abort gave its hold back before it ended: it was the last user, so the server stops.
    assert holders(data) == []
    wait_until_stopped(data)

    # kill -9: nothing of the process runs at all, and its hold stays behind.
    killed = start_serving(folder)
    killed.kill()
    assert ended(killed) == -signal.SIGKILL
    assert holders(data) == [killed.pid]
    assert postmaster(data) is not None
    status = fairqueue(folder, "status")
    assert status.returncode == 0, status.stderr[-3000:]
    # The dead holder was dropped before the join, so the status was the last user and stopped
    # the server on its way out.
    assert holders(data) == []
    wait_until_stopped(data)

    # A command that joins while another user lives leaves the server to that user.
    living = start_serving(folder)
    assert holders(data) == [living.pid]
    status = fairqueue(folder, "status")
    assert status.returncode == 0, status.stderr[-3000:]
    assert holders(data) == [living.pid]
    assert postmaster(data) is not None
    living.send_signal(signal.SIGTERM)
    assert ended(living) == 0
    assert holders(data) == []
    wait_until_stopped(data)

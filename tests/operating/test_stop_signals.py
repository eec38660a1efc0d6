"""An abort runs once. The signals that come while it works (the grace running out, an
operator's third Ctrl-C) are ignored, not handled inside it: a serve's abort gives back its
hold on the embedded Postgres under the wheel's lock, and a second abort begun in the middle
of that once read the holders' file half written and ended the process with status 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# Stops on signals as `fairqueue serve` does, with an abort that takes a while, as a serve's
# abort does when another process holds the embedded server's lock.
ABORTS_SLOWLY = textwrap.dedent(
    """
    import os, sys, threading, time
    from fairqueue.roles.stopping import say, stop_on_signals

    def abort(signum):
        say(f"abort begins on {signum}")
        time.sleep(1.5)
        say("abort ends")
        os._exit(128 + signum)

    stop = threading.Event()
    stop_on_signals(stop, "stopping", abort)
    say("ready")
    threading.Event().wait(60)
    """
)


def next_line(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    return process.stderr.readline().strip()


@pytest.mark.timeout(60)
def test_signals_during_an_abort_neither_abort_again_nor_cut_it_short() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", ABORTS_SLOWLY],
        env={**os.environ, "FAIRQUEUE_STOP_GRACE_S": "0.5"},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert next_line(process) == "ready"
    process.send_signal(signal.SIGTERM)
    assert next_line(process) == ""
    assert next_line(process).startswith("stopping (again to abort")
    process.send_signal(signal.SIGINT)
    assert next_line(process) == f"abort begins on {int(signal.SIGINT)}"
    # Inside the abort: the grace's own signal would have come at 0.5 s, and an operator's.
    time.sleep(0.7)
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=30)
    assert rest.splitlines() == ["abort ends"]
    assert process.returncode == 128 + signal.SIGINT

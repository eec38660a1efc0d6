"""Stop requests for the local runners, ``fairqueue run`` and ``fairqueue serve``.

The first SIGINT or SIGTERM asks the work in flight to finish (the job whose handler runs, then
the run row); the rest of a claimed batch is given back. A second signal, or the first one's
grace running out (``FAIRQUEUE_STOP_GRACE_S``, 25 s: inside the 30 s most container platforms
allow between SIGTERM and SIGKILL), aborts at once: ``fairqueue run`` gives back the jobs whose
handlers had not started and closes its run row as aborted; ``fairqueue serve`` ends the process,
its open run rows left to the sweeper. Jobs whose handlers had started are left to their leases.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

from ..settings import settings


def stop_on_signals(stop: threading.Event, announce: str, abort: Callable[[int], None]) -> None:
    """Set ``stop`` on the first SIGINT or SIGTERM and print ``announce``; call ``abort`` with
    the signal's number on the main thread at a second one or when the grace runs out. Once
    the abort has begun, later signals are ignored: it ends the process."""
    grace_s = settings().stop_grace_s
    aborting = threading.Event()
    grace: list[threading.Timer] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if aborting.is_set():
            # An abort is under way and ends the process. Handled again inside it (the grace
            # running out while the abort waits for the embedded server's lock), a second abort
            # would interleave with the first's half-done work.
            return
        if stop.is_set():
            aborting.set()
            for timer in grace:
                timer.cancel()
            abort(signum)
            return
        # Set before the announcement: a second signal sent as soon as it is read may be
        # handled before this handler's next line, and must find the stop already asked for.
        stop.set()
        say(f"\n{announce} (again to abort; aborts by itself after {grace_s:g} s)")
        # The grace ends as if the signal came again: a real one, which also wakes a main
        # thread blocked waiting for its roles' threads.
        timer = threading.Timer(grace_s, os.kill, args=(os.getpid(), signum))
        timer.daemon = True
        timer.start()
        grace.append(timer)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def say(line: str) -> None:
    """Write ``line`` to standard error from a signal handler, straight to the descriptor: the
    handler runs on the main thread wherever that thread is, and a write to the buffered
    ``sys.stderr`` from inside another may fail as a "reentrant call"."""
    with contextlib.suppress(OSError):  # no standard error left to tell
        os.write(sys.stderr.fileno(), f"{line}\n".encode())

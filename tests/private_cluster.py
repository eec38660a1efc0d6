"""A Postgres cluster of a test's own, from the embedded Postgres's binaries, that the test may
restart: faults are never injected into the shared server."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# pgserver reads it at import; as fairqueue.embedded does, give it a private one when unset.
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="fairqueue-xdg-"))

import pgserver


@dataclass
class Cluster:
    server: Any  # pgserver.PostgresServer
    pgdata: Path

    @property
    def dsn(self) -> str:
        return str(self.server.get_uri())

    def restart(self) -> None:
        """A fast restart: every connection is cut, the server is back once this returns."""
        pgserver.pg_ctl(
            ["-w", "-m", "fast", "restart"],
            pgdata=self.pgdata,
            user=self.server.system_user,
            timeout=60,
        )


@contextmanager
def private_cluster(folder: Path) -> Iterator[Cluster]:
    """A fresh cluster in ``folder``, stopped and deleted afterwards."""
    pgdata = folder / "pgdata"
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield Cluster(server, pgdata)
    finally:
        server.cleanup()

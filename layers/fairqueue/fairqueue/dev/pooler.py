"""A PgBouncer in transaction mode on this machine, for development, tests and the benchmark:
what a transaction pooler in front of the database changes for the library, tried locally.

Like the embedded Postgres (``fairqueue.dev.embedded``) it is tooling, never used in production.
It needs Debian's ``pgbouncer`` package (or the program on ``PATH``); where it cannot run,
:class:`PoolerUnavailable` says why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import FairqueueError

# The login the library uses through the pooler: a member of fairqueue_app that row-level
# security holds, so nothing needs a session SET ROLE (the pooler cannot pass `-c role=`).
POOLED_LOGIN: Final = "fairqueue_pooled"
START_TIMEOUT_S: Final = 15.0


class PoolerUnavailable(FairqueueError):
    """PgBouncer cannot stand in front of this server here; the message says why."""


def executable() -> str | None:
    """PgBouncer's program: on ``PATH``, or where Debian's package puts it."""
    found = shutil.which("pgbouncer")
    if found:
        return found
    debian = Path("/usr/sbin/pgbouncer")
    return str(debian) if debian.exists() else None


def why_not(server_dsn: str | None) -> str | None:
    """Why PgBouncer cannot stand in front of this server here, or None when it can."""
    if executable() is None:
        return "PgBouncer is not installed (Debian: apt-get install pgbouncer)"
    host = str(conninfo_to_dict(server_dsn).get("host") or "") if server_dsn else ""
    if os.geteuid() == 0 and (not host or host.startswith("/")):
        # PgBouncer refuses root and drops to nobody, who cannot reach a socket in the embedded
        # server's private data folder.
        return "as root it needs a server reached over TCP (DATABASE_URL), not a Unix socket"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def create_login(server_dsn: str) -> None:
    """The pooled login, once per server (roles are the cluster's)."""
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        exists = admin.execute("select 1 from pg_roles where rolname = %s", (POOLED_LOGIN,))
        if exists.fetchone() is None:
            admin.execute(
                sql.SQL("create role {} login in role fairqueue_app").format(
                    sql.Identifier(POOLED_LOGIN)
                )
            )


@contextmanager
def pgbouncer(
    server_dsn: str, *, server_connections: int = 20, logins: Sequence[str] = (POOLED_LOGIN,)
) -> Iterator[tuple[str, int]]:
    """A PgBouncer in transaction mode in front of the server, at most ``server_connections``
    to each database, letting in ``logins``; its host and port. Raises PoolerUnavailable when
    it cannot run here."""
    reason = why_not(server_dsn)
    if reason is not None:
        raise PoolerUnavailable(reason)
    program = executable()
    assert program is not None
    with tempfile.TemporaryDirectory(prefix="fairqueue-pgbouncer-") as scratch:
        folder = Path(scratch)
        listen = free_port()
        config = _config(server_dsn, folder, listen, server_connections, logins)
        command = [program, str(config)]
        if os.geteuid() == 0:
            command[1:1] = ["--user", "nobody"]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            if not wait_listening(process, listen, timeout_s=START_TIMEOUT_S):
                log = folder / "pgbouncer.log"
                text = log.read_text(errors="replace") if log.exists() else ""
                raise PoolerUnavailable(f"PgBouncer did not start: {text[-500:]}")
            yield "127.0.0.1", listen
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def pooled_dsn(dsn: str, host: str, port: int) -> str:
    """``dsn``'s database through the pooler, as the pooled login."""
    return make_conninfo(dsn, host=host, port=port, user=POOLED_LOGIN, password="")


def _config(
    server_dsn: str, folder: Path, listen: int, server_connections: int, logins: Sequence[str]
) -> Path:
    server = conninfo_to_dict(server_dsn)
    host = str(server.get("host") or "/var/run/postgresql")
    port = int(server.get("port") or 5432)
    users = folder / "users.txt"
    users.write_text("".join(f'"{login}" ""\n' for login in logins))
    config = folder / "pgbouncer.ini"
    settings = {
        "listen_addr": "127.0.0.1",
        "listen_port": str(listen),
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": str(users),
        "pool_mode": "transaction",
        "max_client_conn": "2000",
        "default_pool_size": str(server_connections),
        "max_db_connections": str(server_connections),
        "reserve_pool_size": "0",
        "server_idle_timeout": "10",
        "logfile": str(folder / "pgbouncer.log"),
        "pidfile": str(folder / "pgbouncer.pid"),
    }
    lines = ["[databases]", f"* = host={host} port={port}", "[pgbouncer]"]
    config.write_text("\n".join([*lines, *(f"{k} = {v}" for k, v in settings.items()), ""]))
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root and drops to nobody, who must reach these files.
        folder.chmod(0o777)
        for path in (users, config):
            path.chmod(0o644)
    return config


def wait_listening(process: subprocess.Popen[Any], port: int, *, timeout_s: float) -> bool:
    """Wait until ``process`` listens on the loopback ``port``; False once it has ended or
    ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)

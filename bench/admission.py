"""Admission: POST /jobs against the local admission API, direct and through PgBouncer.

The API server is ``fairqueue serve --role api`` in a subprocess of its own (its GIL is not
the load generator's), with this module's STAGES (``FAIRQUEUE_STAGES=bench.admission:STAGES``):
one stage clients may admit, at no credit cost. The clients are threads in CLIENT_PROCESSES
spawned processes (bench/admission_clients.py), each client its own lane with its own token
and one http.client connection it keeps open for all its admissions; every answer other than
202 is an error.
At each level every client admits for `admission_warmup_s` untimed, then `admission_seconds`
timed.

Two ways: direct (the server's pool straight to Postgres, logging in as the bench does) and
through PgBouncer in transaction mode with POOLER_SERVER_CONNECTIONS server connections
(FAIRQUEUE_POOLER=transaction, logging in as a member of fairqueue_app). The server's pool
is as big both ways: the most clients, within what the server's max_connections leaves. The
server connections a way used are the most backends of the bench database seen in
pg_stat_activity during a level (sampled every SAMPLE_S), those of the API server's login.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from fairqueue import local_pooler
from fairqueue.api import ClaimNames, mint_token
from fairqueue.db import Connection
from fairqueue.stage import Job, Stage

from . import database, pooled_pipelines
from .admission_clients import Clients
from .errors import BenchError
from .pooled_pipelines import PipelineRun
from .sizes import Sizes
from .ways import WAY_TITLES, Watch, Way

JOB_TYPE = "bench_admit"
TENANT = "bench-admission"
# A throwaway secret: the server and the tokens live only for the bench.
SECRET = "bench-admission-secret-0123456789abcdef"
APP_NAME = "fairqueue-bench-api"
POOLER_SERVER_CONNECTIONS = 10
# Backends left free beside the server's pool: the bench's own, PgBouncer's, anyone else's.
HEADROOM = 15
SERVER_START_S = 60.0
ROOT = Path(__file__).resolve().parents[1]


def noop(job: Job) -> None:
    """The work of an admitted job: none (nothing runs it here)."""


STAGES = [Stage(JOB_TYPE, handler=noop, clients_may_admit=True)]


@dataclass(frozen=True)
class Level:
    way: Way
    clients: int
    # The API server's pool (FAIRQUEUE_API_POOL_SIZE) and, through the pooler, its cap.
    pool_size: int
    seconds: float
    admitted: int
    errors: int
    error_example: str | None
    p50_ms: float
    p99_ms: float
    # The most backends of the bench database the API server's login held, seen at once.
    server_connections: int

    @property
    def per_s(self) -> float:
        return self.admitted / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Admission:
    levels: list[Level]
    # A way that could not run here, and why.
    skipped: dict[Way, str] = field(default_factory=dict)
    # `pooled_pipelines` run_pipeline processes draining a backlog, each way.
    pipelines: list[PipelineRun] = field(default_factory=list)

    def level(self, way: Way, clients: int) -> Level | None:
        return next((r for r in self.levels if (r.way, r.clients) == (way, clients)), None)


# The API server, in a process of its own.


@contextmanager
def api_server(dsn: str, pool_size: int, *, pooled: bool) -> Iterator[int]:
    """``fairqueue serve --role api`` on a free port, until the block ends; its port. Raises
    BenchError with the end of its log when it does not come up."""
    port = local_pooler.free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "FAIRQUEUE_API_SECRET": SECRET,
        "FAIRQUEUE_API_HOST": "127.0.0.1",
        "FAIRQUEUE_API_PORT": str(port),
        "FAIRQUEUE_API_POOL_SIZE": str(pool_size),
        "FAIRQUEUE_STAGES": "bench.admission:STAGES",
    }
    env.pop("FAIRQUEUE_POOLER", None)
    if pooled:
        env["FAIRQUEUE_POOLER"] = "transaction"
    command = [sys.executable, "-m", "fairqueue", "--database-url", dsn, "serve", "--role", "api"]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        try:
            if not local_pooler.wait_listening(process, port, timeout_s=SERVER_START_S):
                log.seek(0)
                tail = log.read().decode(errors="replace").strip().splitlines()[-3:]
                raise BenchError("the API server did not start: " + " | ".join(tail))
            yield port
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def pool_size(conn: Connection, clients: int) -> int:
    """The API server's pool: a connection per client, within what the server has free."""
    row = conn.execute(
        "select current_setting('max_connections')::int"
        " - current_setting('superuser_reserved_connections')::int"
        " - (select count(*) from pg_stat_activity where backend_type = 'client backend') as free"
    ).fetchone()
    free = int(row["free"]) if row else 0
    return max(1, min(clients, free - HEADROOM))


def tokens(clients: int) -> list[str]:
    names = ClaimNames.from_env()
    return [
        mint_token(SECRET, tenant_id=TENANT, lane=f"lane-{k}", ttl_s=3600, names=names)
        for k in range(clients)
    ]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


@dataclass(frozen=True)
class Served:
    """An API server up for one way: its port, and which backends of the bench database are
    its server connections."""

    way: Way
    port: int
    where: str
    params: tuple[Any, ...]


def _levels(
    served: Served,
    dsn: str,
    pool: int,
    clients: Clients,
    sizes: Sizes,
    progress: Callable[[str], None],
) -> list[Level]:
    found = []
    for level in sizes.admission_clients:
        watch = Watch(dsn, served.where, served.params)
        try:
            started, tallies = clients.run(
                [served.port],
                JOB_TYPE,
                tokens(level),
                sizes.admission_warmup_s,
                sizes.admission_seconds,
            )
        finally:
            most = watch.stop()
        latencies = [ms for t in tallies for ms in t.latencies_ms]
        run = Level(
            way=served.way,
            clients=level,
            pool_size=pool,
            seconds=max([started, *(t.last_finish for t in tallies)]) - started,
            admitted=sum(t.admitted for t in tallies),
            errors=sum(t.errors for t in tallies),
            error_example=next((t.error_example for t in tallies if t.error_example), None),
            p50_ms=percentile(latencies, 0.5),
            p99_ms=percentile(latencies, 0.99),
            server_connections=most,
        )
        found.append(run)
        progress(
            f"admission {WAY_TITLES[served.way]} x{level}: {run.per_s:,.0f}/s, p99"
            f" {run.p99_ms:.1f} ms, {run.errors} errors, {most} server connections"
        )
    return found


def measure(conn: Connection, dsn: str, sizes: Sizes, progress: Callable[[str], None]) -> Admission:
    """Every level both ways (the pooled ones skipped, with why, where PgBouncer cannot run
    or reach the server), then the pipelines both ways while the pooler is up; fairqueue's
    tables are left empty."""
    pool = pool_size(conn, max(sizes.admission_clients))
    levels: list[Level] = []
    skipped: dict[Way, str] = {}
    clients = Clients()
    try:
        database.reset(conn)
        direct_dsn = make_conninfo(dsn, application_name=APP_NAME)
        with api_server(direct_dsn, pool, pooled=False) as port:
            served = Served("direct", port, "application_name = %s", (APP_NAME,))
            levels += _levels(served, dsn, pool, clients, sizes, progress)
        database.reset(conn)
        with ExitStack() as stack:
            pooled_dsn: str | None = None
            try:
                local_pooler.create_login(dsn)
                host, bouncer = stack.enter_context(
                    local_pooler.pgbouncer(dsn, server_connections=POOLER_SERVER_CONNECTIONS)
                )
                pooled_dsn = local_pooler.pooled_dsn(dsn, host, bouncer)
                port = stack.enter_context(api_server(pooled_dsn, pool, pooled=True))
            except (local_pooler.PoolerUnavailable, BenchError, psycopg.Error) as exc:
                skipped["pooled"] = str(exc)
                pooled_dsn = None
                progress(f"admission through PgBouncer skipped: {exc}")
            else:
                served = Served("pooled", port, "usename = %s", (local_pooler.POOLED_LOGIN,))
                levels += _levels(served, dsn, pool, clients, sizes, progress)
            drained = pooled_pipelines.drain(conn, dsn, pooled_dsn, sizes, progress)
    finally:
        clients.close()
    database.reset(conn)
    return Admission(levels=levels, skipped=skipped, pipelines=drained)

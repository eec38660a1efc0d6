"""Admission: POST /jobs against the local admission API, direct and through PgBouncer, from
one API process and from a fleet of them.

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

One multi-threaded process direct opens only as many backends as it has transactions in flight,
so it shows little of what the pooler saves. That saving is for many processes of one
connection each, which is how the API is deployed: Lambda runs one request at a time per
container, each warm container holding one database connection. So both ways run again as a
fleet (bench/api_fleet.py): at each level of `admission_fleet_clients`, as many API processes
as clients, each with a pool of one and warmed by an admission of its own (its connection
open), forked from one launcher that imported fairqueue once; client k posts to process k. A
fleet direct needs a backend per process, more than the shared server's max_connections allows
(which the bench never changes), so the fleets run on a private cluster the bench starts for
them and deletes afterwards (bench/private_server.py), with room for twice the most clients.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from fairqueue.api import ClaimNames, mint_token
from fairqueue.db import Connection, connect
from fairqueue.dev import pooler as local_pooler
from fairqueue.stage import Job, Stage

from . import database, pooled_pipelines
from .admission_clients import Clients
from .api_fleet import WarmUp, api_fleet
from .errors import BenchError
from .pooled_pipelines import PipelineRun
from .private_server import private_server
from .sizes import Sizes
from .ways import WAY_TITLES, Watch, Way

JOB_TYPE = "bench_admit"
TENANT = "bench-admission"
# A throwaway secret: the server and the tokens live only for the bench.
SECRET = "bench-admission-secret-0123456789abcdef"
APP_NAME = "fairqueue-bench-api"
# Which backends are an API's server connections: by application name direct, by login
# through the pooler.
APP_WHERE = "application_name = %s"
LOGIN_WHERE = "usename = %s"
POOLER_SERVER_CONNECTIONS = 10
# Backends left free beside the server's pool: the bench's own, PgBouncer's, anyone else's.
HEADROOM = 15
SERVER_START_S = 60.0
# The private cluster's max_connections, per client at the most clients and some more: a
# backend for each process of the direct fleet, and room to spare (the bench's own, PgBouncer's,
# backends not yet gone after a fleet stopped).
FLEET_CONNECTIONS_PER_CLIENT = 2
FLEET_SPARE_CONNECTIONS = 50
FLEET_WAYS: tuple[Way, ...] = ("fleet", "fleet_pooled")
ROOT = Path(__file__).resolve().parents[1]


def noop(job: Job) -> None:
    """The work of an admitted job: none (nothing runs it here)."""


STAGES = [Stage(JOB_TYPE, handler=noop, clients_may_admit=True)]


@dataclass(frozen=True)
class Level:
    way: Way
    clients: int
    # The API processes (one, or a fleet of one per client) and each one's pool
    # (FAIRQUEUE_API_POOL_SIZE; through the pooler, its cap).
    processes: int
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


# The API server, in a process of its own, or a fleet of them.


def server_env(*, pooled: bool) -> dict[str, str]:
    """What an API process of the bench runs with: the secret, these stages, the pooler."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "FAIRQUEUE_API_SECRET": SECRET,
        "FAIRQUEUE_STAGES": "bench.admission:STAGES",
    }
    env.pop("FAIRQUEUE_POOLER", None)
    if pooled:
        env["FAIRQUEUE_POOLER"] = "transaction"
    return env


@contextmanager
def api_server(dsn: str, pool_size: int, *, pooled: bool) -> Iterator[int]:
    """``fairqueue serve --role api`` on a free port, until the block ends; its port. Raises
    BenchError with the end of its log when it does not come up."""
    port = local_pooler.free_port()
    env = {
        **server_env(pooled=pooled),
        "FAIRQUEUE_API_HOST": "127.0.0.1",
        "FAIRQUEUE_API_PORT": str(port),
        "FAIRQUEUE_API_POOL_SIZE": str(pool_size),
    }
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
    """How one way is served: the ports a level's clients post to, while its block lasts (one
    API server's, or a fleet's of as many processes as clients), and which backends of the
    database `dsn` are its server connections."""

    way: Way
    ports: Callable[[int], AbstractContextManager[list[int]]]
    dsn: str
    where: str
    params: tuple[Any, ...]
    # Each API process's pool.
    pool_size: int
    # A process per client, or one for them all.
    fleet: bool = False


def _one_server(port: int) -> Callable[[int], AbstractContextManager[list[int]]]:
    return lambda clients: nullcontext([port])


def _fleet(api_dsn: str, *, pooled: bool) -> Callable[[int], AbstractContextManager[list[int]]]:
    env = server_env(pooled=pooled)
    return lambda clients: api_fleet(api_dsn, clients, env, WarmUp(JOB_TYPE, TENANT))


def _levels(
    served: Served,
    levels: tuple[int, ...],
    clients: Clients,
    sizes: Sizes,
    progress: Callable[[str], None],
) -> list[Level]:
    found = []
    for level in levels:
        with served.ports(level) as ports:
            watch = Watch(served.dsn, served.where, served.params)
            try:
                started, tallies = clients.run(
                    ports,
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
            processes=level if served.fleet else 1,
            pool_size=served.pool_size,
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


def _through_pooler(stack: ExitStack, dsn: str) -> str:
    """A PgBouncer in front of `dsn` with POOLER_SERVER_CONNECTIONS server connections, up
    while `stack` lasts, and the pooled login; the DSN through it. Raises PoolerUnavailable
    or psycopg.Error when it cannot run."""
    local_pooler.create_login(dsn)
    host, bouncer = stack.enter_context(
        local_pooler.pgbouncer(dsn, server_connections=POOLER_SERVER_CONNECTIONS)
    )
    return local_pooler.pooled_dsn(dsn, host, bouncer)


def _single_process(
    conn: Connection, dsn: str, clients: Clients, sizes: Sizes, progress: Callable[[str], None]
) -> Admission:
    """One API server, both ways, in the bench database; then the pipelines both ways."""
    pool = pool_size(conn, max(sizes.admission_clients))
    levels: list[Level] = []
    skipped: dict[Way, str] = {}
    database.reset(conn)
    direct_dsn = make_conninfo(dsn, application_name=APP_NAME)
    with api_server(direct_dsn, pool, pooled=False) as port:
        served = Served("direct", _one_server(port), dsn, APP_WHERE, (APP_NAME,), pool)
        levels += _levels(served, sizes.admission_clients, clients, sizes, progress)
    database.reset(conn)
    with ExitStack() as stack:
        pooled_dsn: str | None = None
        try:
            pooled_dsn = _through_pooler(stack, dsn)
            port = stack.enter_context(api_server(pooled_dsn, pool, pooled=True))
        except (local_pooler.PoolerUnavailable, BenchError, psycopg.Error) as exc:
            skipped["pooled"] = str(exc)
            pooled_dsn = None
            progress(f"admission through PgBouncer skipped: {exc}")
        else:
            login = (local_pooler.POOLED_LOGIN,)
            served = Served("pooled", _one_server(port), dsn, LOGIN_WHERE, login, pool)
            levels += _levels(served, sizes.admission_clients, clients, sizes, progress)
        drained = pooled_pipelines.drain(conn, dsn, pooled_dsn, sizes, progress)
    database.reset(conn)
    return Admission(levels=levels, skipped=skipped, pipelines=drained)


def _fleets(clients: Clients, sizes: Sizes, progress: Callable[[str], None]) -> Admission:
    """Both fleet ways, on a private cluster with a backend for each process and to spare
    (the shared server's max_connections is not the bench's to change)."""
    levels = sizes.admission_fleet_clients
    if not levels:
        return Admission(levels=[])
    room = FLEET_CONNECTIONS_PER_CLIENT * max(levels) + FLEET_SPARE_CONNECTIONS
    with ExitStack() as stack:
        try:
            server = stack.enter_context(private_server(room))
            dsn = stack.enter_context(database.own_database(server))
            database.prepare(dsn)
            conn = stack.enter_context(connect(dsn, autocommit=True))
        except (BenchError, psycopg.Error) as exc:
            progress(f"admission fleets skipped: {exc}")
            return Admission(levels=[], skipped=dict.fromkeys(FLEET_WAYS, str(exc)))
        api_dsn = make_conninfo(dsn, application_name=APP_NAME)
        ports = _fleet(api_dsn, pooled=False)
        direct = Served("fleet", ports, dsn, APP_WHERE, (APP_NAME,), pool_size=1, fleet=True)
        found = _levels(direct, levels, clients, sizes, progress)
        database.reset(conn)
        try:
            pooled_dsn = _through_pooler(stack, dsn)
        except (local_pooler.PoolerUnavailable, psycopg.Error) as exc:
            progress(f"admission fleet through PgBouncer skipped: {exc}")
            return Admission(levels=found, skipped={"fleet_pooled": str(exc)})
        login = (local_pooler.POOLED_LOGIN,)
        ports = _fleet(pooled_dsn, pooled=True)
        pooled = Served("fleet_pooled", ports, dsn, LOGIN_WHERE, login, pool_size=1, fleet=True)
        found += _levels(pooled, levels, clients, sizes, progress)
    return Admission(levels=found)


def measure(conn: Connection, dsn: str, sizes: Sizes, progress: Callable[[str], None]) -> Admission:
    """Every level both ways with one API server (the pooled ones skipped, with why, where
    PgBouncer cannot run or reach the server), then the pipelines both ways while the pooler
    is up, then every level both ways with a fleet on a private cluster (skipped, with why,
    where that cannot start); fairqueue's tables are left empty."""
    clients = Clients()
    try:
        single = _single_process(conn, dsn, clients, sizes, progress)
        fleets = _fleets(clients, sizes, progress)
    finally:
        clients.close()
    return Admission(
        levels=single.levels + fleets.levels,
        skipped=single.skipped | fleets.skipped,
        pipelines=single.pipelines,
    )

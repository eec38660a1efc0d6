"""The admission figures in the results JSON and the report's admission table."""

from __future__ import annotations

from typing import Any

from . import pooled_pipelines
from .admission import POOLER_SERVER_CONNECTIONS, Admission, Level
from .formats import table
from .sizes import Sizes
from .ways import POOLED_VERSUS, WAY_TITLES, WAYS

# The targets (bench/targets.py reports them): more clients admit at least as fast
# as one, within this p99 (one API process, direct); the pooler keeps this share of direct's
# rate with this share of its server connections (fleets, at the most clients).
MAX_P99_MS = 100.0
CLIENTS_COMPARED = (1, 16)
MIN_POOLED_SHARE = 0.8
SERVER_CONNECTION_SHARE = 0.1


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def over_one_client(found: Admission, row: Level) -> float | None:
    """A level's admissions/s over the same way's with one client."""
    one = found.level(row.way, 1)
    return row.per_s / one.per_s if one and one.per_s else None


def direct_of(found: Admission, row: Level) -> Level | None:
    """The row a row through PgBouncer is compared with: the same API processes and clients,
    direct; None for a direct row."""
    way = POOLED_VERSUS.get(row.way)
    return found.level(way, row.clients) if way else None


def pooled_over_direct(found: Admission, row: Level) -> float | None:
    """A row's admissions/s through PgBouncer over direct's, at the same clients."""
    direct = direct_of(found, row)
    return row.per_s / direct.per_s if direct and direct.per_s else None


def connections_pooled_over_direct(found: Admission, row: Level) -> float | None:
    """A row's server connections through PgBouncer over direct's, at the same clients."""
    direct = direct_of(found, row)
    return (
        row.server_connections / direct.server_connections
        if direct and direct.server_connections
        else None
    )


def server_connections(row: Level) -> str:
    """The most server connections, beside the connections its API processes could hold."""
    pools = (
        f"{row.processes} x pool {row.pool_size}" if row.processes > 1 else f"pool {row.pool_size}"
    )
    return f"{row.server_connections} ({pools})"


def as_json(found: Admission, sizes: Sizes) -> dict[str, Any]:
    return {
        "clients": list(sizes.admission_clients),
        "fleet_clients": list(sizes.admission_fleet_clients),
        "warmup_s": sizes.admission_warmup_s,
        "seconds": sizes.admission_seconds,
        "pooler_server_connections": POOLER_SERVER_CONNECTIONS,
        "skipped": found.skipped,
        "rows": [
            {
                "way": row.way,
                "title": WAY_TITLES[row.way],
                "clients": row.clients,
                "api_processes": row.processes,
                "api_pool_size": row.pool_size,
                "seconds": round(row.seconds, 4),
                "admitted": row.admitted,
                "admissions_per_s": round(row.per_s, 1),
                "p50_ms": round(row.p50_ms, 3),
                "p99_ms": round(row.p99_ms, 3),
                "errors": row.errors,
                "error_example": row.error_example,
                "server_connections": row.server_connections,
                "ratio_to_one_client": _rounded(over_one_client(found, row)),
                "ratio_pooled_to_direct": _rounded(pooled_over_direct(found, row)),
                "server_connections_pooled_to_direct": _rounded(
                    connections_pooled_over_direct(found, row)
                ),
            }
            for row in found.levels
        ],
        "pipelines": pooled_pipelines.as_json(found.pipelines),
    }


def section(found: Admission, sizes: Sizes) -> list[str]:
    """The report's admission table: every level, one API process direct and through
    PgBouncer, then a fleet of them both ways."""
    ordered = sorted(found.levels, key=lambda r: (r.clients, WAYS.index(r.way)))
    rows = []
    for row in ordered:
        one = over_one_client(found, row)
        pooled = pooled_over_direct(found, row)
        rows.append(
            [
                str(row.clients),
                WAY_TITLES[row.way],
                f"{row.per_s:,.0f}",
                f"{row.p50_ms:.1f}",
                f"{row.p99_ms:.1f}",
                f"{row.errors:,}",
                server_connections(row),
                f"{one:.2f}" if one is not None else "-",
                f"{pooled:.2f}" if pooled is not None else "-",
            ]
        )
    pool = next((r.pool_size for r in ordered if r.processes == 1), 0)
    lines = [
        "### Admission: POST /jobs through the local API, direct and through PgBouncer",
        "",
        "`fairqueue serve --role api` in a process of its own; the clients are threads in"
        " other processes, each its own lane with its own token, posting one job after another"
        " (a stage clients may admit, no credit cost) on a connection it keeps open. At each"
        f" level, {sizes.admission_warmup_s:g} s"
        f" untimed, then {sizes.admission_seconds:g} s timed; latency is the client's, request"
        f" sent to answer read. The server has {pool} request threads and a pool of as many"
        " connections both ways;"
        f" through PgBouncer (transaction mode, {POOLER_SERVER_CONNECTIONS} server connections)"
        " it logs in as a member of fairqueue_app with FAIRQUEUE_POOLER=transaction. Server"
        " connections are the most backends of the bench database the server's login held"
        " at once (pg_stat_activity, sampled). Errors are answers other than 202.",
        "",
        "The fleet rows serve each client from an API process of its own with one connection,"
        " as Lambda serves the API (a request at a time and a connection per warm container):"
        " as many processes as clients, forked from one that imported fairqueue, each warmed"
        " by an admission of its own before the level, on a private Postgres cluster the bench"
        " starts from the embedded Postgres's binaries, with room for a backend per process"
        " (the shared server's max_connections is left as it is). Direct, each process holds a"
        f" backend; through PgBouncer they share its {POOLER_SERVER_CONNECTIONS}.",
        "",
        *table(
            [
                "clients",
                "way",
                "admissions/s",
                "p50 ms",
                "p99 ms",
                "errors",
                "server connections",
                "vs 1 client",
                "pooled / direct",
            ],
            "rlrrrrrrr",
            rows,
        ),
    ]
    for way, why in found.skipped.items():
        lines += ["", f"The {WAY_TITLES[way]} rows were skipped: {why}"]
    example = next((r for r in found.levels if r.error_example), None)
    if example is not None:
        text = (example.error_example or "").replace("\n", " ")
        lines += ["", f"An error ({WAY_TITLES[example.way]}): `{text}`"]
    if found.pipelines:
        lines += ["", *pooled_pipelines.section(found.pipelines, sizes)]
    return lines

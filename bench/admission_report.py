"""The admission figures in the results JSON and the report's admission table."""

from __future__ import annotations

from typing import Any

from . import pooled_pipelines
from .admission import POOLER_SERVER_CONNECTIONS, Admission, Level
from .formats import table
from .sizes import Sizes
from .ways import WAY_TITLES, WAYS

# The targets (bench/targets.py reports them): more clients admit at least as fast
# as one, within this p99; the pooler keeps this share of direct's rate.
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


def pooled_over_direct(found: Admission, clients: int) -> float | None:
    """Admissions/s through PgBouncer over direct, at the same clients."""
    pooled, direct = found.level("pooled", clients), found.level("direct", clients)
    return pooled.per_s / direct.per_s if pooled and direct and direct.per_s else None


def as_json(found: Admission, sizes: Sizes) -> dict[str, Any]:
    return {
        "clients": list(sizes.admission_clients),
        "warmup_s": sizes.admission_warmup_s,
        "seconds": sizes.admission_seconds,
        "pooler_server_connections": POOLER_SERVER_CONNECTIONS,
        "skipped": found.skipped,
        "rows": [
            {
                "way": row.way,
                "title": WAY_TITLES[row.way],
                "clients": row.clients,
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
                "ratio_pooled_to_direct": _rounded(pooled_over_direct(found, row.clients))
                if row.way == "pooled"
                else None,
            }
            for row in found.levels
        ],
        "pipelines": pooled_pipelines.as_json(found.pipelines),
    }


def section(found: Admission, sizes: Sizes) -> list[str]:
    """The report's admission table: every level, direct then pooled."""
    ordered = sorted(found.levels, key=lambda r: (r.clients, WAYS.index(r.way)))
    rows = []
    for row in ordered:
        one = over_one_client(found, row)
        pooled = pooled_over_direct(found, row.clients) if row.way == "pooled" else None
        rows.append(
            [
                str(row.clients),
                WAY_TITLES[row.way],
                f"{row.per_s:,.0f}",
                f"{row.p50_ms:.1f}",
                f"{row.p99_ms:.1f}",
                f"{row.errors:,}",
                f"{row.server_connections} (pool {row.pool_size})",
                f"{one:.2f}" if one is not None else "-",
                f"{pooled:.2f}" if pooled is not None else "-",
            ]
        )
    pool = ordered[0].pool_size if ordered else 0
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

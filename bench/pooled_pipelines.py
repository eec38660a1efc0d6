"""Concurrent pipelines direct and through PgBouncer: `pooled_pipelines` (8 in the full run)
run_pipeline processes draining
one preloaded backlog (bench/throughput.py's fairqueue loop), jobs/s and the server
connections they held at once (pg_stat_activity, sampled as for admission)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import make_conninfo

from fairqueue.db import Connection
from fairqueue.dev import pooler as local_pooler

from . import database, throughput
from .formats import table
from .sizes import Sizes
from .ways import WAY_TITLES, Watch, Way

APP_NAME = "fairqueue-bench-pipeline"


@dataclass(frozen=True)
class PipelineRun:
    way: Way
    pipelines: int
    jobs: int
    seconds: float
    server_connections: int

    @property
    def per_s(self) -> float:
        return self.jobs / self.seconds


@contextmanager
def _pooler_setting(pooled: bool) -> Iterator[None]:
    """FAIRQUEUE_POOLER for the spawned pipelines: they take the parent's environment."""
    before = os.environ.get("FAIRQUEUE_POOLER")
    os.environ.pop("FAIRQUEUE_POOLER", None)
    if pooled:
        os.environ["FAIRQUEUE_POOLER"] = "transaction"
    try:
        yield
    finally:
        os.environ.pop("FAIRQUEUE_POOLER", None)
        if before is not None:
            os.environ["FAIRQUEUE_POOLER"] = before


def drain(
    conn: Connection,
    dsn: str,
    pooled_dsn: str | None,
    sizes: Sizes,
    progress: Callable[[str], None],
) -> list[PipelineRun]:
    """The backlog drained direct, then through the pooler when there is one."""
    ways: list[tuple[Way, str, str, tuple[Any, ...]]] = [
        (
            "direct",
            make_conninfo(dsn, application_name=APP_NAME),
            "application_name = %s",
            (APP_NAME,),
        )
    ]
    if pooled_dsn is not None:
        # PgBouncer sets a client's application_name on the server connection it lends it,
        # which tells these apart from the ones the admission server left idle in the pool.
        ways.append(
            (
                "pooled",
                make_conninfo(pooled_dsn, application_name=APP_NAME),
                "usename = %s and application_name = %s",
                (local_pooler.POOLED_LOGIN, APP_NAME),
            )
        )
    runs = []
    for way, target, where, params in ways:
        throughput.preload(conn, sizes, "fairqueue")
        watch = Watch(dsn, where, params)
        try:
            with _pooler_setting(way == "pooled"):
                found = throughput.run_invocations(
                    target,
                    "fairqueue",
                    sizes.throughput_batch,
                    sizes.pooled_pipelines,
                    sizes.throughput_jobs,
                )
        finally:
            most = watch.stop()
        seconds = max(r.finished for r in found) - min(r.started for r in found)
        run = PipelineRun(way, sizes.pooled_pipelines, sizes.throughput_jobs, seconds, most)
        runs.append(run)
        progress(
            f"pipelines {WAY_TITLES[way]} x{run.pipelines}: {run.per_s:,.0f} jobs/s,"
            f" {most} server connections"
        )
    database.reset(conn)
    return runs


def as_json(runs: list[PipelineRun]) -> list[dict[str, Any]]:
    direct = next((r for r in runs if r.way == "direct"), None)
    return [
        {
            "way": r.way,
            "pipelines": r.pipelines,
            "jobs": r.jobs,
            "seconds": round(r.seconds, 4),
            "jobs_per_s": round(r.per_s, 1),
            "server_connections": r.server_connections,
            "ratio_to_direct": round(r.per_s / direct.per_s, 4) if direct else None,
        }
        for r in runs
    ]


def section(runs: list[PipelineRun], sizes: Sizes) -> list[str]:
    direct = next((r for r in runs if r.way == "direct"), None)
    rows = [
        [
            WAY_TITLES[r.way],
            f"{r.seconds:.2f}",
            f"{r.per_s:,.0f}",
            str(r.server_connections),
            f"{r.per_s / direct.per_s:.2f}" if direct else "-",
        ]
        for r in runs
    ]
    return [
        f"{sizes.pooled_pipelines} run_pipeline processes draining {sizes.throughput_jobs:,}"
        f" no-op jobs (batch {sizes.throughput_batch}), direct and through the same PgBouncer:",
        "",
        *table(["way", "seconds", "jobs/s", "server connections", "vs direct"], "lrrrr", rows),
    ]

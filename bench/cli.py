"""``python -m bench``: the whole benchmark, or ``--smoke`` for every workload at tiny sizes."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from fairqueue.db import Connection, connect

from . import (
    admission,
    caps,
    claim_scale,
    claim_tenants,
    cost,
    dashboard,
    database,
    doorbells,
    enqueue,
    fairness,
    fairness_tenants,
    health,
    latency,
    schedules,
    shares,
    throughput,
)
from .machine import library_fingerprint, machine
from .peers import PEERS, PGQUEUER
from .peers.workers import PeerDrain, timed_drain
from .report import markdown, write
from .results import Results
from .sizes import FULL, SMOKE, Sizes

RESULTS_DIR = Path(__file__).resolve().parent / "results"


class Progress:
    """Progress lines on stderr, so stdout carries only the results table."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {message}", file=sys.stderr, flush=True)


def drains(
    conn: Connection, dsn: str, peer_dsns: dict[str, str], sizes: Sizes, progress: Progress
) -> tuple[list[throughput.Drain], list[PeerDrain]]:
    """Every system at every worker count, repeats interleaved so a slow spell of the machine
    hits every system alike."""
    ours: list[throughput.Drain] = []
    theirs: list[PeerDrain] = []
    for repeat in range(sizes.repeats):
        step = f"drain {repeat + 1}/{sizes.repeats}"
        for workers in sizes.invocations:
            for loop in throughput.LOOPS:
                found = throughput.drain(conn, dsn, sizes, loop, workers, repeat)
                ours.append(found)
                progress(f"{step}: {loop} x{workers}: {found.done_per_s:,.0f} jobs/s")
            for peer in PEERS:
                run = timed_drain(
                    peer, peer_dsns[peer.name], sizes.throughput_jobs, workers, repeat
                )
                theirs.append(run)
                progress(f"{step}: {peer.name} x{workers}: {run.done_per_s:,.0f} jobs/s")
    return ours, theirs


def fairness_line(found: fairness.FairnessResult) -> str:
    return (
        f"fairness: {found.jobs:,} skewed arrivals through {found.system}:"
        f" Jain's index {found.jain_mean:.3f}, longest wait {found.longest_wait:,} completions"
    )


def run(dsn: str, sizes: Sizes, server: str, progress: Progress, *, keep: bool) -> Results:
    """Every workload: fairqueue in `dsn` (its tables emptied as it goes), each peer in a
    database of its own beside it on the same server."""
    started = time.monotonic()
    library = library_fingerprint()
    database.prepare(dsn)
    with ExitStack() as stack, connect(dsn, autocommit=True) as conn:
        peer_dsns: dict[str, str] = {}
        for peer in PEERS:
            name = f"{database.database_name(dsn)}_{peer.name}"
            peer_dsns[peer.name] = stack.enter_context(database.own_database(dsn, name, keep=keep))
            peer.install(peer_dsns[peer.name])
            progress(f"{peer.name}: database {name} created, schema installed by {peer.name}")
        found_machine = machine(conn, server)
        # First, on a quiet server: the enqueue runs are a fifth of a second each, and the
        # workloads after them leave autovacuum working through fairqueue's tables for minutes.
        queued = enqueue.measure(conn, dsn, peer_dsns, sizes, progress)
        # Milliseconds, so on a quiet server too.
        rung = doorbells.measure(dsn, peer_dsns[PGQUEUER.name], sizes, progress)
        ours, theirs = drains(conn, dsn, peer_dsns, sizes, progress)
        cases = latency.last_day_history(conn, sizes, progress)
        cases.append(latency.expired_history(conn, sizes, progress))
        scale = claim_scale.claim_vs_groups(conn, sizes, progress)
        options = claim_scale.options_vs_groups(conn, sizes, progress)
        by_level = claim_tenants.claim_by_level(conn, sizes, progress)
        sent = fairness.arrivals(sizes)
        fair = [fairness.run_fairqueue(conn, dsn, sizes, sent)]
        progress(fairness_line(fair[-1]))
        for peer in PEERS:
            fair.append(fairness.run_peer(peer, peer_dsns[peer.name], sizes, sent))
            progress(fairness_line(fair[-1]))
        gaming = fairness_tenants.run_all(conn, dsn, peer_dsns, sizes, progress)
        churned = health.churn_fairqueue(conn, dsn, sizes, progress)
        for peer in PEERS:
            churned += health.churn_peer(peer, peer_dsns[peer.name], sizes, progress)
        admitted = admission.measure(conn, dsn, sizes, progress)
        swept = schedules.measure(conn, dsn, sizes, progress)
        shared = shares.measure(conn, dsn, sizes, progress)
        costed = cost.measure(conn, dsn, sizes, progress)
        capped = caps.measure(conn, dsn, sizes, progress)
        pages = dashboard.measure(conn, dsn, sizes, progress)
        database.reset(conn)
    changed = library_fingerprint() != library
    if changed:
        progress("warning: the library's sources changed during the run; its figures mix versions")
    return Results(
        mode=sizes.mode,
        machine=found_machine,
        library=library,
        library_changed=changed,
        sizes=sizes,
        settings={**throughput.settings(sizes.throughput_batch, sizes)}
        | {peer.name: peer.settings for peer in PEERS},
        throughput=ours,
        peer_drains=theirs,
        latency=cases,
        claim_scale=scale,
        claim_options=options,
        fairness=fair,
        tenant_fairness=gaming,
        tenant_claim=by_level,
        health=churned,
        enqueue=queued,
        admission=admitted,
        doorbells=rung,
        schedules=swept,
        shares=shared,
        cost=costed,
        caps=capped,
        dashboard=pages,
        elapsed_s=time.monotonic() - started,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--smoke", action="store_true", help="every workload at tiny sizes; writes no results"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--database-url",
        help="the server to create the bench databases on (default: DATABASE_URL, else embedded)",
    )
    where.add_argument(
        "--dsn",
        help="run fairqueue in this existing database instead (a scratch one: its fairqueue"
        " tables are emptied); the peers' databases are created beside it",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"folder for latest.json, latest.md and latest.png (default: {RESULTS_DIR} for a"
        " full run, none for --smoke)",
    )
    parser.add_argument(
        "--keep-database", action="store_true", help="do not drop the bench databases afterwards"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    out: Path | None = args.out or (None if args.smoke else RESULTS_DIR)
    progress = Progress()
    keep = args.keep_database
    if args.dsn:
        results = run(args.dsn, sizes, "given database", progress, keep=keep)
    else:
        server, origin = database.resolve_server(args.database_url)
        with database.own_database(server, keep=keep) as dsn:
            progress(f"database {database.BENCH_DATABASE} created on the server from {origin}")
            results = run(dsn, sizes, origin, progress, keep=keep)
    if out is not None:
        for path in write(results, out):
            progress(f"wrote {path}")
    print(markdown(results))
    return 0

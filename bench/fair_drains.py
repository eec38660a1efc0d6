"""``python -m bench.fair_drains``: the drain workload alone, plain and fair over chosen counts of
groups, beside pgqueuer's plain drain, repeated and interleaved.

Each repeat runs, one after another on the same server: fairqueue's plain drain (no tenant, no
group), its fair drain over each count of groups at each level of the fair order
(``--fair-shares``) and each quantum (five groups per tenant, the tenants on the plans of
bench/load.py's mix, written in bulk so 100,000 groups load in seconds), and pgqueuer's drain
at each of its worker counts. Every figure is printed as it comes; at the end,
the median and the range of each, and the ratios of the medians. Nothing is written to
bench/results/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from fairqueue.db import connect
from fairqueue.stage import FairShare

from . import database, load, throughput
from .errors import BenchError
from .peers import PGQUEUER
from .peers.workers import timed_drain
from .sizes import FULL, SMOKE, Sizes

GROUPS_PER_TENANT = 5


def fair_drain(
    dsn: str,
    sizes: Sizes,
    groups: int,
    workers: int,
    quantum: int = 1,
    fair_share: FairShare = "group",
) -> float:
    """Jobs/s of fairqueue's drain over `groups` groups of groups / 5 tenants, at a quantum and
    a level of the fair order."""
    if groups % GROUPS_PER_TENANT:
        raise BenchError(f"{groups} groups are not a whole number of tenants")
    owners = replace(
        sizes, tenants=groups // GROUPS_PER_TENANT, groups_per_tenant=GROUPS_PER_TENANT
    )
    with connect(dsn, autocommit=True) as conn:
        database.reset(conn)
        load.insert_owners(conn, owners)
        load.insert_pending(conn, owners, throughput.JOB_TYPE, sizes.throughput_jobs)
        database.vacuum_analyze(
            conn, "fairqueue.jobs", "fairqueue.served", "fairqueue.tenants", "fairqueue.groups"
        )
    drained = throughput.drain_preloaded(
        dsn, owners, "fairqueue_groups", workers, quantum=quantum, fair_share=fair_share
    )
    return drained.done_per_s


def plain_drain(dsn: str, sizes: Sizes, workers: int) -> float:
    with connect(dsn, autocommit=True) as conn:
        return throughput.drain(conn, dsn, sizes, "fairqueue", workers).done_per_s


def peer_drain(peer_dsn: str, sizes: Sizes, workers: int) -> float:
    return timed_drain(PGQUEUER, peer_dsn, sizes.throughput_jobs, workers).done_per_s


def summary(name: str, runs: Sequence[float]) -> str:
    return (
        f"{name}: median {statistics.median(runs):,.0f} jobs/s,"
        f" range {min(runs):,.0f}-{max(runs):,.0f} ({len(runs)} runs)"
    )


def fair_label(groups: int, quantum: int, workers: int, fair_share: FairShare = "group") -> str:
    level = "" if fair_share == "group" else f" by {fair_share}"
    return f"fairqueue over {groups:,} groups{level}, quantum {quantum} x{workers}"


def run(
    dsn: str,
    sizes: Sizes,
    groups: Sequence[int],
    workers: int,
    peer_workers: Sequence[int],
    quanta: Sequence[int] = (1,),
    fair_shares: Sequence[FairShare] = ("group",),
) -> dict[str, list[float]]:
    """Every drain `sizes.repeats` times, interleaved; jobs/s of each run by name."""
    database.prepare(dsn)
    found: dict[str, list[float]] = {}
    name = f"{database.database_name(dsn)}_{PGQUEUER.name}"
    with database.own_database(dsn, name) as peer_dsn:
        PGQUEUER.install(peer_dsn)
        for repeat in range(sizes.repeats):
            figures: list[tuple[str, Callable[[], float]]] = [
                (f"fairqueue plain x{workers}", partial(plain_drain, dsn, sizes, workers))
            ]
            figures += [
                (
                    fair_label(g, q, workers, level),
                    partial(fair_drain, dsn, sizes, g, workers, q, level),
                )
                for g in groups
                for level in fair_shares
                for q in quanta
            ]
            figures += [
                (f"pgqueuer x{w}", partial(peer_drain, peer_dsn, sizes, w)) for w in peer_workers
            ]
            for label, measure in figures:
                # The machine is shared: the load before each drain goes with its figure.
                before = os.getloadavg()[0]
                rate = measure()
                found.setdefault(label, []).append(rate)
                print(
                    f"repeat {repeat + 1}: {label}: {rate:,.0f} jobs/s (load before {before:.2f})",
                    file=sys.stderr,
                    flush=True,
                )
        with connect(dsn, autocommit=True) as conn:
            database.reset(conn)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fair_drains", description=__doc__)
    parser.add_argument("--dsn", required=True, help="a scratch database (its tables are emptied)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat")
    parser.add_argument("--groups", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--quanta", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--fair-shares", nargs="+", choices=["group", "tenant"], default=["group"])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--peer-workers", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=FULL.throughput_jobs)
    args = parser.parse_args(argv)
    if args.smoke:
        sizes = replace(SMOKE, repeats=1)
    else:
        sizes = replace(FULL, repeats=args.repeats, throughput_jobs=args.jobs)
    found = run(
        args.dsn, sizes, args.groups, args.workers, args.peer_workers, args.quanta, args.fair_shares
    )
    medians = {label: statistics.median(runs) for label, runs in found.items()}
    for label, runs in found.items():
        print(summary(label, runs))
    plain = medians[f"fairqueue plain x{args.workers}"]
    best_peer = max(medians[f"pgqueuer x{w}"] for w in args.peer_workers)
    print(f"fairqueue plain / pgqueuer's best: {plain / best_peer:.2f}")
    for g in args.groups:
        for level in args.fair_shares:
            for q in args.quanta:
                label = fair_label(g, q, args.workers, level)
                fair = medians[label]
                # The ratios are named as the drains are, without the product and the workers.
                named = label.removeprefix("fairqueue ").rsplit(" x", 1)[0]
                print(
                    f"{named}: fair / plain {fair / plain:.2f},"
                    f" fair / pgqueuer's best {fair / best_peer:.2f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m bench``: the whole benchmark, or ``--smoke`` for every workload at tiny sizes."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from fairqueue.db import connect

from . import database, latency, throughput
from .report import Results, library_fingerprint, machine, markdown, write
from .sizes import FULL, SMOKE, Sizes

RESULTS_DIR = Path(__file__).resolve().parent / "results"


class Progress:
    """Progress lines on stderr, so stdout carries only the results table."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {message}", file=sys.stderr, flush=True)


def run(dsn: str, sizes: Sizes, server: str, progress: Progress) -> Results:
    """Every workload against one database; its fairqueue tables are emptied as it goes."""
    started = time.monotonic()
    library = library_fingerprint()
    database.prepare(dsn)
    with connect(dsn, autocommit=True) as conn:
        found_machine = machine(conn, server)
        drains: list[throughput.Drain] = []
        # Repeats interleaved, so a slow spell of the machine hits every loop alike.
        for repeat in range(sizes.repeats):
            for invocations in sizes.invocations:
                for loop in throughput.LOOPS:
                    progress(
                        f"throughput {repeat + 1}/{sizes.repeats}:"
                        f" {throughput.LOOP_TITLES[loop]} x{invocations}"
                    )
                    found = throughput.drain(conn, dsn, sizes, loop, invocations, repeat)
                    drains.append(found)
        cases = latency.last_day_history(conn, sizes, progress)
        cases.append(latency.expired_history(conn, sizes, progress))
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
        throughput=drains,
        latency=cases,
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
        help="the server to create the bench database on (default: DATABASE_URL, else embedded)",
    )
    where.add_argument(
        "--dsn",
        help="run in this existing database instead (a scratch one: its fairqueue tables are"
        " emptied)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"folder for latest.json and latest.md (default: {RESULTS_DIR} for a full run,"
        " none for --smoke)",
    )
    parser.add_argument(
        "--keep-database", action="store_true", help="do not drop the bench database afterwards"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    out: Path | None = args.out or (None if args.smoke else RESULTS_DIR)
    progress = Progress()
    if args.dsn:
        results = run(args.dsn, sizes, "given database", progress)
    else:
        server, origin = database.resolve_server(args.database_url)
        with database.own_database(server, keep=args.keep_database) as dsn:
            progress(f"database {database.BENCH_DATABASE} created on the server from {origin}")
            results = run(dsn, sizes, origin, progress)
    if out is not None:
        for path in write(results, out):
            progress(f"wrote {path}")
    print(markdown(results))
    return 0

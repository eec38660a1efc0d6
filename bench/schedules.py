"""One sweep of the schedules (fairqueue.roles.scheduling.sweep_schedules): with 10,000 and
100,000 schedules, of which 1,000 are due, the time from the sweep's first statement to its last
commit, as the application role; its cost should follow the due ticks, not the schedules.

Each run starts from an emptied table: the schedules are inserted in one statement (the due
ones a minute late, cron every minute in Europe/Berlin, catch_up one; the others due over the
next day), the table analyzed, then one sweep is timed. Sizes are interleaved over the
repeats; the median of each is reported.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fairqueue.db import Connection, connect
from fairqueue.roles.scheduling import sweep_schedules

from . import database
from .alone import measured_alone
from .formats import table
from .sizes import FULL, Sizes

# The bound for one sweep at the most schedules, and how much more it may take there
# than at the fewest.
MAX_SWEEP_S = 1.0
MAX_GROWTH = 2.0

_LOAD = """
insert into fairqueue.schedules
       (tenant_id, name, job_type, cron, timezone, max_attempts, catch_up, next_tick_at)
select 't' || (i %% 200), 's' || i, 'bench_tick', '* * * * *', 'Europe/Berlin', 3, 'one',
       case when i <= %(due)s then date_trunc('minute', now()) - interval '1 minute'
            else now() + (i %% 86400) * interval '1 second' + interval '1 minute' end
  from generate_series(1, %(schedules)s) i
"""


@dataclass(frozen=True)
class ScheduleSweepRun:
    schedules: int
    due: int
    made: int
    seconds: float


def _load(conn: Connection, schedules: int, due: int) -> None:
    conn.execute("truncate fairqueue.schedules")
    database.reset(conn)
    conn.execute(_LOAD, {"schedules": schedules, "due": due})
    conn.execute("analyze fairqueue.schedules")


def measure(
    conn: Connection, dsn: str, sizes: Sizes, progress: Callable[[str], None]
) -> list[ScheduleSweepRun]:
    runs = []
    for _ in range(sizes.schedule_repeats):
        for count in sizes.schedule_counts:
            _load(conn, count, sizes.schedule_due)
            with connect(dsn, autocommit=True, as_app_role=True) as app:
                started = time.perf_counter()
                made = sweep_schedules(app, None).ticks_made
                seconds = time.perf_counter() - started
            runs.append(ScheduleSweepRun(count, sizes.schedule_due, made, seconds))
            progress(
                f"schedules: one sweep over {count:,} ({sizes.schedule_due:,} due) made"
                f" {made:,} jobs in {seconds:.3f} s"
            )
    conn.execute("truncate fairqueue.schedules")
    database.reset(conn)
    return runs


def medians(runs: list[ScheduleSweepRun]) -> list[ScheduleSweepRun]:
    """One run per count of schedules, fewest first: the median time of its repeats."""
    counts = sorted({r.schedules for r in runs})
    out = []
    for count in counts:
        mine = [r for r in runs if r.schedules == count]
        out.append(
            ScheduleSweepRun(
                count, mine[0].due, mine[0].made, statistics.median(r.seconds for r in mine)
            )
        )
    return out


def growth(runs: list[ScheduleSweepRun]) -> float | None:
    """The sweep's time at the most schedules over its time at the fewest."""
    found = medians(runs)
    if len(found) < 2 or not found[0].seconds:
        return None
    return found[-1].seconds / found[0].seconds


def as_json(runs: list[ScheduleSweepRun]) -> dict[str, Any]:
    ratio = growth(runs)
    return {
        "runs": [asdict(r) for r in runs],
        "medians": [asdict(r) for r in medians(runs)],
        "growth": None if ratio is None else round(ratio, 3),
    }


def section(runs: list[ScheduleSweepRun], sizes: Sizes) -> list[str]:
    found = medians(runs)
    fewest = found[0].seconds if found else None
    rows = [
        [
            f"{r.schedules:,}",
            f"{r.due:,}",
            f"{r.made:,}",
            f"{r.seconds:.3f}",
            f"{r.seconds / fewest:.2f}" if fewest else "-",
        ]
        for r in found
    ]
    return [
        f"### Schedules: one sweep, {sizes.schedule_due:,} due",
        "",
        "One sweep_schedules call as the application role, from an emptied table of schedules"
        " of which the due ones are a minute late (bench/schedules.py); the median of"
        f" {sizes.schedule_repeats} runs, the sizes interleaved.",
        "",
        *table(
            ["schedules", "due", "jobs made", "seconds", "vs the fewest schedules"],
            "rrrrr",
            rows,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.schedules --dsn DSN``: this workload alone, at the full run's sizes,
    in a scratch database (superuser); prints its section of the report."""
    runs = measured_alone("python -m bench.schedules", __doc__, measure, argv)
    print("\n".join(section(runs, FULL)))
    ratio = growth(runs)
    print(f"\ngrowth from the fewest schedules to the most: {ratio:.2f}x" if ratio else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())

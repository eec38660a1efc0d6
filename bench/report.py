"""The results: the machine, the figures as ratios, written as JSON and as a markdown table."""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

import fairqueue
from fairqueue.db import Connection

from .latency import LatencyCase
from .sizes import Sizes
from .throughput import LOOP_TITLES, LOOPS, Drain, medians

SETTINGS = ("shared_buffers", "synchronous_commit", "fsync", "jit")


@dataclass(frozen=True)
class Machine:
    nproc: int
    memory_gib: float
    cpu: str
    postgres: str
    postgres_settings: dict[str, str]
    server: str
    python: str
    psycopg: str
    platform: str
    date: str


def _meminfo_gib() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _nproc() -> int:
    """What `nproc` prints: the CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 0


def machine(conn: Connection, server: str) -> Machine:
    def setting(name: str) -> str:
        row = conn.execute("select current_setting(%s) as value", (name,)).fetchone()
        assert row is not None
        return str(row["value"])

    return Machine(
        nproc=_nproc(),
        memory_gib=_meminfo_gib(),
        cpu=_cpu_model(),
        postgres=setting("server_version"),
        postgres_settings={name: setting(name) for name in SETTINGS},
        server=server,
        python=platform.python_version(),
        psycopg=psycopg.__version__,
        platform=platform.platform(),
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


def library_fingerprint() -> str:
    """A digest of the library's code, queries and migrations: which fairqueue was measured."""
    root = Path(fairqueue.__file__).resolve().parent
    files = [
        *sorted(root.glob("*.py")),
        *sorted((root / "queries").glob("*.sql")),
        *sorted((root / "migrations").glob("*.sql")),
    ]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class Results:
    mode: str
    machine: Machine
    # library_fingerprint() when the run started, and whether it differed when it ended.
    library: str
    library_changed: bool
    sizes: Sizes
    throughput: list[Drain]
    latency: list[LatencyCase]
    elapsed_s: float

    @property
    def drains(self) -> list[Drain]:
        """One run per loop and invocation count: the median of the repeats."""
        return medians(self.throughput)

    def bare_rate(self, invocations: int) -> float:
        for d in self.drains:
            if d.loop == "bare" and d.invocations == invocations:
                return d.done_per_s
        raise LookupError(f"no bare run with {invocations} invocations")

    def vs_bare(self, drain: Drain) -> float:
        return drain.done_per_s / self.bare_rate(drain.invocations)

    @property
    def baseline(self) -> LatencyCase:
        return self.latency[0]

    def as_json(self) -> dict[str, Any]:
        base = self.baseline
        return {
            "benchmark": "fairqueue #2: pipeline throughput and claim latency",
            "mode": self.mode,
            "machine": asdict(self.machine),
            "library": self.library,
            "library_changed_during_run": self.library_changed,
            "sizes": asdict(self.sizes),
            "elapsed_s": round(self.elapsed_s, 1),
            "throughput": [
                {
                    **asdict(d),
                    "title": LOOP_TITLES[d.loop],
                    "claimed_per_s": round(d.claimed_per_s, 1),
                    "completed_per_s": round(d.done_per_s, 1),
                    "ratio_to_bare": round(self.vs_bare(d), 4),
                    "run_errors_all_runs": sum(
                        r.run_errors
                        for r in self.throughput
                        if (r.loop, r.invocations) == (d.loop, d.invocations)
                    ),
                    "completed_per_s_all_runs": [
                        round(r.done_per_s, 1)
                        for r in self.throughput
                        if (r.loop, r.invocations) == (d.loop, d.invocations)
                    ],
                }
                for d in self.drains
            ],
            "claim_latency": [
                {
                    **asdict(c),
                    "p50_ratio_to_baseline": round(c.p50_ms / base.p50_ms, 3),
                    "p99_ratio_to_baseline": round(c.p99_ms / base.p99_ms, 3),
                }
                for c in self.latency
            ],
        }


def count(n: int) -> str:
    """10000 -> 10k, 1000000 -> 1M; anything else with separators."""
    for unit, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return f"{n:,}"


def _table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    marks = {"l": "---", "r": "--:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def markdown(results: Results) -> str:
    m, s = results.machine, results.sizes
    pg = ", ".join(f"{k} {v}" for k, v in m.postgres_settings.items())
    runs = "one run" if s.repeats == 1 else f"the median of {s.repeats} runs"
    out = [
        f"## fairqueue benchmark ({results.mode})",
        "",
        *_table(
            ["machine", ""],
            "ll",
            [
                ["nproc", str(m.nproc)],
                ["memory", f"{m.memory_gib} GiB"],
                ["CPU", m.cpu],
                ["Postgres", f"{m.postgres}, {m.server}; {pg}"],
                ["Python", f"{m.python} (psycopg {m.psycopg})"],
                ["fairqueue", f"sources sha256 {results.library}"],
                ["date", m.date],
            ],
        ),
        "",
        f"### Throughput: {s.throughput_jobs:,} no-op jobs, batch {s.throughput_batch},"
        f" {s.tenants} tenants / {s.groups:,} groups",
        "",
        f"Each invocation is a process; each row is {runs}. Ratios are completed/s against the"
        " bare loop with as many invocations.",
        "",
    ]
    drains = sorted(results.drains, key=lambda d: (d.invocations, LOOPS.index(d.loop)))
    out += _table(
        ["loop", "invocations", "seconds", "claimed/s", "completed/s", "vs bare", "run errors"],
        "lrrrrrr",
        [
            [
                LOOP_TITLES[d.loop],
                str(d.invocations),
                f"{d.seconds:.2f}",
                f"{d.claimed_per_s:,.0f}",
                f"{d.done_per_s:,.0f}",
                f"{results.vs_bare(d):.3f}",
                str(d.run_errors) if d.loop == "fairqueue" else "-",
            ]
            for d in drains
        ],
    )
    failed = [d for d in results.throughput if d.run_errors]
    if failed:
        total = sum(d.run_errors for d in failed)
        example = (failed[0].run_error_example or "").replace("\n", " ")
        out += [
            "",
            f"Run errors: {total} fairqueue run(s) across all repeats stopped on an error and were"
            f" followed by a new run (as the next cron tick would), e.g. `{example}`.",
        ]
    shares = [
        f"x{d.invocations}: {d.completion_share:.0%}"
        for d in drains
        if d.loop == "fairqueue" and d.completion_share is not None
    ]
    if shares:
        out += [
            "",
            "Share of a fairqueue invocation's time spent running batches (the no-op handlers and"
            " marking the jobs done); the rest is claiming: " + ", ".join(shares) + ".",
        ]
    base = results.baseline
    out += [
        "",
        f"### Claim latency: claim_batch (batch {s.claim_batch}) with {s.pending:,} pending",
        "",
        f"Only the claim is timed; {s.samples} claims per row, each batch released untimed."
        f" Ratios are against the {count(base.history)}-history row.",
        "",
    ]
    rows = []
    for c in results.latency:
        age = c.history_age
        if c.first_claim_ms is not None:
            age += f"; first claim {c.first_claim_ms:,.0f} ms"
        rows.append(
            [
                count(c.history),
                age,
                f"{c.p50_ms:.2f}",
                f"{c.p99_ms:.2f}",
                f"{c.p50_ms / base.p50_ms:.2f}",
                f"{c.p99_ms / base.p99_ms:.2f}",
                f"{c.served_rows:,}",
                f"{c.plan.scan_rows_estimated:,} / {c.plan.scan_rows_actual:,}",
                c.plan.joins,
            ]
        )
    out += _table(
        [
            "history",
            "finished",
            "p50 ms",
            "p99 ms",
            "p50 ratio",
            "p99 ratio",
            "served rows",
            "claimable rows est. / actual",
            "claim joins",
        ],
        "llrrrrrrl",
        rows,
    )
    out += [
        "",
        "The last two columns are from one EXPLAIN ANALYZE of the claim query per row (rolled"
        " back): in its ranking step, the planner's estimate of the claimable jobs against the"
        " real count, and the join methods it chose from that estimate.",
    ]
    out += ["", f"Whole run: {results.elapsed_s:.0f} s."]
    if results.library_changed:
        out += ["", "**The library's sources changed during this run: its figures mix versions.**"]
    out += [""]
    return "\n".join(out)


def write(results: Results, folder: Path) -> list[Path]:
    """latest.json and latest.md, each written to a .tmp file first and renamed into place."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        folder / "latest.json": json.dumps(results.as_json(), indent=2) + "\n",
        folder / "latest.md": markdown(results),
    }
    for path, text in files.items():
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return list(files)

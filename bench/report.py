"""The results written out: JSON, a markdown report with every figure beside its peers', and a
PNG chart."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import (
    admission_report,
    caps,
    chart,
    claim_scale,
    claim_tenants,
    cost,
    dashboard,
    doorbells,
    enqueue,
    fairness_tenants,
    schedules,
    shares,
)
from .formats import MIB, count, percent, plural, ratio, table, title
from .results import BARE, FAIRQUEUE, FAIRQUEUE_DRAINS, Results
from .targets import evaluate
from .throughput import FAIRQUEUE_LOOPS, LOOP_TITLES, LOOPS


def drain_rows(results: Results) -> list[dict[str, Any]]:
    """Per worker count: each system's jobs/s and the ratio of each fairqueue drain (the peers'
    jobs, and jobs in many groups) to every other system."""
    rows = []
    for workers in results.sizes.invocations:
        rates = {s: results.rate(s, workers) for s in results.systems}
        ratios = {}
        for ours in FAIRQUEUE_DRAINS:
            rate = rates[ours]
            ratios[f"{ours}_over"] = {
                s: round(rate / r, 4) if rate and r else None
                for s, r in rates.items()
                if s not in FAIRQUEUE_DRAINS
            }
        rows.append(
            {
                "workers": workers,
                "jobs_per_s": {s: round(r, 1) if r else None for s, r in rates.items()},
                **ratios,
            }
        )
    return rows


def as_json(results: Results) -> dict[str, Any]:
    base = {c.pending: c for c in results.last_day if c.history == _base_history(results)}
    return {
        "benchmark": "fairqueue beside pgqueuer and procrastinate: drain, claim latency,"
        " fairness under skew and between tenants, table health, enqueue, admission,"
        " doorbell latency",
        "mode": results.mode,
        "machine": asdict(results.machine),
        "library": results.library,
        "library_changed_during_run": results.library_changed,
        "sizes": asdict(results.sizes),
        "settings": results.settings,
        "elapsed_s": round(results.elapsed_s, 1),
        "targets": [asdict(t) for t in evaluate(results)],
        "drain": drain_rows(results),
        "peer_drains": [
            {**asdict(d), "completed_per_s": round(d.done_per_s, 1)} for d in results.peer_drains
        ],
        "throughput": [
            {
                **asdict(d),
                "title": LOOP_TITLES[d.loop],
                "claimed_per_s": round(d.claimed_per_s, 1),
                "completed_per_s": round(d.done_per_s, 1),
                "ratio_to_bare": round(results.vs_bare(d), 4),
                "run_errors_all_runs": sum(
                    r.run_errors
                    for r in results.throughput
                    if (r.loop, r.invocations) == (d.loop, d.invocations)
                ),
                "completed_per_s_all_runs": [
                    round(r.done_per_s, 1)
                    for r in results.throughput
                    if (r.loop, r.invocations) == (d.loop, d.invocations)
                ],
            }
            for d in results.drains
        ],
        "claim_latency": [
            {
                **asdict(c),
                "p99_ratio_to_base_history": round(c.p99_ms / base[c.pending].p99_ms, 3)
                if c.pending in base
                else None,
            }
            for c in results.latency
        ],
        "claim_scale": claim_scale.as_json(results.claim_scale),
        "claim_options": claim_scale.options_json(results.claim_options),
        "tenant_claim": claim_tenants.as_json(results.tenant_claim),
        "fairness": [
            {
                **asdict(f),
                "jain_mean": round(f.jain_mean, 4),
                "jain_min": round(f.jain_min, 4),
                "scored_windows": len(f.scored),
            }
            for f in results.fairness
        ],
        "tenant_fairness": fairness_tenants.as_json(results.tenant_fairness),
        "health": [
            {**asdict(h), "hot_ratio": h.hot_ratio, "dead_ratio": h.dead_ratio}
            for h in results.health
        ],
        "enqueue": enqueue.as_json(results.enqueue, results.sizes),
        "admission": admission_report.as_json(results.admission, results.sizes),
        "doorbells": doorbells.as_json(results.doorbells),
        "schedules": schedules.as_json(results.schedules),
        "shares": shares.as_json(results.shares),
        "cost": cost.as_json(results.cost),
        "caps": caps.as_json(results.caps),
        "dashboard": dashboard.as_json(results.dashboard),
    }


def _base_history(results: Results) -> int:
    """The history the latency ratios are against: the second size (100k in the full run)."""
    histories = results.sizes.histories
    return histories[1] if len(histories) > 1 else histories[0]


def machine_section(results: Results) -> list[str]:
    m = results.machine
    pg = ", ".join(f"{k} {v}" for k, v in m.postgres_settings.items())
    packages = ", ".join(f"{k} {v}" for k, v in m.packages.items())
    return table(
        ["machine", ""],
        "ll",
        [
            ["nproc", str(m.nproc)],
            ["memory", f"{m.memory_gib} GiB"],
            ["CPU", m.cpu],
            ["Postgres", f"{m.postgres}, {m.server}; {pg}"],
            ["Python", f"{m.python} ({packages})"],
            ["fairqueue", f"sources sha256 {results.library}"],
            ["date", m.date],
        ],
    )


def targets_section(results: Results) -> list[str]:
    rows = [
        [t.goal, t.fairqueue, t.other, f"{t.ratio:.2f}", "met" if t.met else "**not met**"]
        for t in evaluate(results)
    ]
    return [
        "### Targets",
        "",
        "Reported, not asserted. Drain targets compare each system at its best worker count;"
        " the ratio is fairqueue's figure over the other.",
        "",
        *table(["target", "fairqueue", "compared with", "ratio", ""], "lllrl", rows),
    ]


def drain_section(results: Results) -> list[str]:
    s = results.sizes
    runs = "one run" if s.repeats == 1 else f"the median of {s.repeats} runs"
    systems = results.systems
    # The peers first, then the ceiling, as the issue orders the ratios.
    others = [x for x in systems if x not in (*FAIRQUEUE_DRAINS, BARE)] + [BARE]
    rows = []
    for row in drain_rows(results):
        rates = row["jobs_per_s"]
        rows.append(
            [
                str(row["workers"]),
                *(f"{rates[x]:,.0f}" if rates[x] else "-" for x in systems),
                *(ratio(rates[FAIRQUEUE], rates[x]) for x in others),
            ]
        )
    header = [
        "workers",
        *(f"{title(x)} jobs/s" for x in systems),
        *(f"fairqueue / {title(x)}" for x in others),
    ]
    return [
        f"### Drain: {s.throughput_jobs:,} no-op jobs preloaded, then drained",
        "",
        "Each worker is a process of its own; jobs/s is from the first claim to the last"
        f" completion; each figure is {runs}. Every system drains the same jobs (no tenant, no"
        " group); fairqueue also drains them spread over many groups and tenants, its own"
        " column (the ratios are of the first). Settings:",
        "",
        *(f"- {title(x)}: {results.settings[x]}" for x in systems),
        "",
        *table(header, "r" * len(header), rows),
        "",
        *fairqueue_loops_section(results),
    ]


def fairqueue_loops_section(results: Results) -> list[str]:
    """fairqueue beside the bare loop on its own table: where its time goes."""
    drains = sorted(results.drains, key=lambda d: (d.invocations, LOOPS.index(d.loop)))
    lines = [
        "fairqueue beside the bare loop on a minimal table and on fairqueue.jobs (its indexes and"
        " served trigger, no fairness):",
        "",
        *table(
            ["loop", "workers", "seconds", "completed/s", "vs bare", "run errors"],
            "lrrrrr",
            [
                [
                    LOOP_TITLES[d.loop],
                    str(d.invocations),
                    f"{d.seconds:.2f}",
                    f"{d.done_per_s:,.0f}",
                    f"{results.vs_bare(d):.3f}",
                    str(d.run_errors) if d.loop in FAIRQUEUE_LOOPS else "-",
                ]
                for d in drains
            ],
        ),
    ]
    failed = [d for d in results.throughput if d.run_errors]
    if failed:
        total = sum(d.run_errors for d in failed)
        example = (failed[0].run_error_example or "").replace("\n", " ")
        lines += [
            "",
            f"Run errors: {total} fairqueue run(s) across all repeats stopped on an error and were"
            f" followed by a new run (as the next cron tick would), e.g. `{example}`.",
        ]
    shares = [
        f"{title(d.loop)} x{d.invocations}: {d.completion_share:.0%}"
        for d in drains
        if d.loop in FAIRQUEUE_LOOPS and d.completion_share is not None
    ]
    if shares:
        lines += [
            "",
            "Share of a fairqueue invocation's time spent running batches (the no-op handlers and"
            " marking the jobs done); the rest is claiming: " + ", ".join(shares) + ".",
        ]
    return lines


def latency_section(results: Results) -> list[str]:
    s = results.sizes
    base_history = _base_history(results)
    base = {c.pending: c for c in results.last_day if c.history == base_history}
    rows = []
    for c in results.latency:
        age = c.history_age
        if c.first_claim_ms is not None:
            age += f"; first claim {c.first_claim_ms:,.0f} ms"
        against = base.get(c.pending)
        rows.append(
            [
                count(c.pending),
                count(c.history),
                age,
                f"{c.p50_ms:.2f}",
                f"{c.p99_ms:.2f}",
                ratio(c.p99_ms, against.p99_ms if against else None),
                f"{c.served_rows:,}",
                f"{c.plan.jobs_rows_read:,}",
                f"{c.plan.served_rows_read:,}",
            ]
        )
    return [
        f"### Claim latency: claim_batch (batch {s.claim_batch}), fairness on",
        "",
        f"Only the claim is timed; {s.samples} claims per row, each batch released untimed."
        f" History is generated in SQL (generate_series). p99 ratios are against the"
        f" {count(base_history)}-history row with the same pending backlog.",
        "",
        *table(
            [
                "pending",
                "history",
                "finished",
                "p50 ms",
                "p99 ms",
                f"p99 vs {count(base_history)}",
                "served rows",
                "jobs rows read",
                "served rows read",
            ],
            "rrlrrrrrr",
            rows,
        ),
        "",
        "The last two columns are from one claim per row (rolled back), as the server counts"
        " them: the entries its index scans of fairqueue.jobs and fairqueue.served returned and"
        " the rows of any scan of either table itself, all loops.",
    ]


def claim_scale_section(results: Results) -> list[str]:
    s = results.sizes
    header, align, rows = claim_scale.report_table(results.claim_scale)
    return [
        f"### Claim latency against groups: claim_batch (batch {s.scale_batch}), fairness on",
        "",
        f"For each count of groups with pending work: {claim_scale.JOBS_PER_GROUP} pending jobs"
        f" per group, one tenant per {claim_scale.GROUPS_PER_TENANT} groups (the plan mix of the"
        " other workloads), loaded in SQL into emptied tables. The cold row is the first claim"
        " right after the load, before the bench analyzes (the library may analyze inside it);"
        f" then VACUUM ANALYZE, {s.scale_warmup} untimed claims and {s.scale_samples} timed ones"
        f"{' (the p99 of so few is their slowest)' if s.scale_samples <= 100 else ''}. A timed"
        " claim is the whole claim_batch call: the claim and the read of the batch under each"
        " tenant's clamp; each batch is given back untimed, so the backlog stays the same.",
        "",
        *table(header, align, rows),
        "",
        "The same claim with each option on the order, on the same loads at the fewest and the"
        " most groups (each option's first claims, which stamp its quanta on the standings,"
        " untimed):",
        "",
        *table(
            ["option", "groups with work", "claims timed", "p50 ms", "p99 ms", "p99 vs fewest"],
            "lrrrrr",
            claim_scale.options_table(results.claim_options),
        ),
    ]


def fairness_section(results: Results) -> list[str]:
    s = results.sizes
    rows = [
        [
            title(f.system),
            f"{f.groups:,}",
            f"{len(f.scored)} of {len(f.jain)}",
            f"{f.jain_mean:.3f}",
            f"{f.jain_min:.3f}",
            f"{f.longest_wait:,} ({f.longest_wait / f.jobs:.0%})",
            f"{f.longest_wait_s:.2f}",
            f"{f.longest_wait_group} ({f.longest_wait_plan})",
            f"{f.seconds:.1f}",
        ]
        for f in results.fairness
    ]
    return [
        f"### Fairness under skew: {s.fairness_jobs:,} arrivals over {s.groups:,} groups",
        "",
        f"One group brings {s.heavy_share:.0%} of the arrivals; the others share the rest in"
        f" Zipf proportion (exponent {s.zipf_exponent:g}). Tenants have the load's plan mix;"
        " the peers get each job's plan priority as their job priority and are otherwise first"
        " in, first out. All arrivals are enqueued in arrival order, then one worker of each"
        " system drains them.",
        "",
        f"Metric (bench/fairness.py): completions in windows of {s.fairness_window:,}. At a"
        " window's start each group's remaining jobs are its demand; its fair share of the"
        " window is the max-min fair allocation of the window's completions over the demands,"
        " plan by plan in priority order. Jain's index of the window is taken over the groups"
        " with a positive fair share, of completions divided by fair share; windows with fewer"
        " than two such groups are not scored. The longest wait is the most completions of"
        " other jobs between two completions of one group (or before its first) while it had"
        " work waiting.",
        "",
        *table(
            [
                "system",
                "groups",
                "windows scored",
                "Jain mean",
                "Jain worst",
                "longest wait (completions)",
                "longest wait s",
                "waited by",
                "drain s",
            ],
            "lrrrrrrlr",
            rows,
        ),
    ]


def health_section(results: Results) -> list[str]:
    rows = [
        [
            title(h.system),
            h.table,
            f"{h.churned:,}",
            f"{h.live_tuples:,}",
            f"{h.dead_tuples:,}",
            percent(h.dead_ratio),
            f"{h.updates:,}",
            percent(h.hot_ratio),
            f"{h.deletes:,}",
            str(h.autovacuums),
            str(h.vacuums),
            f"{h.table_bytes / MIB:,.1f}",
            f"{h.index_bytes / MIB:,.1f}",
        ]
        for h in results.health
    ]
    return [
        "### Table health after churn",
        "",
        f"Each system's jobs enqueued, claimed and completed in rounds of"
        f" {results.sizes.churn_round:,} by {plural(results.sizes.churn_workers, 'worker')},"
        " from emptied"
        " tables, with autovacuum as configured (bench/health.py); fairqueue's jobs done with"
        " no output leave its hot table at their completion, and the rest after each round, as"
        " the backstop moves them and vacuums the hot tables where the server lets it"
        " (PostgreSQL 17 and later). Counts are from"
        " pg_stat_user_tables after the churn (updates and deletes counted during it), sizes"
        " from pg_relation_size and pg_indexes_size.",
        "",
        *table(
            [
                "system",
                "table",
                "jobs churned",
                "live tuples",
                "dead tuples",
                "dead",
                "updates",
                "HOT",
                "deletes",
                "autovacuums",
                "backstop vacuums",
                "table MiB",
                "indexes MiB",
            ],
            "llrrrrrrrrrrr",
            rows,
        ),
    ]


def markdown(results: Results) -> str:
    out = [
        f"## fairqueue benchmark ({results.mode})",
        "",
        *machine_section(results),
        "",
        *targets_section(results),
        "",
        *drain_section(results),
        "",
        *latency_section(results),
        "",
        *claim_scale_section(results),
        "",
        *claim_tenants.section(results.tenant_claim, results.sizes),
        "",
        *fairness_section(results),
        "",
        *fairness_tenants.section(results.tenant_fairness, results.sizes),
        "",
        *health_section(results),
        "",
        *enqueue.section(results.enqueue, results.sizes),
        "",
        *admission_report.section(results.admission, results.sizes),
        "",
        *doorbells.section(results.doorbells),
        *schedules.section(results.schedules, results.sizes),
        "",
        *shares.section(results.shares, results.sizes),
        "",
        *cost.section(results.cost, results.sizes),
        "",
        *caps.section(results.caps, results.sizes),
        "",
        *dashboard.section(results.dashboard),
        f"Whole run: {results.elapsed_s:.0f} s.",
    ]
    if results.library_changed:
        out += ["", "**The library's sources changed during this run: its figures mix versions.**"]
    out += [""]
    return "\n".join(out)


def write(results: Results, folder: Path) -> list[Path]:
    """latest.json, latest.md and latest.png, each written to a .tmp file first and renamed
    into place."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = {
        folder / "latest.json": json.dumps(as_json(results), indent=2) + "\n",
        folder / "latest.md": markdown(results),
    }
    for path, text in texts.items():
        _tmp(path).write_text(text, encoding="utf-8")
    png = folder / "latest.png"
    chart.draw(results, _tmp(png))
    paths = [*texts, png]
    for path in paths:
        _tmp(path).replace(path)
    return paths


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")

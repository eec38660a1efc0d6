"""The results as one PNG: drain rates, claim latency, fairness per window, table sizes."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .formats import MIB, count, percent, plural, title
from .results import Results

# One colour per system, the same in every panel.
COLOURS = {
    "bare": "#9e9e9e",
    "fairqueue": "#1f77b4",
    "fairqueue_groups": "#aec7e8",
    "fairqueue_groups_q4": "#9edae5",
    "fairqueue_widest_q4": "#17becf",
    "pgqueuer": "#ff7f0e",
    "procrastinate": "#2ca02c",
}
# Line style and marker per system, so lines that coincide (the FIFO peers) stay visible.
LINES = {"fairqueue": ("-", "o"), "pgqueuer": ("--", "s"), "procrastinate": (":", "^")}
BAR_SPAN = 0.8


def colour(system: str) -> str:
    return COLOURS.get(system, "#7f7f7f")


def draw(results: Results, path: Path) -> None:
    figure = Figure(figsize=(14, 10), layout="constrained")
    drains, latency, fairness, health = figure.subplots(2, 2).flat
    _drains(drains, results)
    _latency(latency, results)
    _fairness(fairness, results)
    _health(health, results)
    m = results.machine
    figure.suptitle(
        f"fairqueue benchmark ({results.mode}): {m.nproc} CPUs, {m.memory_gib} GiB,"
        f" Postgres {m.postgres} ({m.server}), {m.date}"
    )
    figure.savefig(path, format="png", dpi=100)


def _drains(ax: Axes, results: Results) -> None:
    systems = results.systems
    width = BAR_SPAN / len(systems)
    workers = results.sizes.invocations
    for k, system in enumerate(systems):
        rates = [results.rate(system, n) or 0.0 for n in workers]
        xs = [i + (k - (len(systems) - 1) / 2) * width for i in range(len(workers))]
        ax.bar(xs, rates, width, label=title(system), color=colour(system))
    ax.set_xticks(range(len(workers)), [plural(n, "worker") for n in workers])
    ax.set_yscale("log")
    ax.set_ylabel("jobs/s (log)")
    ax.set_title(f"Drain: {results.sizes.throughput_jobs:,} no-op jobs")
    ax.legend()


def _latency(ax: Axes, results: Results) -> None:
    histories = results.sizes.histories
    for pending in results.sizes.pendings:
        cases = [results.latency_case(pending, h) for h in histories]
        for quantile, style in (("p50", "--"), ("p99", "-")):
            ys = [getattr(c, f"{quantile}_ms") if c else float("nan") for c in cases]
            ax.plot(
                range(len(histories)),
                ys,
                style,
                marker="o",
                label=f"{quantile}, {count(pending)} pending",
            )
    ax.set_xticks(range(len(histories)), [count(h) for h in histories])
    ax.set_xlabel("rows of last-day history")
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    ax.set_title(f"fairqueue claim latency (batch {results.sizes.claim_batch}, fairness on)")
    ax.legend()


def _fairness(ax: Axes, results: Results) -> None:
    for f in results.fairness:
        points = [(k + 1, j) for k, j in enumerate(f.jain) if j is not None]
        style, marker = LINES.get(f.system, ("-", "o"))
        ax.plot(
            [k for k, _ in points],
            [j for _, j in points],
            style,
            marker=marker,
            markerfacecolor="none",
            label=f"{title(f.system)} (mean {f.jain_mean:.3f})",
            color=colour(f.system),
        )
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(f"window of {results.sizes.fairness_window:,} completions (scored windows)")
    ax.set_ylabel("Jain's index over fair shares")
    ax.set_title(
        f"Fairness under skew: one group brings {results.sizes.heavy_share:.0%} of the arrivals"
    )
    ax.legend()


def _health(ax: Axes, results: Results) -> None:
    labels = [f"{title(h.system)}\n{h.table}" for h in results.health]
    table = [h.table_bytes / MIB for h in results.health]
    indexes = [h.index_bytes / MIB for h in results.health]
    colours = [colour(h.system) for h in results.health]
    xs = range(len(labels))
    ax.bar(xs, table, BAR_SPAN, color=colours, label="table")
    ax.bar(xs, indexes, BAR_SPAN, bottom=table, color=colours, alpha=0.45, label="indexes")
    for x, h, top in zip(
        xs, results.health, (t + i for t, i in zip(table, indexes, strict=True)), strict=True
    ):
        ax.annotate(
            f"{h.churned:,} jobs\ndead {percent(h.dead_ratio)}",
            (x, top),
            ha="center",
            va="bottom",
            fontsize=7,
        )
    ax.set_xticks(xs, labels, fontsize=7)
    ax.set_ylabel("MiB")
    ax.set_title("Table health after churn: size (table, indexes) and dead tuples")
    ax.legend()

"""How figures are written, the same in the markdown report and on the chart."""

from __future__ import annotations

TITLES = {
    "bare": "bare loop",
    "fairqueue": "fairqueue",
    "fairqueue_groups": "fairqueue, many groups",
    "fairqueue_groups_q4": "fairqueue, many groups, quantum 4",
    "fairqueue_widest_q4": "fairqueue, a job a group, quantum 4",
    "pgqueuer": "pgqueuer",
    "procrastinate": "procrastinate",
    "fairqueue_tenant": 'fairqueue, fair_share="tenant"',
    "fairqueue_group": 'fairqueue, fair_share="group"',
}
MIB = 1024 * 1024


def title(system: str) -> str:
    return TITLES.get(system, system)


def count(n: int) -> str:
    """10000 -> 10k, 1000000 -> 1M; anything else with separators."""
    for unit, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return f"{n:,}"


def ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}" if ours and theirs else "-"


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """A markdown table; `align` has one letter per column, l or r."""
    marks = {"l": "---", "r": "--:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines

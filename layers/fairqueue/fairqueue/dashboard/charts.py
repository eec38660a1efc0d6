"""The charts' Chart.js configurations, built from what the pages read: plain JSON that the
page carries in a data block and static/dashboard.js hands to Chart.js."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from ..overview import ServedGroup
from ..runs import STOP_REASONS
from .reads import PlanShare, RunHour, TenantService

# One colour per stop reason (and for runs still open), readable on white and told apart by
# people who do not see red from green.
STOP_COLOURS: Final = {
    "no_work": "#1b7837",
    "time_budget": "#2166ac",
    "quota_reserve": "#e08214",
    "quota_exhausted": "#b35806",
    "error": "#b2182b",
    "open": "#777777",
}
BAR_COLOUR: Final = "#2166ac"
PLAN_COLOURS: Final = ("#2166ac", "#1b7837", "#e08214", "#762a83", "#b2182b", "#777777")
HOURS: Final = 24
# How many tenants and groups a service chart shows.
CHARTED: Final = 20

Chart = dict[str, Any]


def _hour_labels(now: datetime) -> list[datetime]:
    last = now.replace(minute=0, second=0, microsecond=0)
    return [last - timedelta(hours=HOURS - 1 - n) for n in range(HOURS)]


def runs_by_hour(hours: Sequence[RunHour], now: datetime) -> Chart:
    """The day's runs per hour, stacked by how they stopped."""
    slots = _hour_labels(now)
    index = {slot: n for n, slot in enumerate(slots)}
    datasets = []
    for reason in (*STOP_REASONS, "open"):
        counts = [0] * HOURS
        for hour in hours:
            if (hour.stop_reason or "open") == reason and hour.hour in index:
                counts[index[hour.hour]] += hour.runs
        if any(counts):
            datasets.append(
                {"label": reason, "data": counts, "backgroundColor": STOP_COLOURS[reason]}
            )
    return {
        "type": "bar",
        "data": {"labels": [f"{s:%H}:00" for s in slots], "datasets": datasets},
        "options": _stacked("runs started"),
    }


def throughput(hours: Sequence[RunHour], now: datetime) -> Chart:
    """Jobs the day's runs finished per hour: done and failed."""
    slots = _hour_labels(now)
    index = {slot: n for n, slot in enumerate(slots)}
    done, failed = [0] * HOURS, [0] * HOURS
    for hour in hours:
        if hour.hour in index:
            done[index[hour.hour]] += hour.jobs_done
            failed[index[hour.hour]] += hour.jobs_failed
    return {
        "type": "bar",
        "data": {
            "labels": [f"{s:%H}:00" for s in slots],
            "datasets": [
                {"label": "done", "data": done, "backgroundColor": STOP_COLOURS["no_work"]},
                {"label": "failed", "data": failed, "backgroundColor": STOP_COLOURS["error"]},
            ],
        },
        "options": _stacked("jobs finished"),
    }


def tenant_service(tenants: Sequence[TenantService]) -> Chart:
    """Jobs served per tenant in the last day, the most served first."""
    shown = tenants[:CHARTED]
    return _bars(
        [t.tenant_id or "(no tenant)" for t in shown], [t.served for t in shown], "jobs served"
    )


def group_service(groups: Sequence[ServedGroup]) -> Chart:
    """Jobs served per group and type in the last day, the most served first."""
    shown = groups[:CHARTED]
    return _bars(
        [f"{g.group_key} ({g.type})" for g in shown], [g.served for g in shown], "jobs served"
    )


def plan_shares(plans: Sequence[PlanShare]) -> Chart:
    """Each plan's share of the day's service."""
    return {
        "type": "doughnut",
        "data": {
            "labels": [p.plan or "(no plan)" for p in plans],
            "datasets": [
                {
                    "label": "jobs served",
                    "data": [p.served for p in plans],
                    "backgroundColor": [
                        PLAN_COLOURS[n % len(PLAN_COLOURS)] for n in range(len(plans))
                    ],
                }
            ],
        },
        "options": {"animation": False, "responsive": True, "maintainAspectRatio": False},
    }


def _bars(labels: list[str], values: list[int], what: str) -> Chart:
    return {
        "type": "bar",
        "data": {
            "labels": labels,
            "datasets": [{"label": what, "data": values, "backgroundColor": BAR_COLOUR}],
        },
        "options": {
            "animation": False,
            "responsive": True,
            "maintainAspectRatio": False,
            "indexAxis": "y",
            "plugins": {"legend": {"display": False}},
        },
    }


def _stacked(what: str) -> dict[str, Any]:
    return {
        "animation": False,
        "responsive": True,
        "maintainAspectRatio": False,
        "scales": {
            "x": {"stacked": True},
            "y": {"stacked": True, "beginAtZero": True, "title": {"display": True, "text": what}},
        },
    }

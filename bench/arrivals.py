"""The jobs a workload hands to every system alike, in arrival order."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arrival:
    """One job: its tenant, the fairness group it belongs to, and the priority its tenant's
    plan gives it (a peer's job priority; fairqueue reads the plan from the tenant row)."""

    tenant: str
    group: str
    priority: int


def no_op_jobs(count: int) -> list[Arrival]:
    """The drain workload's jobs: no tenant, no group, one priority."""
    return [Arrival(tenant="", group="", priority=0)] * count

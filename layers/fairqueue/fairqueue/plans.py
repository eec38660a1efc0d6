"""Plans: one object says how each plan ranks, for the claim and for people alike, and the
tenant's plan that ``set_plan`` records."""

import math
from dataclasses import dataclass
from typing import Literal

from .db import Connection
from .errors import ConfigurationError, UnknownPlan
from .inputs import MAX_QUANTUM
from .queries import query
from .tenancy import tenant_scope

# How a stage's claim weighs plans (Stage.order). priority: a higher plan's groups all go first.
# shares: no tiers; each plan's groups are served in proportion to its weight, the groups of a
# plan of weight w taking a quantum of q x w.
Order = Literal["priority", "shares"]
ORDERS: tuple[Order, ...] = ("priority", "shares")

MAX_PLANS = 100
"""The most plans a ``Plans`` may hold (the claim's door refuses more)."""

MAX_RUNNING = 1_000_000
"""The largest cap a plan may set (the claim's door refuses more)."""


@dataclass(frozen=True)
class Plan:
    """A plan: its priority (under ``order="priority"``), its daily quota units, its weight
    (under ``order="shares"``: service in proportion to it while every plan has work), and its
    cap: at most ``max_running`` jobs of one type running at once for each of its tenants
    (None: no cap)."""

    name: str
    priority: int
    daily_units: int | None
    description: str
    weight: float = 1
    max_running: int | None = None

    def __post_init__(self) -> None:
        weight = self.weight
        number = not isinstance(weight, bool) and isinstance(weight, int | float)
        if not (number and math.isfinite(weight) and weight > 0):
            raise ConfigurationError(
                f"plan {self.name!r}: weight must be a positive number, got {weight!r}"
            )
        cap = self.max_running
        whole = not isinstance(cap, bool) and isinstance(cap, int)
        if cap is not None and not (whole and 1 <= cap <= MAX_RUNNING):
            raise ConfigurationError(
                f"plan {self.name!r}: max_running must be a whole number from 1 to"
                f" {MAX_RUNNING} or None, got {cap!r}"
            )

    def quantum(self, quantum: int) -> int:
        """The quantum this plan's groups take under shares: the stage's times the weight,
        rounded half up, at least 1."""
        return max(1, math.floor(quantum * self.weight + 0.5))


@dataclass(frozen=True)
class Plans:
    plans: tuple[Plan, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.plans]
        if not names or len(set(names)) != len(names):
            raise ConfigurationError(f"plans need unique names, got {names}")
        if len(names) > MAX_PLANS:
            raise ConfigurationError(f"at most {MAX_PLANS} plans, got {len(names)}")

    def get(self, name: str) -> Plan:
        for plan in self.plans:
            if plan.name == name:
                return plan
        known = ", ".join(p.name for p in self.plans)
        raise UnknownPlan(f"unknown plan {name!r}; known plans: {known}")

    @property
    def middle(self) -> Plan:
        """The plan a job with no tenant ranks as: the median by priority."""
        ranked = sorted(self.plans, key=lambda p: p.priority)
        return ranked[(len(ranked) - 1) // 2]

    def cap_of(self, plan: str | None) -> int | None:
        """The cap of running jobs per tenant of a tenant on ``plan``: that plan's, or the
        middle plan's for a plan these do not name (or none), as the claim reads it."""
        named = [p for p in self.plans if p.name == plan]
        return (named[0] if named else self.middle).max_running

    def claim_params(self, order: Order = "priority", quantum: int = 1) -> dict[str, object]:
        """The claim's plan terms, as parameters: each plan's priority, quantum and cap (0 for
        none) beside its name, and those of a group with no tenant or an unknown plan (the
        middle plan's; jobs with no tenant have no cap whatever the default).

        Under ``order="priority"`` every plan takes the stage's quantum; under ``"shares"``
        every plan takes one priority and a quantum of ``quantum`` x its weight. A plan whose
        quantum would pass MAX_QUANTUM is refused."""
        if order == "priority":
            priorities = [p.priority for p in self.plans]
            quanta = [quantum for _ in self.plans]
            default_priority, default_quantum = self.middle.priority, quantum
        else:
            priorities = [0 for _ in self.plans]
            quanta = [p.quantum(quantum) for p in self.plans]
            default_priority, default_quantum = 0, self.middle.quantum(quantum)
        for plan, plan_quantum in zip(self.plans, quanta, strict=True):
            if plan_quantum > MAX_QUANTUM:
                raise ConfigurationError(
                    f"plan {plan.name!r}: a quantum of {quantum} x weight {plan.weight:g} is"
                    f" {plan_quantum}, more than {MAX_QUANTUM}"
                )
        return {
            "plan_names": [p.name for p in self.plans],
            "plan_priorities": priorities,
            "default_priority": default_priority,
            "plan_quanta": quanta,
            "default_quantum": default_quantum,
            **self.cap_params(),
        }

    def cap_params(self) -> dict[str, object]:
        """Each plan's cap of running jobs per tenant beside its name (0 for none), and the cap
        of a tenant whose plan is not named (the middle plan's): what the claims and the
        doorbell's claim are handed."""
        return {
            "plan_caps": [p.max_running or 0 for p in self.plans],
            "default_cap": self.middle.max_running or 0,
        }

    def table(self) -> str:
        """The plans as a table for people, highest priority first."""
        rows = [("plan", "priority", "weight", "max running", "daily units", "description")]
        for plan in sorted(self.plans, key=lambda p: -p.priority):
            units = "unlimited" if plan.daily_units is None else str(plan.daily_units)
            weight = f"{plan.weight:g}"
            cap = "-" if plan.max_running is None else str(plan.max_running)
            rows.append((plan.name, str(plan.priority), weight, cap, units, plan.description))
        middle = self.middle
        weight = f"{middle.weight:g}"
        rows.append(
            ("(no tenant)", str(middle.priority), weight, "-", "-", f"ranks as {middle.name}")
        )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


PLANS = Plans(
    (
        Plan("free", priority=1, daily_units=100, description="best effort"),
        Plan("pro", priority=2, daily_units=10_000, description="ahead of free"),
        Plan("team", priority=3, daily_units=None, description="first in line"),
    )
)


def set_plan(conn: Connection, tenant_id: str, plan: str, *, plans: Plans = PLANS) -> None:
    """Create the tenant or change its plan; the plan must be one PLANS defines."""
    plans.get(plan)
    with tenant_scope(conn, tenant_id):
        conn.execute(query("set_plan"), {"id": tenant_id, "plan": plan})

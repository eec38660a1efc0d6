"""Plans: one object says how each plan ranks, for the claim and for people alike, and the
tenant's plan that ``set_plan`` records."""

from dataclasses import dataclass

from .db import Connection
from .errors import ConfigurationError, UnknownPlan
from .queries import query
from .tenancy import tenant_scope


@dataclass(frozen=True)
class Plan:
    name: str
    priority: int
    daily_units: int | None
    description: str


@dataclass(frozen=True)
class Plans:
    plans: tuple[Plan, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.plans]
        if not names or len(set(names)) != len(names):
            raise ConfigurationError(f"plans need unique names, got {names}")

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

    def claim_params(self) -> dict[str, object]:
        """The claim query's priority term, as parameters."""
        return {
            "plan_names": [p.name for p in self.plans],
            "plan_priorities": [p.priority for p in self.plans],
            "default_priority": self.middle.priority,
        }

    def table(self) -> str:
        """The plans as a table for people, highest priority first."""
        rows = [("plan", "priority", "daily units", "description")]
        for plan in sorted(self.plans, key=lambda p: -p.priority):
            units = "unlimited" if plan.daily_units is None else str(plan.daily_units)
            rows.append((plan.name, str(plan.priority), units, plan.description))
        rows.append(("(no tenant)", str(self.middle.priority), "-", f"ranks as {self.middle.name}"))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
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

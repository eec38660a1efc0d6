"""Who owns work: a tenant's plan, and a group's active or paused state."""

from .db import Connection
from .plans import PLANS, Plans
from .queries import query


def set_plan(conn: Connection, tenant_id: str, plan: str, *, plans: Plans = PLANS) -> None:
    """Create the tenant or change its plan; the plan must be one PLANS defines."""
    plans.get(plan)
    conn.execute(query("set_plan"), {"id": tenant_id, "plan": plan})


def pause_group(conn: Connection, group_id: str, *, tenant_id: str | None = None) -> None:
    """A paused group's jobs stay pending and are not claimed."""
    conn.execute(
        query("set_group_status"), {"id": group_id, "tenant_id": tenant_id, "status": "paused"}
    )


def resume_group(conn: Connection, group_id: str, *, tenant_id: str | None = None) -> None:
    conn.execute(
        query("set_group_status"), {"id": group_id, "tenant_id": tenant_id, "status": "active"}
    )

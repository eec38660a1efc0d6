"""Groups: a tenant's group is active or paused; a paused group's jobs stay pending, unclaimed."""

from .db import Connection
from .inputs import check_label
from .queries import query
from .tenancy import tenant_scope


def pause_group(conn: Connection, group_id: str, *, tenant_id: str | None = None) -> None:
    """A paused group's jobs stay pending and are not claimed."""
    _set_group_status(conn, group_id, tenant_id, "paused")


def resume_group(conn: Connection, group_id: str, *, tenant_id: str | None = None) -> None:
    _set_group_status(conn, group_id, tenant_id, "active")


def _set_group_status(conn: Connection, group_id: str, tenant_id: str | None, status: str) -> None:
    # A default group has no id, so it cannot be paused by one.
    check_label("group_id", group_id, required=True)
    check_label("tenant_id", tenant_id)
    with tenant_scope(conn, tenant_id):
        conn.execute(
            query("set_group_status"), {"id": group_id, "tenant_id": tenant_id, "status": status}
        )

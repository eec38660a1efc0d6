"""Groups: a tenant's group is active or paused; a paused group's jobs stay pending, unclaimed."""

from .db import Connection
from .errors import UnknownGroup
from .inputs import check_label
from .queries import query
from .tenancy import tenant_scope


def pause_group(
    conn: Connection, group_id: str, *, tenant_id: str | None = None, create: bool = True
) -> None:
    """A paused group's jobs stay pending and are not claimed. With ``create=False`` a group
    that no job has ever had (and no earlier pause or resume named) is refused with
    :class:`UnknownGroup`, so that a mistyped id does not pause nothing."""
    _set_group_status(conn, group_id, tenant_id, "paused", create=create)


def resume_group(
    conn: Connection, group_id: str, *, tenant_id: str | None = None, create: bool = True
) -> None:
    """A resumed group's jobs are claimed again; ``create`` as for :func:`pause_group`."""
    _set_group_status(conn, group_id, tenant_id, "active", create=create)


def _set_group_status(
    conn: Connection, group_id: str, tenant_id: str | None, status: str, *, create: bool
) -> None:
    # A default group has no id, so it cannot be paused by one.
    check_label("group_id", group_id, required=True)
    check_label("tenant_id", tenant_id)
    group = {"id": group_id, "tenant_id": tenant_id, "status": status}
    with tenant_scope(conn, tenant_id):
        # Checked and written in one transaction, under the tenant's clamp.
        if not create and not _known(conn, group):
            owner = f"tenant {tenant_id!r}" if tenant_id is not None else "no tenant"
            raise UnknownGroup(
                f"no job of {owner} has ever had group {group_id!r}: check the id and the"
                " tenant (a group is its tenant's); `fairqueue groups pause --create` pauses a"
                " group before its first job"
            )
        conn.execute(query("set_group_status"), group)


def _known(conn: Connection, group: dict[str, str | None]) -> bool:
    row = conn.execute(query("group_known"), group).fetchone()
    return row is not None and bool(row["known"])

"""The tenant clamp: the one place that tells Postgres whose rows a transaction may touch.

Tenant tables are under row-level security keyed on the ``fairqueue.tenant_id`` setting. It is
set per transaction (``set_config(..., true)``), never per session, so a pooled or reused
connection cannot carry a tenant into its next transaction. Jobs with no tenant (system jobs)
are visible only to a transaction that asked for the system clamp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from psycopg.pq import TransactionStatus

from .db import Connection
from .errors import InvalidPayload, TenantMismatch
from .validation import shown_value


def _check_tenant(tenant_id: str | None) -> None:
    if tenant_id is not None and (not isinstance(tenant_id, str) or not tenant_id):
        raise InvalidPayload(
            f"a tenant id must be a non-empty string or None, got {shown_value(tenant_id)}"
        )


def _clamp(conn: Connection, tenant_id: str | None) -> None:
    _check_tenant(tenant_id)
    # The settings are written by one SQL function, fairqueue.clamp
    # (sql/functions/tenant_clamp.sql), which the batch functions call too.
    conn.execute("select fairqueue.clamp(%(tenant)s)", {"tenant": tenant_id})


@contextmanager
def tenant_transaction(conn: Connection, tenant_id: str | None) -> Iterator[Connection]:
    """A transaction that sees and writes only ``tenant_id``'s rows (None: system jobs only)."""
    with conn.transaction():
        _clamp(conn, tenant_id)
        yield conn


@contextmanager
def tenants_transaction(conn: Connection) -> Iterator[Callable[[str | None], None]]:
    """One transaction that works for one tenant at a time: call the function it yields to
    clamp the statements that follow to the next tenant: one commit for several tenants' work,
    every statement still under one tenant's clamp."""
    with conn.transaction():
        yield lambda tenant_id: _clamp(conn, tenant_id)


def clamp_callers_transaction(conn: Connection, tenant_id: str | None) -> None:
    """Clamp the transaction the caller has open, unless it already is clamped to this tenant.

    A transaction clamped to another tenant is refused: switching it would hand the caller's
    later statements to the wrong tenant.
    """
    _check_tenant(tenant_id)
    # One round trip: the SQL function that the enqueue statement starts with, too.
    row = conn.execute(
        "select tenant_id, system from fairqueue.clamp_unless_clamped(%(tenant)s)",
        {"tenant": tenant_id},
    ).fetchone()
    assert row is not None
    current = None if row["system"] else row["tenant_id"]
    if current != tenant_id:
        raise mismatch(current, tenant_id)


def mismatch_of(clamp: Mapping[str, Any], tenant_id: str | None) -> TenantMismatch:
    """The refusal of work for ``tenant_id`` given what ``fairqueue.clamp_unless_clamped`` said
    the transaction is clamped to (``clamped_to`` and ``system``)."""
    return mismatch(None if clamp["system"] else clamp["clamped_to"], tenant_id)


def mismatch(current: str | None, tenant_id: str | None) -> TenantMismatch:
    """The refusal of work for ``tenant_id`` in a transaction clamped to ``current``."""
    return TenantMismatch(
        f"this transaction works for tenant {current!r}; it cannot work for {tenant_id!r}"
        " (each tenant's writes need a transaction of their own)"
    )


def _no_transaction_open(conn: Connection) -> bool:
    return conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE


@contextmanager
def transaction_unless_open(conn: Connection) -> Iterator[Connection]:
    """A transaction of its own when the connection autocommits and none is open, else the
    caller's, which then commits with the caller. Its statements clamp it themselves."""
    if _no_transaction_open(conn):
        with conn.transaction():
            yield conn
    else:
        yield conn


@contextmanager
def tenant_scope(conn: Connection, tenant_id: str | None) -> Iterator[Connection]:
    """Work for ``tenant_id``: in a transaction of its own when none is open, else in the
    caller's (clamped by ``clamp_callers_transaction``), which then commits with the caller."""
    if _no_transaction_open(conn):
        with tenant_transaction(conn, tenant_id):
            yield conn
    else:
        clamp_callers_transaction(conn, tenant_id)
        yield conn

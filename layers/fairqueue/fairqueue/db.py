"""Connections: where the database URL comes from, and a clear error when there is none."""

import os
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .errors import DatabaseUnavailable

Connection = psycopg.Connection[dict[str, Any]]


def resolve_dsn(dsn: str | None = None) -> str:
    """The given DSN, else ``DATABASE_URL``."""
    found = dsn or os.environ.get("DATABASE_URL")
    if not found:
        raise DatabaseUnavailable(
            "no database: pass a DSN or set DATABASE_URL (for example "
            "postgresql://postgres@127.0.0.1:5432/postgres)"
        )
    return found


def connect(dsn: str | None = None, *, autocommit: bool = False) -> Connection:
    """Open a psycopg connection whose rows are dicts.

    Used as ``with connect(dsn) as conn:``, the block is one transaction that commits on exit,
    so ``enqueue`` commits together with the caller's own writes.
    """
    target = resolve_dsn(dsn)
    try:
        return psycopg.connect(target, autocommit=autocommit, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot reach the database: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

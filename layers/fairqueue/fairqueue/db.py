"""Connections: where the database URL comes from, and a clear error when there is none."""

import logging
import os
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from .errors import DatabaseUnavailable

Connection = psycopg.Connection[dict[str, Any]]

log = logging.getLogger("fairqueue.db")


class FairqueueConnection(psycopg.Connection[dict[str, Any]]):
    """A psycopg connection that runs callbacks once its transaction commits.

    ``enqueue`` uses it to ring a doorbell only after the job's row is committed; a rollback
    drops the callbacks with the rows they were for.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after_commit: list[Callable[[], None]] = []

    def commit(self) -> None:
        super().commit()
        callbacks, self.after_commit = self.after_commit, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                # The commit stands; whatever the callback owed is the sweep's to catch up.
                log.exception("an after-commit callback failed")

    def rollback(self) -> None:
        self.after_commit.clear()
        super().rollback()


def after_commit(conn: Connection, callback: Callable[[], None]) -> bool:
    """Run ``callback`` once what ``conn`` has written is committed: now when nothing is open,
    else at the commit of a ``FairqueueConnection``. False when it cannot know (a plain psycopg
    connection with a transaction open): the callback is not run."""
    if conn.info.transaction_status == TransactionStatus.IDLE:
        callback()
        return True
    if isinstance(conn, FairqueueConnection):
        conn.after_commit.append(callback)
        return True
    return False


def resolve_dsn(dsn: str | None = None) -> str:
    """The given DSN, else ``DATABASE_URL``."""
    found = dsn or os.environ.get("DATABASE_URL")
    if not found:
        raise DatabaseUnavailable(
            "no database: pass a DSN or set DATABASE_URL (for example "
            "postgresql://postgres@127.0.0.1:5432/postgres)"
        )
    return found


def connect(dsn: str | None = None, *, autocommit: bool = False) -> FairqueueConnection:
    """Open a psycopg connection whose rows are dicts.

    Used as ``with connect(dsn) as conn:``, the block is one transaction that commits on exit,
    so ``enqueue`` commits together with the caller's own writes.
    """
    target = resolve_dsn(dsn)
    try:
        return FairqueueConnection.connect(target, autocommit=autocommit, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot reach the database: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

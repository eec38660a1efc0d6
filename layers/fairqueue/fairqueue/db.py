"""Connections: where the database URL comes from, and a clear error when there is none."""

import logging
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from .errors import ConfigurationError, DatabaseUnavailable
from .queries import query
from .settings import settings

Connection = psycopg.Connection[dict[str, Any]]

# The role the library works as: it owns nothing and has no BYPASSRLS (docs/tenancy.md).
APP_ROLE: Final = "fairqueue_app"

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


# Where the embedded Postgres keeps its data when no database is named: `.pgdata/` in the
# current folder, the one `make run` and the CLI use.
EMBEDDED_DATA_DIR: Final = Path(".pgdata")


def resolve_dsn(dsn: str | None = None) -> str:
    """Which database: the given DSN, else ``DATABASE_URL``, else (outside production) the
    embedded Postgres in ``.pgdata/``; refused unless libpq can read it.

    Every connection the library opens, and every ``fairqueue`` command, asks here. With
    ``FAIRQUEUE_ENV=production`` a missing database is ``DatabaseUnavailable``, never a
    development server.
    """
    found = dsn or settings().database_url
    if not found:
        if settings().production:
            raise DatabaseUnavailable(
                "no database: FAIRQUEUE_ENV=production needs a DSN, DATABASE_URL or"
                " --database-url (for example postgresql://postgres@127.0.0.1:5432/postgres)"
            )
        found = embedded_database()
    try:
        conninfo_to_dict(found)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            "the database URL is not a connection string libpq can read:"
            f" {_without_password(_first_line(exc), found)}"
        ) from None
    return found


@cache
def embedded_database() -> str:
    """The embedded Postgres in ``.pgdata/``, started (or joined) once per process, and said
    once on stderr, so that nobody takes it for the database they meant."""
    # Development only: the wheels it needs are the dev extra's, so it is imported here.
    from .dev.embedded import embedded_dsn

    found = embedded_dsn(EMBEDDED_DATA_DIR)
    print(f"no DATABASE_URL: using the embedded Postgres in {EMBEDDED_DATA_DIR}/", file=sys.stderr)
    return found


# Where a connection string keeps its password: user:password@ in a URI, password=... in
# key=value pairs.
_PASSWORDS = re.compile(r"://[^:/@]*:([^@]*)@|password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def _without_password(message: str, dsn: str) -> str:
    """libpq quotes the part of a connection string it could not read, which may be the
    password: the message with every password of `dsn` masked."""
    for found in _PASSWORDS.finditer(dsn):
        secret = found.group(1) or found.group(2)
        if secret:
            message = message.replace(secret, "***")
    return message


def connect(
    dsn: str | None = None,
    *,
    autocommit: bool = False,
    as_app_role: bool = False,
    pooled: bool | None = None,
) -> FairqueueConnection:
    """Open a psycopg connection whose rows are dicts.

    Used as ``with connect(dsn) as conn:``, the block is one transaction that commits on exit,
    so ``enqueue`` commits together with the caller's own writes.

    With ``as_app_role`` (every connection the library opens for itself), a login that
    row-level security does not hold works as ``fairqueue_app`` when it may become it; see
    :func:`work_as_app_role`.

    ``pooled``: whether the connection goes through a transaction pooler, where a session keeps
    nothing (see :func:`work_as_app_role`); by default, whether ``FAIRQUEUE_POOLER`` is
    ``transaction``.
    """
    target = resolve_dsn(dsn)
    through_pooler = is_pooled() if pooled is None else pooled
    try:
        conn = FairqueueConnection.connect(target, autocommit=autocommit, **connection_options())
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot reach the database: {_first_line(exc)}") from exc
    if as_app_role:
        try:
            work_as_app_role(conn, pooled=through_pooler)
            if not autocommit:
                # The check's own transaction ends here, so the caller's block starts clean
                # and a later rollback cannot undo the role.
                conn.commit()
        except BaseException:
            conn.close()
            raise
    return conn


def is_pooled() -> bool:
    """Whether a transaction pooler is in front of the database (``FAIRQUEUE_POOLER``)."""
    return settings().pooler == "transaction"


def connection_options() -> dict[str, Any]:
    """What every connection the library opens is made with: dict rows, and no server-side
    prepared statements. psycopg prepares a statement on its sixth run; behind a transaction
    pooler the next transaction may land on a backend that lacks it, or has it already, and RDS
    Proxy pins a client that prepares. Measured without them, a drain and one-at-a-time
    enqueues ran as fast (docs/design/runs.md), so they are off whatever ``FAIRQUEUE_POOLER``
    says."""
    return {"row_factory": dict_row, "prepare_threshold": None}


def work_as_app_role(conn: Connection, *, pooled: bool = False) -> None:
    """Make a login that bypasses row-level security (a superuser, a ``BYPASSRLS`` role) work
    as ``fairqueue_app`` for the rest of the session, when it may become it, so the policies
    hold for the library's own statements whatever the login. A login the policies already
    hold is left as it is: nothing is set, and a transaction pooler sees no session state.

    A bypassing login that cannot become the application role is refused under
    ``FAIRQUEUE_ENV=production`` (the tenant predicates of the library's statements would be
    the only wall); elsewhere it is a warning. Through a transaction pooler (``pooled``) a
    bypassing login is refused: ``SET ROLE`` would hold for one backend, not for the session.
    """
    row = conn.execute(query("login_role"), {"role": APP_ROLE}).fetchone()
    if row is None or not row["bypasses_rls"] or row["is_app_role"]:
        return
    if pooled:
        raise ConfigurationError(
            f"the database login {row['login']!r} bypasses row-level security; through a"
            f" transaction pooler (FAIRQUEUE_POOLER=transaction) the library cannot become"
            f" {APP_ROLE} for the session: log in as a member of {APP_ROLE} (docs/tenancy.md,"
            " Roles)"
        )
    if row["can_become"]:
        conn.execute(query("become_app_role"))
        return
    problem = (
        f"the database login {row['login']!r} bypasses row-level security and cannot become "
        f"{APP_ROLE}: log in as a member of {APP_ROLE} (docs/tenancy.md, Roles)"
    )
    if settings().production:
        raise ConfigurationError(problem)
    log.warning("%s; tenants are kept apart by the library's own statements alone", problem)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

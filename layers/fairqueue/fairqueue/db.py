"""Connections: where the database URL comes from, and a clear error when there is none."""

import functools
import logging
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from .errors import ConfigurationError, DatabaseUnavailable, SchemaNotMigrated
from .queries import query
from .settings import settings

Connection = psycopg.Connection[dict[str, Any]]

# The role the library works as: it owns nothing and has no BYPASSRLS (docs/tenancy.md).
APP_ROLE: Final = "fairqueue_app"

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("fairqueue.db")


def names_missing_schema(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` raising SchemaNotMigrated where it met a database without fairqueue's
    schema: ``FairqueueConnection.execute``, and the entry points that take the caller's own
    connection, which may be a plain psycopg one (enqueue, enqueue_many, admit)."""

    @functools.wraps(function)
    def naming(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except _MISSING_SCHEMA as exc:
            missing = schema_not_migrated(exc)
            if missing is None:
                raise
            raise missing from None

    return naming


class FairqueueConnection(psycopg.Connection[dict[str, Any]]):
    """A psycopg connection that runs callbacks once its transaction commits, and says
    SchemaNotMigrated when a statement fails for want of fairqueue's schema.

    ``enqueue`` uses it to ring a doorbell only after the job's row is committed; a rollback
    drops the callbacks with the rows they were for.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after_commit: list[Callable[[], None]] = []

    # Every entry point (enqueue, admit, a run, the worker, the API) reaches the database
    # here; a schema found missing costs nothing until a statement fails on it.
    @names_missing_schema
    def execute(self, *args: Any, **kwargs: Any) -> psycopg.Cursor[dict[str, Any]]:
        return super().execute(*args, **kwargs)

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


# What a statement meets on a database without fairqueue's schema, or with an older one: no
# schema, no table, no function, no column, no type.
_MISSING_SCHEMA: Final = (
    psycopg.errors.InvalidSchemaName,
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedFunction,
    psycopg.errors.UndefinedColumn,
    psycopg.errors.UndefinedObject,
)


def schema_not_migrated(exc: psycopg.Error) -> SchemaNotMigrated | None:
    """SchemaNotMigrated naming `fairqueue migrate` for an error about one of fairqueue's own
    objects; None for anything else (a handler's own missing table)."""
    problem = exc.diag.message_primary or ""
    # The schema by its name, or an object qualified by it, as the library's statements write
    # every name: not a handler's own table that merely starts with the word.
    if '"fairqueue"' not in problem and "fairqueue." not in problem:
        return None
    return SchemaNotMigrated(
        f"the database lacks part of fairqueue's schema ({problem}): run `fairqueue migrate`"
        " against it first, as a role that may create the schema"
    )


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
    try:
        from .dev.embedded import embedded_dsn
    except ModuleNotFoundError as exc:
        if exc.name != "fairqueue.dev":
            raise
        raise DatabaseUnavailable(
            "no DATABASE_URL, and no embedded Postgres in this install (fairqueue.dev is"
            " development code, left out of the Lambda layer): set DATABASE_URL"
        ) from None

    found = embedded_dsn(EMBEDDED_DATA_DIR)
    print(f"no DATABASE_URL: using the embedded Postgres in {EMBEDDED_DATA_DIR}/", file=sys.stderr)
    return found


# Where a connection string keeps its password: user:password@ in a URI, password=... in
# key=value pairs.
_PASSWORDS = re.compile(r"://[^:/@]*:([^@]*)@|password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def release_embedded() -> None:
    """Before an abort's ``os._exit``: give back this process's hold on the embedded Postgres, if
    it joined one, so the server does not wait for the next command to notice the process has
    gone."""
    embedded = sys.modules.get("fairqueue.dev.embedded")
    if embedded is not None:
        embedded.release_servers()


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

    With ``as_app_role`` (every connection the library opens for itself), the login is checked
    (:func:`work_as_app_role`), and outside production a login that row-level security does not
    hold but that may become ``fairqueue_app`` is connected again as it, with the startup
    parameter ``options=-c role=fairqueue_app``: the role is then the backend session's from
    its start, which no one else shares, and nothing is ``SET`` that a pooler could hand to
    another client (docs/design/tenancy.md).

    ``pooled``: whether the connection goes through a transaction pooler, where a bypassing
    login is refused; by default, whether ``FAIRQUEUE_POOLER`` is ``transaction``.
    """
    target = resolve_dsn(dsn)
    if not as_app_role:
        return _open(target, autocommit)
    return _open_as_app_role(target, autocommit, pooled)[0]


def app_role_conninfo(dsn: str | None = None) -> str:
    """What a pool of the library's connections should connect with: ``dsn`` resolved, with
    the startup parameter ``connect(as_app_role=True)`` would add for this login, if any. It
    opens one connection to find out, and raises as ``connect`` does."""
    conn, target = _open_as_app_role(resolve_dsn(dsn), True, None)
    conn.close()
    return target


def _open_as_app_role(
    target: str, autocommit: bool, pooled: bool | None
) -> tuple[FairqueueConnection, str]:
    """A connection checked as ``connect(as_app_role=True)`` checks it, and the conninfo it was
    finally opened with."""
    conn = _open(target, autocommit)
    through_pooler = is_pooled() if pooled is None else pooled
    try:
        login = _login(conn)
        if _should_become_app_role(login, pooled=through_pooler):
            conn.close()
            target = _as_app_role(target)
            conn = _open(target, autocommit, refused=_NOT_BECOME)
            login = _login(conn)
        _check_login(login, pooled=through_pooler)
    except BaseException:
        conn.close()
        raise
    return conn, target


def _open(target: str, autocommit: bool, *, refused: str = "") -> FairqueueConnection:
    try:
        return FairqueueConnection.connect(target, autocommit=autocommit, **connection_options())
    except psycopg.OperationalError as exc:
        if refused:
            # The same server took the login a moment ago: what refuses it now is the startup
            # parameter (a pooler that does not pass it on).
            raise ConfigurationError(f"{refused} ({_first_line(exc)})") from None
        raise DatabaseUnavailable(f"cannot reach the database: {_first_line(exc)}") from exc


def _as_app_role(target: str) -> str:
    """``target`` with the application role as a startup parameter, beside its own options."""
    own = str(conninfo_to_dict(target).get("options") or "")
    return make_conninfo(target, options=f"{own} -c role={APP_ROLE}".strip())


_NOT_BECOME = (
    f"the database login bypasses row-level security and does not work as {APP_ROLE}: the"
    f" library asks for the role with the startup parameter options=-c role={APP_ROLE}, which a"
    f" transaction pooler refuses or drops. Log in as a member of {APP_ROLE} (docs/tenancy.md,"
    f" Roles), or, connecting directly, put options=-c role={APP_ROLE} in the database URL"
)


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


def _login(conn: Connection) -> dict[str, Any] | None:
    """The ``login_role`` row of a connection the library just opened; its transaction, if the
    query began one, is ended, so that the caller's block starts clean."""
    row = conn.execute(query("login_role"), {"role": APP_ROLE}).fetchone()
    if not conn.autocommit:
        conn.rollback()
    return row


def _should_become_app_role(login: dict[str, Any] | None, *, pooled: bool) -> bool:
    """Whether ``connect`` should connect again as the application role: outside production and
    a declared pooler, for a login that bypasses row-level security, may become the role, and
    does not work as it already."""
    if settings().production or pooled or login is None:
        return False
    return bool(login["bypasses_rls"] and login["can_become"] and not login["is_app_role"])


def work_as_app_role(conn: Connection, *, pooled: bool = False) -> None:
    """Check that a connection the library opened works as ``fairqueue_app``, or as a login the
    row-level security policies hold; it sets nothing on the session (``connect`` asks for the
    role when it opens the connection).

    Refused with ConfigurationError: under ``FAIRQUEUE_ENV=production``, a login that bypasses
    row-level security (a superuser, a ``BYPASSRLS`` role), whatever role it works as, since
    code on the connection could ``SET ROLE`` back to it; a connection still working as such a
    login that may become the role (a transaction pooler dropped the startup parameter, or the
    connection was opened without it). A bypassing login that cannot become the role is a
    warning outside production.
    """
    _check_login(_login(conn), pooled=pooled)


def _check_login(row: dict[str, Any] | None, *, pooled: bool) -> None:
    if row is None:
        return  # no application role yet: a database never migrated
    cannot_become = (
        f"the database login {row['login']!r} bypasses row-level security and cannot become "
        f"{APP_ROLE}: log in as a member of {APP_ROLE} (docs/tenancy.md, Roles)"
    )
    if settings().production and row["login_bypasses_rls"]:
        raise ConfigurationError(
            cannot_become
            if not row["can_become"]
            else f"the database login {row['login']!r} bypasses row-level security, which"
            " FAIRQUEUE_ENV=production refuses whatever role it then works as: log in as a"
            f" member of {APP_ROLE} without superuser or BYPASSRLS, for example"
            f" `create role fairqueue_worker login password '...' in role {APP_ROLE}`"
            " (docs/tenancy.md, Roles)"
        )
    if not row["bypasses_rls"] or row["is_app_role"]:
        return
    if pooled:
        raise ConfigurationError(
            f"the database login {row['login']!r} bypasses row-level security; through a"
            f" transaction pooler (FAIRQUEUE_POOLER=transaction) the library cannot become"
            f" {APP_ROLE} for the session: log in as a member of {APP_ROLE} (docs/tenancy.md,"
            " Roles)"
        )
    if row["can_become"]:
        raise ConfigurationError(_NOT_BECOME)
    if settings().production:
        raise ConfigurationError(cannot_become)
    log.warning("%s; tenants are kept apart by the library's own statements alone", cannot_become)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""Brings a database to the current schema in one transaction.

Two kinds of file, both shipped in the package's ``sql`` folder (the repository's ``sql/``):

- ``migrations/NNNN_name.sql``, the numbered migrations: tables, indexes and data moves, each
  applied once, in order, and recorded by number in ``fairqueue.migrations``. A migration that
  needs a function while it runs (a generated column, a data move) names its file on a line
  ``-- requires: functions/x.sql``; that definition is applied just before it.
- ``functions/*.sql``, ``order/*.sql`` and ``policies/*.sql``: the one current definition of
  every function, trigger, policy and grant, written to be applied again and again (``create or
  replace``, ``drop policy if exists``). They are applied after the migrations, in that order of
  folders, whenever a migration ran or a file's text differs from what ``fairqueue.definitions``
  records under the file's name, so a migrate that changes nothing takes no locks on tables. A
  file renamed or moved is applied again under its new name and its old name's record dropped.
"""

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import LiteralString

import psycopg
from psycopg import sql

from .db import Connection
from .errors import ConfigurationError, SchemaNotMigrated

_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_DEFINITION = re.compile(r"^[a-z0-9_]+\.sql$")
_REQUIRES = re.compile(r"^--\s*requires:\s*(\S+)\s*$", re.MULTILINE)
# The order definitions are applied in: policies name functions. The claim's order (order/)
# holds functions and triggers; each trigger file defines the functions it executes above its
# triggers, and bodies look up the functions they call only when they run. A
# ``*.queries.sql`` file there holds named queries (fairqueue.queries), not a definition.
DEFINITION_KINDS = ("functions", "order", "policies")
# One advisory key serializes concurrent migrators; the schema may not exist yet.
_LOCK: LiteralString = "select pg_advisory_xact_lock(hashtextextended('fairqueue.migrate', 0))"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: LiteralString
    requires: tuple[str, ...]


@dataclass(frozen=True)
class Definition:
    """One definition file: ``name`` is its path under the folder, e.g. ``order/claim.sql``."""

    name: str
    sql: LiteralString

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def _folder() -> Traversable:
    return resources.files("fairqueue") / "sql"


def _read(entry: Traversable) -> LiteralString:
    # Shipped with the package, never built from input.
    text: LiteralString = entry.read_text(encoding="utf-8")
    return text


def migrations() -> list[Migration]:
    """Every numbered migration shipped with the package, in order."""
    found: list[Migration] = []
    for entry in _folder().joinpath("migrations").iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            text = _read(entry)
            requires = tuple(_REQUIRES.findall(text))
            found.append(Migration(int(match.group(1)), entry.name, text, requires))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two migrations share a number: {versions}")
    return found


def definitions() -> list[Definition]:
    """Every definition file shipped with the package, in the order they are applied."""
    found: list[Definition] = []
    for kind in DEFINITION_KINDS:
        entries = sorted(_folder().joinpath(kind).iterdir(), key=lambda e: e.name)
        for entry in entries:
            if _DEFINITION.match(entry.name):
                found.append(Definition(f"{kind}/{entry.name}", _read(entry)))
    return found


def migrate(conn: Connection) -> list[str]:
    """Apply what is missing; returns the names of the files applied. Safe to run twice, or twice
    at once. A login that may not create the schema gets ConfigurationError, and nothing
    changes."""
    try:
        return _migrate(conn)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError(
            f"this login cannot migrate the database ({exc.diag.message_primary}): run"
            " `fairqueue migrate` as the database's owner or a superuser"
        ) from None


def _migrate(conn: Connection) -> list[str]:
    applied_now: list[str] = []
    by_name = {d.name: d for d in definitions()}
    with conn.transaction():
        conn.execute(_LOCK)
        conn.execute("create schema if not exists fairqueue")
        conn.execute(
            "create table if not exists fairqueue.migrations ("
            " version integer primary key, name text not null,"
            " applied_at timestamptz not null default now())"
        )
        # A function's body may name a function of a later file: bodies are checked when called.
        checking = conn.execute("select current_setting('check_function_bodies') as was").fetchone()
        conn.execute("select set_config('check_function_bodies', 'off', true)")
        done = {
            int(row["version"])
            for row in conn.execute("select version from fairqueue.migrations").fetchall()
        }
        for migration in migrations():
            if migration.version in done:
                continue
            for name in migration.requires:
                if name not in by_name:
                    raise RuntimeError(f"{migration.name} requires {name}, which does not exist")
                conn.execute(sql.SQL(by_name[name].sql))
            conn.execute(sql.SQL(migration.sql))
            conn.execute(
                "insert into fairqueue.migrations (version, name) values (%s, %s)",
                (migration.version, migration.name),
            )
            applied_now.append(migration.name)
        migrated = bool(applied_now)
        recorded = {
            str(row["name"]): str(row["sha256"])
            for row in conn.execute("select name, sha256 from fairqueue.definitions").fetchall()
        }
        for definition in by_name.values():
            if migrated or recorded.get(definition.name) != definition.sha256:
                conn.execute(sql.SQL(definition.sql))
                conn.execute(
                    "insert into fairqueue.definitions (name, sha256) values (%s, %s)"
                    " on conflict (name) do update"
                    " set sha256 = excluded.sha256, applied_at = now()",
                    (definition.name, definition.sha256),
                )
                applied_now.append(definition.name)
        conn.execute(
            "delete from fairqueue.definitions where not (name = any(%s))", (list(by_name),)
        )
        was = "on" if checking is None else str(checking["was"])
        conn.execute("select set_config('check_function_bodies', %s, true)", (was,))
    return applied_now


def require_migrated(conn: Connection) -> None:
    """Refuse a database that this package's migrations have not all reached, with what to do,
    before a command fails on a table or function it does not have. A database migrated by a
    newer release passes."""
    latest = migrations()[-1].version
    present = conn.execute(
        "select to_regclass('fairqueue.migrations') is not null as present"
    ).fetchone()
    applied: int | None = None
    if present is not None and present["present"]:
        try:
            with conn.transaction():
                row = conn.execute("select max(version) as v from fairqueue.migrations").fetchone()
                applied = None if row is None or row["v"] is None else int(row["v"])
        except psycopg.errors.InsufficientPrivilege:
            # The grant that lets the application role read it came with a later migration.
            applied = 0
    if applied is None:
        raise SchemaNotMigrated(
            "the database has no fairqueue schema: run `fairqueue migrate` against it first,"
            " as a role that may create the schema"
        )
    if applied < latest:
        reached = f"at migration {applied}" if applied else "from an older release"
        raise SchemaNotMigrated(
            f"the database's fairqueue schema is {reached} and this release needs migration"
            f" {latest}: run `fairqueue migrate` against it first"
        )

"""Applies the ordered ``sql/NNNN_name.sql`` migrations, each once, recorded in a table."""

import re
from dataclasses import dataclass
from importlib import resources
from typing import LiteralString

from psycopg import sql

from .db import Connection

_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# One advisory key serializes concurrent migrators; the schema may not exist yet.
_LOCK: LiteralString = "select pg_advisory_xact_lock(hashtextextended('fairqueue.migrate', 0))"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: LiteralString


def migrations() -> list[Migration]:
    """Every migration shipped with the package, in order."""
    found: list[Migration] = []
    folder = resources.files("fairqueue") / "migrations"
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            # Shipped with the package, never built from input.
            text: LiteralString = entry.read_text(encoding="utf-8")
            found.append(Migration(int(match.group(1)), entry.name, text))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two migrations share a number: {versions}")
    return found


def migrate(conn: Connection) -> list[str]:
    """Apply what is missing; returns the names applied. Safe to run twice, or twice at once."""
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute(_LOCK)
        conn.execute("create schema if not exists fairqueue")
        conn.execute(
            "create table if not exists fairqueue.migrations ("
            " version integer primary key, name text not null,"
            " applied_at timestamptz not null default now())"
        )
        done = {
            int(row["version"])
            for row in conn.execute("select version from fairqueue.migrations").fetchall()
        }
        for migration in migrations():
            if migration.version in done:
                continue
            conn.execute(sql.SQL(migration.sql))
            conn.execute(
                "insert into fairqueue.migrations (version, name) values (%s, %s)",
                (migration.version, migration.name),
            )
            applied_now.append(migration.name)
    return applied_now

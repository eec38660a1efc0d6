"""The schema a database holds, read from the catalogs as plain data two databases can be
compared by: tables and columns, constraints, indexes, functions, triggers, policies, row-level
security, owners and grants of everything in the fairqueue schema."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from support.databases import ROOT

_QUERIES: dict[str, LiteralString] = {
    "schema": """
        select n.nspname, pg_get_userbyid(n.nspowner) as owner,
               (select array_agg(item::text order by item::text) from unnest(n.nspacl) item)::text
                 as acl
          from pg_namespace n where n.nspname = 'fairqueue'
    """,
    "relations": """
        select c.relname, c.relkind::text, pg_get_userbyid(c.relowner) as owner,
               (select array_agg(item::text order by item::text) from unnest(c.relacl) item)::text
                 as acl,
               c.relrowsecurity, c.relforcerowsecurity,
               c.reloptions::text as options
          from pg_class c
         where c.relnamespace = 'fairqueue'::regnamespace and c.relkind in ('r', 'v', 'm', 'S', 'p')
         order by c.relname
    """,
    "columns": """
        select c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) as type,
               a.attnotnull, a.attgenerated::text, a.attidentity::text,
               pg_get_expr(d.adbin, d.adrelid) as default_expr,
               (select array_agg(item::text order by item::text) from unnest(a.attacl) item)::text
                 as acl
          from pg_attribute a
          join pg_class c on c.oid = a.attrelid
          left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
         where c.relnamespace = 'fairqueue'::regnamespace and c.relkind in ('r', 'v', 'm', 'p')
           and a.attnum > 0 and not a.attisdropped
         order by c.relname, a.attname
    """,
    "constraints": """
        select c.relname, k.conname, pg_get_constraintdef(k.oid) as definition
          from pg_constraint k join pg_class c on c.oid = k.conrelid
         where c.relnamespace = 'fairqueue'::regnamespace
         order by c.relname, k.conname
    """,
    "indexes": """
        select indexname, indexdef from pg_indexes where schemaname = 'fairqueue'
         order by indexname
    """,
    "functions": """
        select p.oid::regprocedure::text as signature, pg_get_userbyid(p.proowner) as owner,
               (select array_agg(item::text order by item::text) from unnest(p.proacl) item)::text
                 as acl,
               pg_get_functiondef(p.oid) as definition
          from pg_proc p
         where p.pronamespace = 'fairqueue'::regnamespace
         order by 1
    """,
    "triggers": """
        select c.relname, t.tgname, pg_get_triggerdef(t.oid) as definition,
               t.tgenabled::text as enabled
          from pg_trigger t join pg_class c on c.oid = t.tgrelid
         where c.relnamespace = 'fairqueue'::regnamespace and not t.tgisinternal
         order by c.relname, t.tgname
    """,
    "policies": """
        select tablename, policyname, permissive, roles::text, cmd, qual, with_check
          from pg_policies where schemaname = 'fairqueue'
         order by tablename, policyname
    """,
    "types": """
        select t.typname, t.typtype::text, pg_get_userbyid(t.typowner) as owner
          from pg_type t
         where t.typnamespace = 'fairqueue'::regnamespace and t.typtype not in ('c', 'b')
         order by t.typname
    """,
}


def schema_of(dsn: str) -> dict[str, list[dict[str, Any]]]:
    """Everything in the fairqueue schema that a migration or a definition file sets."""
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        return {part: conn.execute(query).fetchall() for part, query in _QUERIES.items()}


def differences(
    left: dict[str, list[dict[str, Any]]], right: dict[str, list[dict[str, Any]]]
) -> list[str]:
    """Each catalog row one side has and the other lacks, labelled, for an assertion message."""
    found: list[str] = []
    for part in _QUERIES:
        lefts = {repr(sorted(row.items())) for row in left[part]}
        rights = {repr(sorted(row.items())) for row in right[part]}
        found += [f"{part}: only in the first: {row}" for row in sorted(lefts - rights)]
        found += [f"{part}: only in the second: {row}" for row in sorted(rights - lefts)]
    return found


def _git(*args: str) -> bytes:
    if not (ROOT / ".git").exists():
        pytest.skip("the earlier releases are read from the git history, which is not here")
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True).stdout


def install_release(dsn: str, release: str, below: int | None = None) -> None:
    """What `fairqueue migrate` of an earlier release (a git revision) left behind: its
    migrations, each recorded; with ``below``, only those numbered lower."""
    # Releases before sql/migrations/ kept the numbered files in sql/ itself.
    paths = {
        path.rsplit("/", 1)[1]: path
        for path in _git("ls-tree", "-r", "--name-only", release, "sql/").decode().split()
        if re.fullmatch(r"sql/(migrations/)?\d{4}_[a-z0-9_]+\.sql", path)
    }
    names = sorted(paths)
    if below is not None:
        names = [name for name in names if int(name[:4]) < below]
    assert names, f"{release} has no migrations"
    with psycopg.connect(dsn) as conn:
        conn.execute("create schema fairqueue")
        conn.execute(
            "create table fairqueue.migrations (version integer primary key, name text not null,"
            " applied_at timestamptz not null default now())"
        )
        for name in names:
            conn.execute(sql.SQL(_git("show", f"{release}:{paths[name]}").decode()))  # type: ignore[arg-type]
            conn.execute(
                "insert into fairqueue.migrations (version, name) values (%s, %s)",
                (int(name[:4]), name),
            )


# What a release's own `fairqueue migrate` does, run in an interpreter of its own.
_RELEASE_MIGRATE = """
import sys
from fairqueue.db import connect
from fairqueue.migrate import migrate
with connect(sys.argv[1]) as conn:
    migrate(conn)
"""


def migrate_as_release(dsn: str, release: str) -> None:
    """What `fairqueue migrate` of an earlier release (a git revision) leaves behind, run by that
    release's own package: its migrations, functions, triggers and policies."""
    archive = _git("archive", release, "sql", "layers/fairqueue/fairqueue")
    with tempfile.TemporaryDirectory(prefix="fairqueue-release-") as folder:
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        subprocess.run(
            [sys.executable, "-c", _RELEASE_MIGRATE, dsn],
            env={**os.environ, "PYTHONPATH": os.path.join(folder, "layers", "fairqueue")},
            check=True,
            capture_output=True,
            timeout=120,
        )

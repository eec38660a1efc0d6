"""The schema has one definition: a database built from scratch and one migrated from an earlier
release hold the same tables, indexes, functions, triggers, policies and grants, and every
function, trigger and policy comes from exactly one definition file."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import psycopg
import pytest
from psycopg import sql

from fairqueue import connect, migrate
from fairqueue.migrate import definitions, migrations, require_migrated
from support.databases import scratch_database
from support.schema_catalog import differences, install_release, migrate_as_release, schema_of

# The first commit that shipped migrations, the last before the tenant boundary work, and the last
# whose migrations still carried function bodies. Deployments may stand at any of them.
RELEASES = ["13c853d", "b8cc9f3", "45b7a08"]
# The last commit before the order's definitions moved to sql/order/: its databases record them
# as functions/claim.sql, triggers/jobs_served.sql and so on.
BEFORE_ORDER_FOLDER = "b6822d9"

_CREATES = re.compile(
    r"^\s*create\s+(or\s+replace\s+)?(function|trigger|policy)\s+(fairqueue\.)?(\w+)",
    re.IGNORECASE | re.MULTILINE,
)


@pytest.fixture
def blank_db(server_dsn: str) -> Iterator[Callable[[], str]]:
    """Makes empty databases on the server; drops them after the test."""
    with ExitStack() as made:

        def make() -> str:
            name = f"fq_schema_{uuid.uuid4().hex[:12]}"
            return made.enter_context(scratch_database(server_dsn, name))

        yield make


@pytest.mark.parametrize("release", RELEASES)
def test_a_database_migrated_from_a_release_equals_a_fresh_one(
    release: str, blank_db: Callable[[], str]
) -> None:
    fresh, upgraded = blank_db(), blank_db()
    with connect(fresh) as conn:
        migrate(conn)
    install_release(upgraded, release)
    with psycopg.connect(upgraded) as conn:
        # Work that was served before the upgrade, in two tenants' groups of the same name.
        conn.execute(
            "insert into fairqueue.jobs (type, tenant_id, group_id, status, locked_at)"
            " select 'crawl', tenant, 'inbox', 'running', now()"
            "   from unnest(array['acme', 'acme', 'globex']) as tenant"
        )
    with connect(upgraded) as conn:
        migrate(conn)
        counts = conn.execute(
            "select group_key, n from fairqueue.served where n <> 0 order by 1"
        ).fetchall()
    assert [(r["group_key"], r["n"]) for r in counts] == [("acme/inbox", 2), ("globex/inbox", 1)]
    assert differences(schema_of(fresh), schema_of(upgraded)) == []


def test_a_database_migrated_before_the_order_folder_equals_a_fresh_one(
    blank_db: Callable[[], str],
) -> None:
    fresh, upgraded = blank_db(), blank_db()
    with connect(fresh) as conn:
        migrate(conn)
    migrate_as_release(upgraded, BEFORE_ORDER_FOLDER)
    with connect(upgraded) as conn:
        recorded = conn.execute("select name from fairqueue.definitions").fetchall()
        assert "triggers/jobs_served.sql" in {row["name"] for row in recorded}
        done = conn.execute("select max(version) as last from fairqueue.migrations").fetchone()
        applied = migrate(conn)
        assert "order/jobs_served.sql" in applied
        # Its migrations are recorded by number, wherever the files lie: only later ones run.
        later = [m.name for m in migrations() if m.version > done["last"]]
        assert [name for name in applied if name not in {d.name for d in definitions()}] == later
        require_migrated(conn)
        assert migrate(conn) == []
        recorded = conn.execute("select name, sha256 from fairqueue.definitions").fetchall()
    assert {row["name"]: row["sha256"] for row in recorded} == {
        d.name: d.sha256 for d in definitions()
    }
    assert differences(schema_of(fresh), schema_of(upgraded)) == []


def test_every_function_trigger_and_policy_has_one_definition_file(admin_dsn: str) -> None:
    defined: dict[tuple[str, str], list[str]] = {}
    for definition in definitions():
        for match in _CREATES.finditer(definition.sql):
            kind, name = match.group(2).lower(), match.group(4)
            defined.setdefault((kind, name), []).append(definition.name)
    assert {key: files for key, files in defined.items() if len(files) > 1} == {}
    for migration in migrations():
        assert _CREATES.findall(migration.sql) == [], (
            f"{migration.name} defines a function, trigger or policy; its one definition belongs"
            " in sql/functions, sql/order or sql/policies"
        )
    schema = schema_of(admin_dsn)
    in_database = (
        {
            ("function", row["signature"].split("(")[0].removeprefix("fairqueue."))
            for row in schema["functions"]
        }
        | {("trigger", row["tgname"]) for row in schema["triggers"]}
        | {("policy", row["policyname"]) for row in schema["policies"]}
    )
    assert in_database == set(defined)


def test_every_definition_compiles_with_its_body_checked(admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn) as conn:
        conn.execute("set check_function_bodies = on")
        for definition in definitions():
            conn.execute(sql.SQL(definition.sql))
        conn.rollback()


def test_migrate_applies_again_only_the_definition_whose_text_changed(admin_dsn: str) -> None:
    with connect(admin_dsn) as conn:
        conn.execute(
            "update fairqueue.definitions set sha256 = 'stale' where name = 'order/claim.sql'"
        )
        conn.commit()
        assert migrate(conn) == ["order/claim.sql"]
        assert migrate(conn) == []

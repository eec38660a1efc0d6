"""sql/tables.sql is the current schema's tables: what the migrations make, rendered from the
catalogs (tests/tables_file.py). A migration that changes a table fails here until `make schema`
writes the file again."""

from __future__ import annotations

import difflib

import psycopg

from support.tables_file import TABLES_FILE, render_tables


def _diff(expected: str, actual: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), "sql/tables.sql", "migrated", lineterm=""
    )
    return "\n".join(lines)


def test_tables_sql_is_what_the_migrations_make(admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn) as conn:
        migrated = render_tables(conn)
    written = TABLES_FILE.read_text(encoding="utf-8")
    assert migrated == written, (
        "sql/tables.sql is stale: run `make schema` and commit it\n" + _diff(written, migrated)
    )


def test_a_changed_table_changes_its_rendering(admin_dsn: str) -> None:
    # What a migration could do to a table: each change must show in the text, or a stale file
    # would pass the test above.
    with psycopg.connect(admin_dsn) as conn:
        before = render_tables(conn)
        conn.execute("alter table fairqueue.runs add column note text default 'none'")
        conn.execute("alter table fairqueue.runs add constraint runs_note_short check (note <> '')")
        conn.execute("create index runs_note_idx on fairqueue.runs (note)")
        conn.execute("alter table fairqueue.runs set (fillfactor = 90)")
        conn.execute("grant update (note) on fairqueue.runs to fairqueue_app")
        conn.execute("alter table fairqueue.quotas enable row level security")
        after = render_tables(conn)
        conn.rollback()
    changed = [line for line in _diff(before, after).splitlines() if line[:1] in "+-"][2:]
    assert changed == [
        "+ALTER TABLE fairqueue.quotas ENABLE ROW LEVEL SECURITY;",
        "+    note text DEFAULT 'none'::text,",
        "+    CONSTRAINT runs_note_short CHECK ((note <> ''::text)),",
        "-);",
        "+) WITH (fillfactor=90);",
        "+CREATE INDEX runs_note_idx ON fairqueue.runs USING btree (note);",
        "+GRANT UPDATE (note) ON fairqueue.runs TO fairqueue_app;",
    ]

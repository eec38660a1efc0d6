"""The migration that gave served rows their standings computes, for a queue already in use,
what the triggers keep for new work."""

from __future__ import annotations

import re

from fairqueue import Stage, enqueue
from fairqueue.db import Connection
from fairqueue.groups import pause_group
from fairqueue.plans import set_plan
from support.databases import ROOT

STAGE = Stage("stood", handler=lambda _job: None)
STANDING = "type, group_key, tenant_id, plan, paused, head_created_at, head_id, wake_at"


def _fill_statement() -> str:
    """The migration's statement that computes the standings of the queued work."""
    text = (ROOT / "sql" / "migrations" / "0019_standings.sql").read_text()
    found = re.search(r"^insert into fairqueue\.served .*?;$", text, re.S | re.M)
    assert found is not None
    return found.group(0)


def _standings(conn: Connection) -> list[dict[str, object]]:
    return conn.execute(
        f"select {STANDING} from fairqueue.served where head_id is not null or wake_at is not null"
        " order by type, group_key"
    ).fetchall()


def test_the_migration_stands_queued_work_as_the_triggers_do(conn: Connection) -> None:
    set_plan(conn, "acme", "team")
    for group in ("inbox", "outbox", None):
        enqueue(conn, STAGE.name, {}, tenant_id="acme", group_id=group)
    enqueue(conn, STAGE.name, {}, tenant_id="beta", group_id="inbox", run_after=_later(conn))
    enqueue(conn, STAGE.name, {}, tenant_id="beta", group_id="inbox")
    enqueue(conn, STAGE.name, {}, tenant_id=None)
    pause_group(conn, "outbox", tenant_id="acme")
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id, status, finished_at)"
        " values (%s, 'acme', 'inbox', 'done', now())",
        (STAGE.name,),
    )
    kept = _standings(conn)
    assert len(kept) == 5

    conn.execute(
        "update fairqueue.served set tenant_id = null, plan = '', paused = false,"
        " head_created_at = null, head_id = null, wake_at = null"
    )
    conn.execute(_fill_statement())
    assert _standings(conn) == kept


def _later(conn: Connection) -> object:
    row = conn.execute("select now() + interval '1 hour' as at").fetchone()
    assert row is not None
    return row["at"]

"""A group is its tenant's: pause, served counts and the order go by tenant and group together,
and a job with no group is in its tenant's default group."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest

from fairqueue import Stage, connect, enqueue, migrate, run_pipeline
from fairqueue.db import Connection
from fairqueue.groups import pause_group, resume_group
from fairqueue.pipeline.claim import claim_batch
from support.databases import scratch_database
from support.rows import job
from support.schema_catalog import install_release

GROUPED = Stage("grouped", handler=lambda job: None, batch=10)


def claimed_tenants(conn: Connection, batch: int) -> list[str | None]:
    return [
        c.tenant_id for c in claim_batch(conn, "grouped", batch=batch, lease_s=60, locked_by="t")
    ]


def test_pausing_a_group_pauses_only_that_tenants_group_of_the_name(dsn, conn) -> None:
    a_job = enqueue(conn, "grouped", {}, tenant_id="a", group_id="inbox")
    b_job = enqueue(conn, "grouped", {}, tenant_id="b", group_id="inbox")
    with connect(dsn, autocommit=True) as app:
        pause_group(app, "inbox", tenant_id="a")
        # b pausing and resuming its own inbox is b's business: no error, no effect on a.
        pause_group(app, "inbox", tenant_id="b")
        resume_group(app, "inbox", tenant_id="b")

    result = run_pipeline(dsn, [GROUPED])

    assert result.jobs_done == 1
    assert (job(conn, a_job)["status"], job(conn, b_job)["status"]) == ("pending", "done")
    groups = conn.execute(
        "select tenant_id, id, status from fairqueue.groups order by 1"
    ).fetchall()
    assert [(g["tenant_id"], g["id"], g["status"]) for g in groups] == [
        ("a", "inbox", "paused"),
        ("b", "inbox", "active"),
    ]


def test_two_tenants_groups_of_one_name_keep_their_own_served_counts(dsn, conn) -> None:
    for _ in range(5):
        enqueue(conn, "grouped", {}, tenant_id="a", group_id="inbox")
    run_pipeline(dsn, [GROUPED])  # a's inbox has had five served today
    a_next = [enqueue(conn, "grouped", {}, tenant_id="a", group_id="inbox") for _ in range(3)]
    b_next = [enqueue(conn, "grouped", {}, tenant_id="b", group_id="inbox") for _ in range(3)]
    served = conn.execute(
        "select group_key, n from fairqueue.served where type = 'grouped' and n <> 0 order by 1"
    ).fetchall()
    assert [(s["group_key"], s["n"]) for s in served] == [("a/inbox", 5)]

    # b's inbox has had nothing: all three of b's come before a's.
    first = claim_batch(conn, "grouped", batch=3, lease_s=60, locked_by="t")
    assert sorted(c.id for c in first) == sorted(b_next)
    assert {job(conn, i)["status"] for i in a_next} == {"pending"}


def test_tenants_that_never_name_a_group_are_served_fairly_between_them(conn) -> None:
    for _ in range(100):
        enqueue(conn, "grouped", {}, tenant_id="a")
    for _ in range(10):
        enqueue(conn, "grouped", {}, tenant_id="b")
    for _ in range(10):
        enqueue(conn, "grouped", {})  # no tenant: a group of their own

    counts = Counter(claimed_tenants(conn, 9))

    assert counts == {"a": 3, "b": 3, None: 3}


def test_a_group_key_is_one_spelling_of_tenant_and_group(conn) -> None:
    pairs = [
        ("acme", "inbox"),
        ("acme", None),
        (None, None),
        (None, "inbox"),
        ("a/b", "c"),
        ("a", "b/c"),
        ("a\\", "/c"),
        ("a", "\\/c"),
    ]
    keys = [
        conn.execute("select fairqueue.group_key(%s, %s) as k", pair).fetchone()["k"]
        for pair in pairs
    ]
    assert keys[:3] == ["acme/inbox", "acme/", "/"]
    assert len(set(keys)) == len(keys)


@pytest.fixture
def old_schema_dsn(server_dsn: str) -> Iterator[str]:
    """A database migrated up to the migration before groups became their tenant's."""
    with scratch_database(server_dsn, f"fq_groups_migration_{os.getpid()}") as dsn:
        # The release before groups belonged to their tenants, as its migrations left it.
        install_release(dsn, "45b7a08", below=13)
        yield dsn


def test_the_migration_carries_groups_and_served_counts_over(old_schema_dsn: str) -> None:
    with connect(old_schema_dsn, autocommit=True) as conn:
        conn.execute(
            "insert into fairqueue.groups (id, tenant_id, status) values ('inbox', 'a', 'paused')"
        )
        conn.execute(
            "insert into fairqueue.jobs (type, tenant_id, group_id, status, finished_at) values"
            " ('grouped', 'a', 'inbox', 'done', now()), ('grouped', 'b', 'inbox', 'done', now()),"
            " ('grouped', 'b', null, 'done', now()), ('grouped', null, null, 'done', now())"
        )
        conn.execute(
            "insert into fairqueue.jobs (type, tenant_id, group_id)"
            " values ('grouped', 'a', 'inbox'), ('grouped', 'b', 'inbox')"
        )
        before = conn.execute("select group_key, n from fairqueue.served order by 1").fetchall()
        assert [(r["group_key"], r["n"]) for r in before] == [("", 2), ("inbox", 2)]

        assert migrate(conn)[0] == "0013_groups_are_tenants.sql"

        after = conn.execute("select group_key, n from fairqueue.served order by 1").fetchall()
        assert [(r["group_key"], r["n"]) for r in after] == [
            ("/", 1),
            ("a/inbox", 1),
            ("b/", 1),
            ("b/inbox", 1),
        ]
        groups = conn.execute("select key, status from fairqueue.groups").fetchall()
        assert [(g["key"], g["status"]) for g in groups] == [("a/inbox", "paused")]
        claimed = claim_batch(conn, "grouped", batch=5, lease_s=60, locked_by="t")
        assert [c.tenant_id for c in claimed] == ["b"]  # a's inbox is still paused


@pytest.mark.parametrize("group_id", [None, "", "in\x00box", "g" * 201])
def test_pausing_needs_a_group_id_that_can_be_stored(dsn, conn, group_id) -> None:
    from fairqueue import InvalidPayload

    with connect(dsn, autocommit=True) as app, pytest.raises(InvalidPayload, match="group_id"):
        pause_group(app, group_id, tenant_id="a")
    assert conn.execute("select count(*) as n from fairqueue.groups").fetchone()["n"] == 0

"""Finished jobs leaving the hot table, on a database in use: the last release before it,
migrated by its own code and holding open and finished jobs, brought to today's schema, then
its finished jobs moved in small batches while the queue goes on. Nothing is lost or changed,
each job lands on its side, and the served counts hold."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fairqueue import Stage, enqueue
from fairqueue.db import Connection, connect
from fairqueue.migrate import migrate
from fairqueue.pipeline.claim import claim_batch, complete_claimed
from support.databases import scratch_database
from support.schema_catalog import migrate_as_release

# The last release whose jobs table held finished jobs beside open ones.
RELEASE = "fb9ae89"
TYPE = "split"
Stage(TYPE, handler=lambda _job: None)

OLD_ROWS = """
insert into fairqueue.jobs (type, tenant_id, group_id, status, dedupe_key, lane, attempts,
                            run_after, locked_at, lease_until, locked_by, finished_at, output,
                            last_error)
values (%(type)s, 'a', 'g1', 'pending', null, null, 0, now() - interval '1 minute',
        null, null, null, null, null, null),
       (%(type)s, 'a', 'g1', 'pending', 'k1', null, 0, now() - interval '30 seconds',
        null, null, null, null, null, null),
       (%(type)s, 'b', null, 'pending', null, null, 0, now() + interval '1 hour',
        null, null, null, null, null, null),
       (%(type)s, 'b', null, 'queued', null, 'u1', 0, now(), null, null, null, null, null, null),
       (%(type)s, 'b', 'g2', 'running', null, null, 1, now() - interval '5 minutes',
        now() - interval '1 minute', now() + interval '1 hour', 'old', null, null, null),
       (%(type)s, 'a', 'g1', 'done', 'k1', null, 1, now() - interval '2 hours',
        now() - interval '2 hours', null, 'old', now() - interval '1 hour', '{"n": 1}', null),
       (%(type)s, 'a', 'g2', 'failed', null, null, 3, now() - interval '3 days',
        now() - interval '2 days', null, 'old', now() - interval '2 days', null, 'boom'),
       (%(type)s, null, null, 'cancelled', null, null, 0, now() - interval '3 hours',
        null, null, null, now() - interval '3 hours', null, null),
       (%(type)s, 'b', 'g2', 'done', null, null, 1, now() - interval '40 minutes',
        now() - interval '30 minutes', null, 'by hand', null, null, null)
"""
SERVED = "select type, group_key, n, head_id, wake_at from fairqueue.served order by 1, 2"
# The served counts as their definition has them, for a recount after the queue went on.
SERVED_BY_DEFINITION = """
select j.type, j.group_key, count(*) as n
  from fairqueue.all_jobs j, fairqueue.served_watermark w
 where j.served_at > w.watermark
 group by 1, 2
 order by 1, 2
"""


@pytest.fixture
def released_dsn(server_dsn: str) -> Iterator[str]:
    with scratch_database(server_dsn, f"fq_finished_jobs_migration_{os.getpid()}") as dsn:
        migrate_as_release(dsn, RELEASE)
        yield dsn


def jobs(conn: Connection) -> dict[object, dict[str, object]]:
    """Every job as the release knew it (the columns both tables share), with the table that
    holds it."""
    rows = conn.execute(
        "select a.*, case when j.id is null then 'fairqueue.finished_jobs'"
        " else 'fairqueue.jobs' end as side"
        "  from fairqueue.all_jobs a left join fairqueue.jobs j on j.id = a.id"
    )
    return {r["id"]: r for r in rows.fetchall()}


def test_finished_jobs_leave_in_batches_while_the_queue_goes_on(released_dsn: str) -> None:
    with connect(released_dsn, autocommit=True) as conn:
        conn.execute(OLD_ROWS, {"type": TYPE})
        before = {r["id"]: r for r in conn.execute("select * from fairqueue.jobs").fetchall()}
        served_before = conn.execute(SERVED).fetchall()
        assert len(before) == 9

        assert "0022_finished_jobs.sql" in migrate(conn)
        # The columns the release knew (later migrations add more).
        known = next(iter(before.values())).keys()
        assert {i: {k: v for k, v in r.items() if k in known} for i, r in jobs(conn).items()} == (
            before
        )
        assert conn.execute(SERVED).fetchall() == served_before

        # Two at a time, between claims and completions: every batch its own transaction.
        claimed = claim_batch(conn, TYPE, batch=1, lease_s=60, locked_by="new")
        moves = []
        while True:
            moved = conn.execute(
                "select fairqueue.move_finished(2, interval '1 s') as n"
            ).fetchone()["n"]
            moves.append(moved)
            if moved < 2:
                break
            claimed += claim_batch(conn, TYPE, batch=1, lease_s=60, locked_by="new")
        assert moves == [2, 1]  # the done job whose output waits for a result stays
        assert len(claimed) == 2
        done = complete_claimed(conn, [(c.tenant_id, c.id) for c in claimed], "new")
        assert done == {c.id for c in claimed}
        # A completion with no output moves its jobs itself: the move finds nothing left.
        assert (
            conn.execute("select fairqueue.move_finished(10, interval '1 s') as n").fetchone()["n"]
            == 0
        )

        after = jobs(conn)
        assert set(after) == set(before)
        for job_id, old in before.items():
            new = after[job_id]
            if job_id in done:
                assert (new["side"], new["status"]) == ("fairqueue.finished_jobs", "done")
                continue
            awaiting = old["status"] == "done" and old["output"] is not None
            if old["status"] in ("queued", "pending", "running") or awaiting:
                assert new["side"] == "fairqueue.jobs"
            else:
                assert new["side"] == "fairqueue.finished_jobs"
            if old["finished_at"] is None and old["status"] == "done":
                # Finished by hand without a time: it finished when it was last taken.
                assert new["finished_at"] == old["locked_at"]
                old = {**old, "finished_at": old["locked_at"]}
            assert {k: v for k, v in new.items() if k in known} == old

        # The dedupe key the open job held is free again once it finished, and the served
        # counts are what the jobs on both sides say.
        assert enqueue(conn, TYPE, {}, tenant_id="a", group_id="g1", dedupe_key="k1") is not None
        by_counter = conn.execute(
            "select type, group_key, n from fairqueue.served where n <> 0 order by 1, 2"
        ).fetchall()
        assert by_counter == conn.execute(SERVED_BY_DEFINITION).fetchall()

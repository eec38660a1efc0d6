"""A claim commits without waiting for the disk: on a private cluster crashed right after it, the
claim is gone and its jobs are pending again, untouched; a completion's commit, which waits,
keeps the claim before it; a claim inside the caller's own transaction is as durable as that."""

from __future__ import annotations

from uuid import UUID

import pytest
from psycopg import sql

from fairqueue import Job, NewJob, Stage, connect, enqueue, enqueue_many
from fairqueue.db import Connection
from fairqueue.doorbells.message import Doorbell
from fairqueue.errors import ConnectionLost
from fairqueue.migrate import migrate
from fairqueue.pipeline.claim import claim_batch, complete_claimed
from fairqueue.roles.worker import ring_all
from support.private_cluster import Cluster, private_cluster

TYPE = "claim_commit"
Stage(TYPE, handler=lambda job: None)
BELL_TYPE = "claim_commit_bell"
# Nothing flushes the WAL behind a quick commit for ten seconds: not the WAL writer, not the
# background writer, not autovacuum's commits.
QUIET_WAL = {"wal_writer_delay": "10s", "bgwriter_lru_maxpages": "0", "autovacuum": "off"}


def quiet(cluster: Cluster) -> None:
    with connect(cluster.dsn, autocommit=True) as admin:
        for name, value in QUIET_WAL.items():
            admin.execute(
                sql.SQL("alter system set {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
    cluster.restart()


def jobs(admin: Connection, job_type: str = TYPE) -> dict[UUID, tuple[str, int, str | None]]:
    rows = admin.execute(
        "select id, status, attempts, locked_by from fairqueue.all_jobs where type = %s",
        (job_type,),
    ).fetchall()
    return {r["id"]: (r["status"], r["attempts"], r["locked_by"]) for r in rows}


def served(admin: Connection) -> int:
    row = admin.execute(
        "select coalesce(sum(n), 0) as n from fairqueue.served where type = %s", (TYPE,)
    ).fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.timeout(180)
def test_a_crash_loses_a_quick_claim_whole_and_nothing_a_durable_commit_kept() -> None:
    with private_cluster() as cluster:
        quiet(cluster)
        with connect(cluster.dsn, autocommit=True) as admin:
            migrate(admin)
            with admin.transaction():
                made = enqueue_many(admin, TYPE, [NewJob({"n": n}) for n in range(3)])
        ids = {m.job_id for m in made}

        # A claim alone: gone with the crash, its jobs pending as before, its counts with it.
        with connect(cluster.dsn, autocommit=True) as conn:
            claimed = claim_batch(conn, TYPE, batch=3, lease_s=600, locked_by="first")
            cluster.crash()
        assert {c.id for c in claimed} == ids
        with connect(cluster.dsn, autocommit=True) as admin:
            assert jobs(admin) == {i: ("pending", 0, None) for i in ids}
            assert served(admin) == 0

        # A claim and its batch's completion: the completion's commit waits for the disk, and
        # the WAL is flushed in order, so the claim before it is kept too.
        with connect(cluster.dsn, autocommit=True) as conn:
            claimed = claim_batch(conn, TYPE, batch=3, lease_s=600, locked_by="second")
            done = complete_claimed(conn, [(c.tenant_id, c.id) for c in claimed], "second")
            cluster.crash()
        assert done == ids
        with connect(cluster.dsn, autocommit=True) as admin:
            assert jobs(admin) == {i: ("done", 1, "second") for i in ids}
            assert served(admin) == 3

            # A claim inside the caller's open transaction commits as the caller's does.
            with admin.transaction():
                more = enqueue_many(admin, TYPE, [NewJob({"n": n}) for n in range(2)])
        more_ids = {m.job_id for m in more}
        with connect(cluster.dsn) as conn:
            with conn.transaction():
                conn.execute("select 1")
                claimed = claim_batch(conn, TYPE, batch=2, lease_s=600, locked_by="third")
                assert conn.execute("show synchronous_commit").fetchone() == {
                    "synchronous_commit": "on"
                }
            cluster.crash()
        assert {c.id for c in claimed} == more_ids
        with connect(cluster.dsn, autocommit=True) as admin:
            assert {i: s for i, s in jobs(admin).items() if i in more_ids} == {
                i: ("running", 1, "third") for i in more_ids
            }


@pytest.mark.timeout(180)
def test_a_crash_loses_a_doorbell_claim_whole() -> None:
    # The worker's claim of the doorbell's job commits without waiting for the disk; the server
    # crashes while the job's handler runs, so the claim is gone and the job is pending again,
    # untouched, for the next doorbell or the sweep.
    with private_cluster() as cluster:
        quiet(cluster)
        crashed: list[UUID] = []

        def crash_in_the_handler(job: Job) -> None:
            crashed.append(job.id)
            cluster.crash()

        stage = Stage(BELL_TYPE, handler=crash_in_the_handler, delivery="doorbell")
        with connect(cluster.dsn, autocommit=True) as admin:
            migrate(admin)
            job_id = enqueue(admin, BELL_TYPE, {}, tenant_id="acme")
        assert job_id is not None
        with pytest.raises(ConnectionLost):
            ring_all(cluster.dsn, [stage], [Doorbell(job_id=job_id, tenant_id="acme")])
        assert crashed == [job_id]
        with connect(cluster.dsn, autocommit=True) as admin:
            assert jobs(admin, BELL_TYPE) == {job_id: ("pending", 0, None)}

"""Every running job holds a lease, on a database in use: the release before the rule, with a
running job left leaseless by hand, brought to today's schema. That job gets a lease that has
run out, so the next claim takes it again; every other row is as it was; and from then on a
running job without a lease is refused."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from fairqueue import Stage
from fairqueue.db import connect
from fairqueue.migrate import migrate
from fairqueue.pipeline.claim import claim_batch
from support.databases import scratch_database
from support.schema_catalog import migrate_as_release

# The last release whose running jobs could be without a lease.
RELEASE = "787e672"
TYPE = "leased"
Stage(TYPE, handler=lambda _job: None)

ROWS = """
insert into fairqueue.jobs (type, status, attempts, locked_at, lease_until, locked_by)
values (%(type)s, 'running', 1, now() - interval '2 hours', null, 'by hand'),
       (%(type)s, 'running', 1, now() - interval '1 minute', now() + interval '1 hour', 'alive'),
       (%(type)s, 'pending', 0, null, null, null)
returning id, status, lease_until
"""


@pytest.fixture
def released_dsn(server_dsn: str) -> Iterator[str]:
    with scratch_database(server_dsn, f"fq_running_leased_migration_{os.getpid()}") as dsn:
        migrate_as_release(dsn, RELEASE)
        yield dsn


def test_a_leaseless_running_job_gets_a_lease_that_ran_out_and_none_is_made_again(
    released_dsn: str,
) -> None:
    with connect(released_dsn, autocommit=True) as conn:
        leaseless, alive, pending = (r["id"] for r in conn.execute(ROWS, {"type": TYPE}))
        before = {r["id"]: r for r in conn.execute("select * from fairqueue.jobs").fetchall()}

        assert "0041_served_time_index_done_only.sql" in migrate(conn)
        # The columns the release knew (later migrations add more).
        known = before[pending].keys()
        after = {
            r["id"]: {k: v for k, v in r.items() if k in known}
            for r in conn.execute("select * from fairqueue.jobs").fetchall()
        }
        assert after[leaseless]["lease_until"] == before[leaseless]["locked_at"]
        assert {k: v for k, v in after[leaseless].items() if k != "lease_until"} == {
            k: v for k, v in before[leaseless].items() if k != "lease_until"
        }
        assert after[alive] == before[alive]
        assert after[pending] == before[pending]

        # The next claim takes the job no one held, as its next attempt, beside the pending one.
        claimed = claim_batch(conn, TYPE, batch=10, lease_s=60, locked_by="next")
        assert {c.id for c in claimed} == {leaseless, pending}

        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("update fairqueue.jobs set lease_until = null where id = %s", (alive,))

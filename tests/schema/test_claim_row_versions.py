"""What a claim leaves in the heap: the row versions it replaces carry its transaction as their
updater, never a multixact. A row locked in one subtransaction and updated in another keeps the
lock beside the update in a multixact, which every later reader of the old version has to look
up; both claims lock and update their picks in one.

The versions are read with pageinspect, which a server may not ship (the embedded one does
not): there the tests skip."""

from __future__ import annotations

from uuid import UUID

import psycopg
import pytest

from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import set_plan
from fairqueue.stage import FairShare

# t_infomask bits (src/include/access/htup_details.h).
HEAP_XMAX_IS_MULTI = 0x1000
HEAP_XMAX_INVALID = 0x0800

# Every version on the heap pages that hold the given rows now: how many name an updater or
# locker, and how many of those are multixacts.
VERSIONS = """
with pages as (
    select distinct (ctid::text::point)[0]::integer as page
      from fairqueue.jobs
     where id = any(%(ids)s)
)
select count(*) filter (where v.t_infomask & %(invalid)s = 0 and v.t_xmax <> '0') as replaced,
       count(*) filter (where v.t_infomask & %(multi)s <> 0) as multixacts
  from pages, heap_page_items(get_raw_page('fairqueue.jobs', pages.page)) v
 where v.lp_flags = 1
"""


@pytest.fixture
def pageinspect(conn: Connection) -> None:
    try:
        conn.execute("create extension if not exists pageinspect")
    except psycopg.errors.FeatureNotSupported:
        pytest.skip("this server does not ship pageinspect")
    except psycopg.errors.UndefinedFile:
        pytest.skip("this server does not ship pageinspect")


def claimed_versions(conn: Connection, fair_share: FairShare) -> tuple[int, dict[str, int]]:
    """Claim a batch of 100 in one transaction and read the versions on its pages before it
    commits."""
    with conn.transaction(force_rollback=True):
        claimed = claim_batch(
            conn, "planned", batch=100, lease_s=60, locked_by="versions", fair_share=fair_share
        )
        ids: list[UUID] = [c.id for c in claimed]
        found = conn.execute(
            VERSIONS, {"ids": ids, "invalid": HEAP_XMAX_INVALID, "multi": HEAP_XMAX_IS_MULTI}
        ).fetchone()
    assert found is not None
    return len(ids), {"replaced": found["replaced"], "multixacts": found["multixacts"]}


def backlog(conn: Connection) -> None:
    # 100 groups of 20 tenants on two plans, three jobs each: a batch takes each group's first.
    for k in range(20):
        set_plan(conn, f"t{k}", "pro" if k < 5 else "free")
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (g % 20), 'g' || g"
        " from generate_series(0, 99) g, generate_series(1, 3) i"
    )
    conn.execute("analyze fairqueue.jobs")


@pytest.mark.usefixtures("pageinspect")
@pytest.mark.parametrize("fair_share", ["group", "tenant"])
def test_a_claim_replaces_its_rows_versions_without_a_multixact(
    conn: Connection, fair_share: FairShare
) -> None:
    backlog(conn)
    # The tenant level builds its standings on the first claim; the versions read are the next's.
    claim_batch(conn, "planned", batch=1, lease_s=60, locked_by="first", fair_share=fair_share)
    claimed, versions = claimed_versions(conn, fair_share)
    assert claimed == 100
    # The claimed rows' old versions (and the first claim's) name their updater: the read sees
    # them, and none of them is a multixact.
    assert versions["replaced"] >= 100
    assert versions["multixacts"] == 0

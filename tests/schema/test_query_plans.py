"""The claim must stay an index walk as the table grows; a plan change here is a regression.

The claim runs inside door functions (their bodies are the *_unchecked functions behind the
checked doors, sql/functions/door_argument.sql), whose plans EXPLAIN does not
show; each door's body is prepared as a statement of its own and explained instead.
"""

import re
from pathlib import Path

import psycopg

from fairqueue import PLANS, Stage, connect
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import set_plan


def noop(_job: object) -> None:
    pass


Stage("planned", handler=noop)


def door_plan(conn, function: str, args: list) -> list[dict]:
    """Every node of the plan of a SQL door function's body, flattened."""
    row = conn.execute(
        "select prosrc, proargnames, proargtypes::regtype[]::text[] as types"
        " from pg_proc where oid = %s::regprocedure",
        (function,),
    ).fetchone()
    body = row["prosrc"]
    names = row["proargnames"][: len(row["types"])]
    for position, name in enumerate(names, start=1):
        body = re.sub(rf"\b{name}\b", f"${position}", body)
    # PREPARE's own $n must reach the server as text: the simple protocol of a client cursor.
    with conn.transaction(force_rollback=True), psycopg.ClientCursor(conn) as cur:
        cur.execute(f"prepare door ({', '.join(row['types'])}) as {body}")
        placeholders = ", ".join(f"%s::{t}" for t in row["types"])
        plan = cur.execute(f"explain (format json) execute door ({placeholders})", args).fetchone()
        cur.execute("deallocate door")
    return plan_nodes(plan)


def plan_nodes(plan: dict) -> list[dict]:
    """Every node of an EXPLAIN (FORMAT JSON) result, flattened."""
    found, todo = [], [plan["QUERY PLAN"][0]["Plan"]]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(node.get("Plans", []))
    return found


def fill(conn) -> None:
    conn.execute(
        "insert into fairqueue.jobs (type, group_id, status, finished_at)"
        " select 'other', 'g' || (i % 50), 'done', now() - (i % 2000) * interval '1 minute'"
        " from generate_series(1, 30000) i"
    )
    conn.execute(
        "insert into fairqueue.jobs (type, group_id)"
        " select 'planned', 'g' || (i % 50) from generate_series(1, 2000) i"
    )
    conn.execute("analyze fairqueue.jobs")


def assert_walks_the_claim_index(plan: list[dict], index: str = "jobs_claim_idx") -> None:
    assert any(n.get("Index Name") == index for n in plan)
    seq_scans = [
        n for n in plan if n.get("Relation Name") == "jobs" and n["Node Type"] == "Seq Scan"
    ]
    assert seq_scans == []


# What one claim reads, as the server counts it for the transaction: the entries its index scans
# returned from each table's indexes and the rows of any scan of the table itself; the bench's
# claim-latency table counts it the same way. The claim is PL/pgSQL, whose statements EXPLAIN
# cannot show from outside, so its reads are bounded instead.
READS = (Path(__file__).parents[2] / "bench" / "claim_reads.sql").read_text(encoding="utf-8")
PLAN_TERMS = "%(plan_names)s, %(plan_priorities)s, %(default_priority)s"
CLAIMS = {
    "group": "select * from fairqueue.claim(%(type)s, %(batch)s, 60, 'plan', null,"
    f" {PLAN_TERMS}, %(plan_quanta)s, %(default_quantum)s, %(plan_caps)s, %(default_cap)s)",
    "tenant": "select * from fairqueue.claim_by_tenant(%(type)s, %(batch)s, 60, 'plan', null,"
    f" {PLAN_TERMS}, %(plan_quanta)s, %(default_quantum)s, %(plan_caps)s, %(default_cap)s)",
}


def claim_reads_by_table(conn, batch: int, level: str = "group") -> tuple[dict[str, int], int]:
    """Rows of each table one claim of `batch` reads, and how many it claimed; rolled back."""
    params = {"type": "planned", "batch": batch, **PLANS.claim_params()}
    with conn.transaction(force_rollback=True):
        before = conn.execute(READS).fetchone()
        claimed = conn.execute(
            CLAIMS[level],  # type: ignore[call-overload]
            params,
        ).fetchall()
        after = conn.execute(READS).fetchone()
    return {table: after[table] - before[table] for table in after}, len(claimed)


def claim_reads(conn, batch: int) -> tuple[int, int, int]:
    """Rows of jobs and of served one claim of `batch` reads, and how many it claimed; rolled
    back."""
    reads, claimed = claim_reads_by_table(conn, batch)
    return reads["jobs"], reads["served"], claimed


def test_a_claim_reads_rows_in_proportion_to_its_batch_not_to_the_groups(conn) -> None:
    fill(conn)
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 400), 'h' || i from generate_series(1, 4000) i"
    )
    conn.execute("analyze fairqueue.jobs")
    jobs_read, served_read, claimed = claim_reads(conn, 25)
    # 4,050 groups have work; the claim reads a few rows per job it claims, from the standing
    # index and the groups' own queues, never a row per group.
    assert claimed == 25
    assert jobs_read <= 10 * 25
    assert served_read <= 10 * 25


def test_a_claim_over_groups_of_several_plans_reads_the_jobs_its_batch_can_take(conn) -> None:
    # 30 pro groups ahead of 70 free ones, 40 jobs each: the batch is pro jobs only, three or
    # four of each pro group's.
    for tenant, plan in (("paying", "pro"), ("trying", "free")):
        set_plan(conn, tenant, plan)
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', case when g < 30 then 'paying' else 'trying' end, 'g' || g"
        " from generate_series(0, 99) g, generate_series(1, 40) i"
    )
    conn.execute("analyze fairqueue.jobs")
    jobs_read, _, claimed = claim_reads(conn, 100)
    assert claimed == 100
    # The first job of each group, four more of each pro group, the picks locked and updated by
    # id and each group's next head: 520 entries. Offering each pro group as many jobs as it
    # could take with only the other groups' first jobs ahead of it read 1,570.
    assert jobs_read <= 6 * 100


def test_a_claim_by_tenant_reads_rows_in_proportion_to_its_batch_not_to_the_tenants(
    conn,
) -> None:
    fill(conn)
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 400), 'h' || i from generate_series(1, 4000) i"
    )
    conn.execute("analyze fairqueue.jobs")
    # The first claim by tenant builds the tenant standings from every group, once.
    claim_batch(conn, "planned", batch=1, lease_s=60, locked_by="plan", fair_share="tenant")
    reads, claimed = claim_reads_by_table(conn, 25, "tenant")
    # 401 tenants and 4,050 groups have work; the claim reads a few rows per job it claims.
    assert claimed == 25
    assert reads["jobs"] <= 10 * 25
    assert reads["served"] <= 10 * 25
    assert reads["tenants"] <= 10 * 25


def test_a_claim_by_tenant_over_tenants_of_several_plans_reads_the_jobs_its_batch_can_take(
    conn,
) -> None:
    # Three team tenants with twenty groups of thirty jobs each, ahead of fifty pro tenants with
    # one group of twenty: the batch is the team tenants' jobs, 33 or 34 picks each, two of each
    # of their groups and a third of some.
    for k in range(3):
        set_plan(conn, f"team{k}", "team")
    for k in range(50):
        set_plan(conn, f"pro{k}", "pro")
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 'team' || t, 'g' || g"
        " from generate_series(0, 2) t, generate_series(0, 19) g, generate_series(1, 30) i"
    )
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 'pro' || t, 'g' from generate_series(0, 49) t,"
        " generate_series(1, 20) i"
    )
    conn.execute("analyze fairqueue.jobs")
    claim_batch(conn, "planned", batch=1, lease_s=60, locked_by="plan", fair_share="tenant")
    reads, claimed = claim_reads_by_table(conn, 100, "tenant")
    assert claimed == 100
    # Each team group's three first jobs, the pro tenants' first, the picks locked and updated
    # by id and each group's next head: 589 entries. Offering each team tenant as many picks as
    # it could take with only the other tenants' first picks ahead of it, and each of its groups
    # as many of those as it could give, read 3,159.
    assert reads["jobs"] <= 10 * 100


def claimed_before_the_head(conn) -> None:
    """20,000 jobs in one group, the first 15,000 claimed in one statement no enqueue overlapped.
    Jobs claimed since the last vacuum keep their entries in the group's queue index: some 150
    pages of them before the group's head, which is the floor of its due jobs."""
    conn.execute(
        "insert into fairqueue.jobs (type, group_id)"
        " select 'planned', 'g' from generate_series(1, 20000)"
    )
    conn.execute(
        "update fairqueue.jobs set status = 'running', locked_at = now(),"
        "       lease_until = now() + interval '1 minute'"
        " where id in (select id from fairqueue.jobs order by created_at, id limit 15000)"
    )


def test_a_groups_first_job_is_read_from_its_head_on_not_past_its_claimed_jobs(conn) -> None:
    claimed_before_the_head(conn)
    params = PLANS.claim_params()
    pages = (
        "select pg_stat_get_xact_blocks_fetched('fairqueue.jobs_group_queue_idx'::regclass) as n"
    )
    with conn.transaction(force_rollback=True):
        before = conn.execute(pages).fetchone()
        (first,) = conn.execute(
            "select array(select f.id from unnest(fairqueue.claim_firsts('planned', 1, %s, %s, %s,"
            " true, '{}', 0, false)) f) as first_ids",
            (params["plan_names"], params["plan_priorities"], params["default_priority"]),
        ).fetchall()
        after = conn.execute(pages).fetchone()
    head = conn.execute(
        "select head_id from fairqueue.served where type = 'planned' and group_key = '/g'"
    ).fetchone()
    assert first["first_ids"] == [head["head_id"]]
    assert after["n"] - before["n"] <= 10


def test_a_claimed_groups_next_head_is_read_from_its_head_on_not_past_its_claimed_jobs(
    conn,
) -> None:
    claimed_before_the_head(conn)
    pages = (
        "select pg_stat_get_xact_blocks_fetched('fairqueue.jobs_group_queue_idx'::regclass) as n"
    )
    with conn.transaction(force_rollback=True):
        before = conn.execute(pages).fetchone()
        taken = claim_batch(conn, "planned", batch=1, lease_s=60, locked_by="plans")
        after = conn.execute(pages).fetchone()
        head = conn.execute(
            "select head_id from fairqueue.served where type = 'planned' and group_key = '/g'"
        ).fetchone()
        second = conn.execute(
            "select id from fairqueue.jobs where type = 'planned' and status = 'pending'"
            " order by created_at, id limit 1"
        ).fetchone()
    assert len(taken) == 1
    assert head["head_id"] == second["id"]
    # The first job's read and the next head's, each from a head on: a few pages each, where
    # a head read from the group's start walks some 150 pages of claimed jobs' entries.
    assert after["n"] - before["n"] <= 20


def test_has_claimable_uses_the_claim_index(conn) -> None:
    fill(conn)
    assert_walks_the_claim_index(door_plan(conn, "fairqueue.has_claimable(text)", ["planned"]))


def test_expired_leases_are_found_by_their_own_index(conn) -> None:
    fill(conn)
    plan = door_plan(
        conn, "fairqueue.fail_abandoned_unchecked(text[], integer)", [["planned"], 100]
    )
    assert any(n.get("Index Name") == "jobs_lease_idx" for n in plan)


# What a batch function returns, and the statement a function that returns a count runs.
RETURNED = r"return query\s+(.*?);"
UPDATED = r"\b(update fairqueue\.jobs .*?);"


def batch_statement_plan(
    conn, function: str, params: dict[str, str], args: list, statement_pattern: str = RETURNED
) -> list[dict]:
    """Every node of the generic plan of the last statement of a PL/pgSQL batch function
    (sql/functions/claimed_batch.sql) that `statement_pattern` finds (by default the last it
    returns: complete_claimed's per-tenant one), its variables (`params`: name to $n::type)
    bound as parameters."""
    body = conn.execute("select prosrc from pg_proc where oid = %s::regprocedure", (function,))
    statement = re.findall(statement_pattern, body.fetchone()["prosrc"], re.S)[-1]
    for name, placeholder in params.items():
        statement = statement.replace(name, placeholder)
    with conn.transaction(force_rollback=True), psycopg.ClientCursor(conn) as cur:
        cur.execute("set local plan_cache_mode = force_generic_plan")
        cur.execute(f"prepare batch as {statement}")
        placeholders = ", ".join(["%s"] * len(args))
        plan = cur.execute(f"explain (format json) execute batch ({placeholders})", args).fetchone()
        cur.execute("deallocate batch")
    return plan_nodes(plan)


def test_the_days_expiry_reads_the_served_jobs_not_the_backlog(conn) -> None:
    # The counts as of 26 hours ago, then a backlog of 30,000 pending jobs, 300 running (a third
    # claimed 25 hours ago) and 60 done whose outputs wait for their results: the expiry reads
    # the jobs in flight and the done ones, through the lease index and the done jobs' own,
    # never the backlog.
    conn.execute("update fairqueue.served_watermark set watermark = now() - interval '26 hours'")
    conn.execute(
        "insert into fairqueue.jobs (type, group_id)"
        " select 'planned', 'g' || (i % 50) from generate_series(1, 30000) i"
    )
    conn.execute(
        "insert into fairqueue.jobs (type, group_id, status, attempts, locked_at, lease_until)"
        " select 'planned', 'g' || (i % 50), 'running', 1,"
        " now() - case when i % 3 = 0 then interval '25 hours' else interval '1 hour' end,"
        " now() + interval '1 hour' from generate_series(1, 300) i"
    )
    conn.execute(
        "insert into fairqueue.jobs (type, group_id, status, finished_at, output)"
        " select 'planned', 'g' || (i % 50), 'done',"
        " now() - (i % 30 + 0.5) * interval '1 hour', '{}' from generate_series(1, 60) i"
    )
    conn.execute("analyze fairqueue.jobs")
    served = "select sum(n) as n from fairqueue.served where type = 'planned'"
    with conn.transaction(force_rollback=True):
        kept = conn.execute(served).fetchone()["n"]
        before = conn.execute(READS).fetchone()
        assert conn.execute("select fairqueue.expire_served() as moved").fetchone()["moved"]
        after = conn.execute(READS).fetchone()
        # What crossed the edge left the counts: the 100 claimed 25 hours ago and the done jobs
        # that finished 24.5 and 25.5 hours ago (two each).
        assert kept - conn.execute(served).fetchone()["n"] == 104
    assert after["jobs"] - before["jobs"] < 2_000


def test_a_batch_reads_and_completes_its_jobs_by_primary_key(conn) -> None:
    # Statistics taken while nothing ran, then 2,000 running rows: the planner believes few
    # jobs run, and a partial index over running rows would look cheap to scan in full.
    fill(conn)
    ids = [
        r["id"]
        for r in conn.execute(
            "update fairqueue.jobs set status = 'running', locked_by = 'me',"
            " lease_until = now() + interval '1 minute' where status = 'pending' returning id"
        ).fetchall()
    ][:5]
    read = batch_statement_plan(
        conn,
        "fairqueue.read_claimed(text[], uuid[], text)",
        {
            "owner.ids": "$1::uuid[]",
            "p_locked_by": "$2::text",
            "running_status": "$3::text",
            "owner.tenant_id": "$4::text",
        },
        [ids, "me", "running", None],
    )
    complete = batch_statement_plan(
        conn,
        "fairqueue.complete_claimed(text[], uuid[], jsonb[], text)",
        {
            "owner.ids": "$1::uuid[]",
            "owner.outputs": "$2::jsonb[]",
            "p_locked_by": "$3::text",
            "running_status": "$4::text",
            "owner.tenant_id": "$5::text",
        },
        [ids, [None] * len(ids), "me", "running", None],
    )
    # Those with no output, marked by the door in one statement.
    mark = batch_statement_plan(
        conn,
        "fairqueue.mark_claimed_done_unchecked(text[], uuid[], text)",
        {
            "p_tenant_ids": "$1::text[]",
            "p_ids": "$2::uuid[]",
            "p_locked_by": "$3::text",
            "running_status": "$4::text",
            "unclamped": "$5::boolean",
        },
        [[None] * len(ids), ids, "me", "running", True],
    )
    # The leases kept, by the door in one statement.
    lease = batch_statement_plan(
        conn,
        "fairqueue.extend_leases_unchecked(text[], uuid[], text, double precision)",
        {
            "p_tenant_ids": "$1::text[]",
            "p_ids": "$2::uuid[]",
            "p_locked_by": "$3::text",
            "p_lease_s": "$4::double precision",
            "running_status": "$5::text",
            "unclamped": "$6::boolean",
        },
        [[None] * len(ids), ids, "me", 60.0, "running", True],
        UPDATED,
    )
    for plan in (read, complete, mark, lease):
        assert {n["Index Name"] for n in plan if "Index Name" in n} == {"jobs_pkey"}
        assert not [n for n in plan if n["Node Type"] == "Seq Scan"]


def test_the_backstops_claim_reads_only_its_partial_index_however_long_the_history(
    conn,
) -> None:
    # 30,000 done jobs whose results are decided, and a few still missing theirs, five of them
    # waiting out a failed save.
    fill(conn)
    conn.execute("update fairqueue.jobs set output = '{}', result_at = now() where status = 'done'")
    conn.execute(
        "insert into fairqueue.jobs (type, status, output, finished_at)"
        " select 'planned', 'done', '{}', now() - i * interval '1 minute'"
        " from generate_series(1, 20) i"
    )
    conn.execute(
        "insert into fairqueue.result_save_failures (job_id, retry_at, last_error)"
        " select id, now() + interval '1 minute', 'failed' from fairqueue.jobs"
        " where type = 'planned' and status = 'done' limit 5"
    )
    conn.execute("analyze fairqueue.jobs")
    plan = door_plan(
        conn,
        "fairqueue.claim_results_to_save_unchecked(text[], interval, integer, uuid[])",
        [["planned"], "2 minutes", 100, []],
    )
    assert any(n.get("Index Name") == "jobs_missing_result_idx" for n in plan)
    assert not [
        n for n in plan if n.get("Relation Name") == "jobs" and n["Node Type"] == "Seq Scan"
    ]


def test_a_claim_right_after_a_bulk_enqueue_walks_on_fresh_statistics(conn) -> None:
    """Before any ANALYZE the planner takes the table for empty and walks the groups through the
    wrong index, sorting the backlog at every step; the claim refreshes the statistics first."""
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 20), 'g' || (i % 300) from generate_series(1, 12000) i"
    )
    # No flush of this session's statistics: the claim must see the new rows without them.
    before = conn.execute(
        "select reltuples from pg_class where oid = 'fairqueue.jobs'::regclass"
    ).fetchone()
    assert before["reltuples"] <= 0  # never analyzed since the template was made
    claimed = claim_batch(conn, "planned", batch=100, lease_s=60, locked_by="cold")
    assert len(claimed) == 100
    after = conn.execute(
        "select reltuples from pg_class where oid = 'fairqueue.jobs'::regclass"
    ).fetchone()
    assert after["reltuples"] >= 12000
    jobs_read, served_read, _ = claim_reads(conn, 100)
    assert jobs_read <= 10 * 100
    # The standings are read by key, and whole where the planner finds their table small
    # enough to hash (twice, 300 rows here); a walk of the groups on stale plans reads
    # the whole table at every step.
    assert served_read <= 2 * 300 + 10 * 100


def test_a_claim_after_the_standings_outgrew_their_statistics_analyzes_them_first(conn) -> None:
    """The standings last analyzed when a few groups had work make a claim over thousands of
    groups read every standing (10,000 groups: 0.38 s a claim instead of 0.03 s); the claim
    refreshes the statistics of every table it reads, not of jobs alone."""
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 4), 'few' || (i % 20) from generate_series(1, 200) i"
    )
    conn.execute("analyze fairqueue.jobs")
    conn.execute("analyze fairqueue.served")
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 400), 'many' || i from generate_series(1, 16000) i"
    )
    standings = "select reltuples from pg_class where oid = 'fairqueue.served'::regclass"
    assert conn.execute(standings).fetchone()["reltuples"] < 100
    claimed = claim_batch(conn, "planned", batch=100, lease_s=60, locked_by="grown")
    assert len(claimed) == 100
    assert conn.execute(standings).fetchone()["reltuples"] >= 16000
    jobs_read, served_read, _ = claim_reads(conn, 100)
    assert jobs_read <= 10 * 100
    # The standings are read by key, and whole where the planner finds their table small
    # enough to hash (twice, 300 rows here); a walk of the groups on stale plans reads
    # the whole table at every step.
    assert served_read <= 2 * 300 + 10 * 100


def test_the_claim_leaves_the_statistics_alone_while_the_table_is_being_vacuumed(
    conn, admin_dsn: str
) -> None:
    """An ANALYZE cancels an autovacuum of the table; a lumpy queue's claims would cancel every
    one of them. While a vacuum's lock is held the claim goes on with the statistics there are."""
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 20), 'g' || (i % 300) from generate_series(1, 12000) i"
    )
    analyze = "select fairqueue.analyze_when_stale() as analyzed"
    with connect(admin_dsn) as vacuum:
        vacuum.execute("lock table fairqueue.jobs in share update exclusive mode")
        assert conn.execute(analyze).fetchone()["analyzed"] is False
        vacuum.rollback()
    assert conn.execute(analyze).fetchone()["analyzed"] is True


def _statistics_reported(conn) -> None:
    """This session's table counters in the shared statistics, as a session reports them when
    it goes idle; the next statement reads them."""
    conn.execute("select pg_stat_force_next_flush()")
    conn.execute("select 1")


def test_a_drain_rewriting_every_row_leaves_the_statistics_alone_until_the_rows_double(
    conn,
) -> None:
    """A drain changes every row it claims and completes, but not what the claim's plans lean
    on: no claim analyzes for it. A table whose live rows doubled since its last analyze is
    analyzed, even when they fit in the pages it had."""
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 20), 'g' || (i % 300) from generate_series(1, 6000) i"
    )
    for table in ("jobs", "served", "groups", "tenant_standings"):
        conn.execute(f"analyze fairqueue.{table}")
    for _ in range(2):
        conn.execute("update fairqueue.jobs set attempts = attempts + 1")
        conn.execute("vacuum fairqueue.jobs")  # the space is used again, as autovacuum would
    _statistics_reported(conn)
    counters = conn.execute(
        "select pg_stat_get_mod_since_analyze(c.oid) as changed, c.reltuples,"
        " pg_relation_size(c.oid) / current_setting('block_size')::integer as pages,"
        " c.relpages from pg_class c where c.oid = 'fairqueue.jobs'::regclass"
    ).fetchone()
    assert counters["changed"] >= 2 * counters["reltuples"]  # more changed than it holds
    analyze = "select fairqueue.analyze_when_stale() as analyzed"
    assert conn.execute(analyze).fetchone()["analyzed"] is False
    conn.execute(
        "insert into fairqueue.jobs (type, tenant_id, group_id)"
        " select 'planned', 't' || (i % 20), 'g' || (i % 300) from generate_series(1, 7000) i"
    )
    _statistics_reported(conn)
    grown = conn.execute(
        "select pg_relation_size(c.oid) / current_setting('block_size')::integer as pages,"
        " c.relpages from pg_class c where c.oid = 'fairqueue.jobs'::regclass"
    ).fetchone()
    assert grown["pages"] <= 2 * grown["relpages"]  # the rows, not the pages, say it grew
    assert conn.execute(analyze).fetchone()["analyzed"] is True

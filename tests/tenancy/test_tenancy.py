"""Tenant isolation, enforced by Postgres. Row counts, not exceptions, unless a write is refused.

`dsn` connects as fairqueue_app (the role the library runs as); `conn` is the superuser that
sets up rows across tenants and looks at them.
"""

import threading

import psycopg
import pytest
from psycopg.types.json import Jsonb

from fairqueue import Job, Stage, connect, enqueue, run_pipeline
from fairqueue.lanes import add_credits
from fairqueue.tenancy import TenantMismatch, tenant_transaction
from support.rows import finished_days


def noop(_job: object) -> None:
    pass


Stage("tenanted", handler=noop)

# A user's own tables, one keyed by text and one by uuid, under the same clamp.
USER_TABLES = """
create table public.notes (id serial primary key, tenant_id text not null, body text);
create table public.orders (id serial primary key, tenant_id uuid not null, total int);
select fairqueue.protect_table('public.notes', 'tenant_id');
select fairqueue.protect_table('public.orders', 'tenant_id');
grant select, insert, update, delete on public.notes, public.orders to fairqueue_app;
grant usage on all sequences in schema public to fairqueue_app;
"""
UUID_A = "00000000-0000-0000-0000-00000000000a"
UUID_B = "00000000-0000-0000-0000-00000000000b"


@pytest.fixture
def user_tables(conn) -> None:
    conn.execute(USER_TABLES)
    conn.execute(
        "insert into public.notes (tenant_id, body) values ('a', 'a1'), ('a', 'a2'), ('b', 'b1')"
    )
    conn.execute(
        "insert into public.orders (tenant_id, total) values (%s, 1), (%s, 2), (%s, 3)",
        (UUID_A, UUID_A, UUID_B),
    )


@pytest.fixture
def app(dsn: str):
    with connect(dsn, autocommit=True) as c:
        yield c


def seed_jobs(conn) -> None:
    for tenant in ("a", "a", "b", None):
        enqueue(conn, "tenanted", {"secret": f"of {tenant}"}, tenant_id=tenant)


def count(c, table: str) -> int:
    return c.execute(f"select count(*) as n from {table}").fetchone()["n"]


def test_the_application_role_owns_nothing_and_cannot_bypass(conn) -> None:
    role = conn.execute(
        "select rolbypassrls, rolsuper from pg_roles where rolname = 'fairqueue_app'"
    ).fetchone()
    assert role == {"rolbypassrls": False, "rolsuper": False}
    owned = conn.execute(
        "select count(*) as n from pg_class c join pg_roles r on r.oid = c.relowner"
        " where r.rolname = 'fairqueue_app'"
    ).fetchone()
    assert owned["n"] == 0
    forced = conn.execute(
        "select relname from pg_class where relnamespace = 'fairqueue'::regnamespace"
        " and relrowsecurity and relforcerowsecurity order by 1"
    ).fetchall()
    days = conn.execute(
        "select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid"
        " where i.inhparent = 'fairqueue.finished_jobs'::regclass"
    ).fetchall()
    assert days
    assert {r["relname"] for r in forced} == {
        "credits",
        "groups",
        "jobs",
        "finished_jobs",
        "results",
        "schedules",
        "tenants",
        *(d["relname"] for d in days),
    }


def test_a_tenant_sees_only_its_own_jobs(conn, app) -> None:
    # Writing them is the doors' alone, whatever the clamp (tests/tenancy/test_rewrites.py).
    seed_jobs(conn)
    with tenant_transaction(app, "a"):
        assert count(app, "fairqueue.jobs") == 2
    with tenant_transaction(app, "b"):
        assert count(app, "fairqueue.jobs") == 1
    with tenant_transaction(app, None):  # the system clamp: tenantless jobs only
        assert count(app, "fairqueue.jobs") == 1


def test_no_tenant_set_reads_nothing_even_after_a_clamped_transaction(
    conn, app, user_tables
) -> None:
    seed_jobs(conn)
    for table in ("fairqueue.jobs", "fairqueue.tenants", "public.notes", "public.orders"):
        assert count(app, table) == 0
    with tenant_transaction(app, "a"):
        assert count(app, "public.notes") == 2
    # The setting outlives the transaction as an empty string; it must match nothing.
    assert (
        app.execute("select current_setting('fairqueue.tenant_id', true) as t").fetchone()["t"]
        == ""
    )
    for table in ("fairqueue.jobs", "public.notes", "public.orders"):
        assert count(app, table) == 0


def test_user_tables_follow_the_clamp_for_text_and_uuid_tenants(conn, app, user_tables) -> None:
    with tenant_transaction(app, "a"):
        assert count(app, "public.notes") == 2
        assert app.execute("update public.notes set body = 'x' where tenant_id = 'b'").rowcount == 0
    with tenant_transaction(app, UUID_B):
        assert count(app, "public.orders") == 1
        assert (
            app.execute("delete from public.orders where tenant_id = %s", (UUID_A,)).rowcount == 0
        )
    assert count(conn, "public.orders") == 3
    assert (
        conn.execute("select count(*) as n from public.notes where body = 'x'").fetchone()["n"] == 0
    )


def write_as(app, tenant: str, statement: str) -> None:
    with tenant_transaction(app, tenant):
        app.execute(statement)


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        ("insert into public.notes (tenant_id, body) values ('b', 'sneaky')", "row-level security"),
        ("update public.notes set tenant_id = 'b'", "row-level security"),
        # The jobs are written by the doors alone: no plain write gets as far as the policies.
        ("insert into fairqueue.jobs (type, tenant_id) values ('tenanted', 'b')", "permission"),
        ("update fairqueue.jobs set tenant_id = 'b'", "permission"),
    ],
)
def test_a_write_carrying_another_tenants_id_is_refused(
    conn, app, user_tables, statement, refusal
) -> None:
    enqueue(conn, "tenanted", {}, tenant_id="a")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match=refusal):
        write_as(app, "a", statement)
    assert count(conn, "public.notes where tenant_id = 'b'") == 1
    assert count(conn, "fairqueue.jobs where tenant_id = 'b'") == 0


def test_protect_table_refuses_a_column_it_cannot_clamp(conn) -> None:
    conn.execute("create table public.odd (id int, tenant_id int)")
    with pytest.raises(psycopg.errors.RaiseException, match="not text or uuid"):
        conn.execute("select fairqueue.protect_table('public.odd', 'tenant_id')")
    with pytest.raises(psycopg.errors.RaiseException, match="has no column"):
        conn.execute("select fairqueue.protect_table('public.odd', 'owner')")


DOORS = {
    "claim",
    "settle_spent",
    "has_claimable",
    "analyze_when_stale",
    "fail_abandoned",
    "queue_status",
    "open_jobs",
    "expire_served",
    "stale_doorbells",
    "mark_rung",
    "stalled_lanes",
    "claim_results_to_save",
    "note_result_failure",
    "tidy_result_failures",
    "due_result_hooks",
    "trim_outputs",
    "keep_partitions",
    "move_finished",
    "missing_results",
    "open_run",
    "close_run",
    "close_abandoned_runs",
    "due_give_ups",
    "define_quota",
    "reset_due_quota",
    "spend_quota",
    "claim_by_tenant",
    "quanta_stamped",
    "find_jobs",
    "group_standing",
    "tenant_standing",
    "retry_failed",
    "served_groups",
    "define_quota_if_absent",
    "dev_upstream_hold",
    "dev_upstream_release",
    "mark_claimed_done",
    "extend_leases",
    # The writes of the order's inputs and the money (sql/functions/lifecycle.sql, credits.sql,
    # tenant_plans.sql), each inside the caller's clamp: the application role writes no job,
    # plan or credit row itself.
    "enqueue_job",
    "enqueue_jobs",
    "admission_insert",
    "complete_claimed",
    "job_retry_or_fail",
    "job_fail_now",
    "job_defer",
    "jobs_give_back",
    "jobs_claim_by_ids",
    "job_lock_owed_give_up",
    "job_give_up_fired",
    "job_cancel",
    "job_released",
    "job_release_failed",
    "job_result_decided",
    "lane_promote_next",
    "credit_entry",
    "credit_refund",
    "tenant_set_plan",
    # Schedules (sql/functions/schedules.sql): a tenant's own, under its clamp; and the sweep's,
    # across tenants, refused to a transaction clamped to one.
    "schedule_add",
    "schedule_set_paused",
    "schedule_remove",
    "find_schedules",
    "schedules_due",
    "schedule_ticks",
    "schedules_declare",
    # The operators' dashboard (sql/functions/dashboard.sql): keys, plans and counts only.
    "dashboard_backlog",
    "dashboard_service",
    "dashboard_most_served",
    "dashboard_waiting",
    "dashboard_groups",
    "dashboard_balances",
}


def test_only_the_documented_doors_run_as_their_owner_and_none_returns_a_payload(conn) -> None:
    definers = conn.execute(
        "select p.proname, pg_get_function_result(p.oid) as result from pg_proc p"
        " where p.prosecdef and p.pronamespace in ("
        "   select oid from pg_namespace where nspname not in ('pg_catalog', 'information_schema'))"
    ).fetchall()
    # The triggers that keep the served rows (counts and standings) run as the owner too: those
    # rows are the owner's to write.
    triggers = {
        "jobs_served_insert",
        "jobs_served_update",
        "jobs_served_delete",
        "copy_to_standings",
    }
    assert {d["proname"] for d in definers} == DOORS | triggers
    assert not [d for d in definers if "payload" in d["result"]]
    # A view reads with its owner's rights unless it says otherwise: every view here reads with
    # its reader's, so the policies of the tables under it hold.
    views = conn.execute(
        "select c.relname, c.relkind, c.reloptions from pg_class c"
        " where c.relkind in ('v', 'm') and c.relnamespace = 'fairqueue'::regnamespace"
    ).fetchall()
    assert views == [
        {"relname": "all_jobs", "relkind": "v", "reloptions": ["security_invoker=true"]}
    ]


def test_dedupe_is_per_tenant_under_the_clamp(dsn, conn) -> None:
    with connect(dsn) as c:
        assert enqueue(c, "tenanted", {}, tenant_id="a", dedupe_key="k") is not None
    with connect(dsn) as c:
        assert enqueue(c, "tenanted", {}, tenant_id="b", dedupe_key="k") is not None
    with connect(dsn) as c:
        assert enqueue(c, "tenanted", {}, tenant_id="a", dedupe_key="k") is None
    assert count(conn, "fairqueue.jobs") == 2


def test_enqueue_refuses_a_transaction_clamped_to_another_tenant(dsn, conn) -> None:
    with connect(dsn) as c:
        enqueue(c, "tenanted", {}, tenant_id="a")
        with pytest.raises(TenantMismatch, match="works for tenant 'a'"):
            enqueue(c, "tenanted", {}, tenant_id="b")
        c.rollback()
    assert count(conn, "fairqueue.jobs") == 0


def test_credits_for_a_second_tenant_in_one_transaction_are_refused_as_credits(dsn, conn) -> None:
    with connect(dsn) as c:
        add_credits(c, "a", 5)
        # The refusal names what was asked (credits), not an enqueue the caller never made.
        with pytest.raises(TenantMismatch, match="cannot work for 'b'") as refused:
            add_credits(c, "b", 5)
        assert "enqueue" not in str(refused.value)
        c.rollback()
    assert count(conn, "fairqueue.credits") == 0


def test_handlers_run_under_their_jobs_clamp_and_see_only_its_data(dsn, conn, user_tables) -> None:
    seen: dict[str | None, list[str]] = {}
    lock = threading.Lock()

    def read_notes(job: Job) -> None:
        assert job.conn is not None
        rows = job.conn.execute("select body from public.notes order by body").fetchall()
        with lock:
            seen[job.tenant_id] = [r["body"] for r in rows]

    stage = Stage("notes_reader", handler=read_notes, concurrency=2)
    for tenant in ("a", "b", None):
        enqueue(conn, "notes_reader", {}, tenant_id=tenant)
    result = run_pipeline(dsn, [stage])
    assert result.jobs_done == 3
    assert seen == {"a": ["a1", "a2"], "b": ["b1"], None: []}


def test_a_handlers_writes_commit_with_it_and_roll_back_when_it_fails(
    dsn, conn, user_tables
) -> None:
    def write_then(job: Job) -> None:
        assert job.conn is not None
        job.conn.execute(
            "insert into public.notes (tenant_id, body) values (%s, %s)",
            (job.tenant_id, job.payload["body"]),
        )
        if job.payload["fail"]:
            raise RuntimeError("after writing")

    stage = Stage("notes_writer", handler=write_then, max_attempts=1)
    enqueue(conn, "notes_writer", {"body": "kept", "fail": False}, tenant_id="a")
    enqueue(conn, "notes_writer", {"body": "dropped", "fail": True}, tenant_id="a")
    run_pipeline(dsn, [stage])
    bodies = {r["body"] for r in conn.execute("select body from public.notes").fetchall()}
    assert "kept" in bodies and "dropped" not in bodies


def test_a_follow_up_for_another_tenant_is_refused(dsn, conn) -> None:
    def cross(job: Job) -> None:
        job.enqueue("tenanted", {}, tenant_id="b")

    stage = Stage("crosser", handler=cross, max_attempts=1)
    job_id = enqueue(conn, "crosser", {}, tenant_id="a")
    run_pipeline(dsn, [stage])
    row = conn.execute(
        "select status, last_error from fairqueue.jobs where id = %s", (job_id,)
    ).fetchone()
    assert row["status"] == "failed"
    assert "cannot enqueue for 'b'" in row["last_error"]
    assert count(conn, "fairqueue.jobs") == 1


def claimed_rows(conn, by: str = "me") -> list[dict]:
    """Every pending job marked running under `by`, as a claim would leave it."""
    return conn.execute(
        "update fairqueue.jobs set status = 'running', locked_by = %s,"
        " lease_until = now() + interval '1 minute' returning id, tenant_id",
        (by,),
    ).fetchall()


def test_a_batch_read_sees_each_job_only_under_its_own_tenants_clamp(conn, app) -> None:
    seed_jobs(conn)
    rows = claimed_rows(conn)
    ids = [r["id"] for r in rows]
    with app.transaction():
        found = app.execute(
            "select id, tenant_id, payload from fairqueue.read_claimed(%s, %s, 'me')",
            ([r["tenant_id"] for r in rows], ids),
        ).fetchall()
        # The batch leaves the transaction clamped to no one.
        assert count(app, "fairqueue.jobs") == 0
    assert sorted((r["id"], r["tenant_id"]) for r in found) == sorted(
        (r["id"], r["tenant_id"]) for r in rows
    )
    assert {r["payload"]["secret"] for r in found} == {"of a", "of b", "of None"}
    # A job named with the wrong tenant is outside that tenant's clamp: not read.
    wrong = ["b" if r["tenant_id"] == "a" else "a" for r in rows]
    assert (
        app.execute("select id from fairqueue.read_claimed(%s, %s, 'me')", (wrong, ids)).fetchall()
        == []
    )
    # Another claimer's name reads nothing either.
    tenants = [r["tenant_id"] for r in rows]
    assert (
        app.execute(
            "select id from fairqueue.read_claimed(%s, %s, 'other')", (tenants, ids)
        ).fetchall()
        == []
    )


def test_a_batch_completion_writes_each_job_only_under_its_own_tenants_clamp(conn, app) -> None:
    seed_jobs(conn)
    rows = claimed_rows(conn)
    ids = [r["id"] for r in rows]
    outputs = [Jsonb({"n": k}) for k in range(len(rows))]
    wrong = ["b" if r["tenant_id"] == "a" else "a" for r in rows]
    done = app.execute(
        "select id from fairqueue.complete_claimed(%s, %s, %s, 'me')", (wrong, ids, outputs)
    ).fetchall()
    assert done == []
    assert count(conn, "fairqueue.jobs where status = 'running'") == len(rows)
    tenants = [r["tenant_id"] for r in rows]
    done = app.execute(
        "select id from fairqueue.complete_claimed(%s, %s, %s, 'me')", (tenants, ids, outputs)
    ).fetchall()
    assert sorted(r["id"] for r in done) == sorted(ids)
    stored = conn.execute("select id, status, output from fairqueue.all_jobs").fetchall()
    assert {r["status"] for r in stored} == {"done"}
    assert {r["id"]: r["output"] for r in stored} == {i: {"n": k} for k, i in enumerate(ids)}
    # Done already: a second completion holds nothing.
    again = app.execute(
        "select id from fairqueue.complete_claimed(%s, %s, %s, 'me')", (tenants, ids, outputs)
    ).fetchall()
    assert again == []


def test_a_completion_without_outputs_still_names_each_jobs_tenant_and_claimer(conn, app) -> None:
    # Jobs that finished with no output are marked done by one statement through a door, not
    # under each tenant's clamp: the pair and the claimer are what holds it to its jobs.
    seed_jobs(conn)
    rows = claimed_rows(conn)
    ids = [r["id"] for r in rows]
    tenants = [r["tenant_id"] for r in rows]
    nothing = [None] * len(rows)
    wrong = ["b" if r["tenant_id"] == "a" else "a" for r in rows]
    for named, by in ((wrong, "me"), (tenants, "other")):
        done = app.execute(
            "select id from fairqueue.complete_claimed(%s, %s, %s::jsonb[], %s)",
            (named, ids, nothing, by),
        ).fetchall()
        assert done == []
    assert count(conn, "fairqueue.jobs where status = 'running'") == len(rows)
    # A caller clamped to a finishes a's jobs only, and stays clamped to a.
    with tenant_transaction(app, "a"):
        done = app.execute(
            "select id from fairqueue.mark_claimed_done(%s, %s, 'me')", (tenants, ids)
        ).fetchall()
        assert app.execute("select fairqueue.current_tenant() as t").fetchone()["t"] == "a"
    a_ids = {r["id"] for r in rows if r["tenant_id"] == "a"}
    assert {r["id"] for r in done} == a_ids
    # A batch with and without outputs: each job done once, its output as given.
    outputs = [None if r["id"] in a_ids else Jsonb({"of": r["tenant_id"]}) for r in rows]
    done = app.execute(
        "select id from fairqueue.complete_claimed(%s, %s, %s::jsonb[], 'me')",
        (tenants, ids, outputs),
    ).fetchall()
    assert sorted(r["id"] for r in done) == sorted(set(ids) - a_ids)
    stored = conn.execute("select id, status, output from fairqueue.all_jobs").fetchall()
    assert {r["status"] for r in stored} == {"done"}
    assert {r["id"]: r["output"] for r in stored} == {
        r["id"]: None if r["id"] in a_ids else {"of": r["tenant_id"]} for r in rows
    }


def test_a_lease_extension_names_each_jobs_tenant_and_claimer_in_one_statement(conn, app) -> None:
    # A lease is the claim's state, not the job's data: a batch's leases are set again by one
    # statement through a door, whatever their tenants, each job named with its tenant and its
    # claimer.
    seed_jobs(conn)
    rows = claimed_rows(conn)
    ids = [r["id"] for r in rows]
    tenants = [r["tenant_id"] for r in rows]
    wrong = ["b" if r["tenant_id"] == "a" else "a" for r in rows]

    def kept_long() -> set:
        found = conn.execute(
            "select id from fairqueue.jobs where lease_until > now() + interval '30 minutes'"
        ).fetchall()
        return {r["id"] for r in found}

    for named, by in ((wrong, "me"), (tenants, "other")):
        extended = app.execute(
            "select fairqueue.extend_leases(%s, %s, %s, 3600) as n", (named, ids, by)
        ).fetchone()
        assert extended["n"] == 0
    assert kept_long() == set()
    # A caller clamped to a keeps a's leases only, and stays clamped to a.
    a_ids = {r["id"] for r in rows if r["tenant_id"] == "a"}
    with tenant_transaction(app, "a"):
        extended = app.execute(
            "select fairqueue.extend_leases(%s, %s, 'me', 3600) as n", (tenants, ids)
        ).fetchone()
        assert app.execute("select fairqueue.current_tenant() as t").fetchone()["t"] == "a"
    assert extended["n"] == len(a_ids)
    assert kept_long() == a_ids
    # Unclamped, every job the claimer still holds: not one that is done already.
    finished = next(i for i in ids if i not in a_ids)
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now(),"
        " lease_until = null where id = %s",
        (finished,),
    )
    extended = app.execute(
        "select fairqueue.extend_leases(%s, %s, 'me', 3600) as n", (tenants, ids)
    ).fetchone()
    assert extended["n"] == len(ids) - 1
    assert kept_long() == set(ids) - {finished}


def test_no_day_of_finished_jobs_is_a_way_around_the_clamp(conn, app) -> None:
    seed_jobs(conn)
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now()"
        " where id in (select min(id::text)::uuid from fairqueue.jobs group by tenant_id)"
    )
    moved = conn.execute("select fairqueue.move_finished(100, interval '1 s') as n").fetchone()
    assert moved["n"] == 3  # one of a's, b's and the tenantless jobs; one of a's stays open
    days = sorted(finished_days(conn))
    # The application role is granted nothing on a day.
    for day in days:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), tenant_transaction(app, "a"):
            app.execute(f"select * from {day}")
    # Granted anyway (by hand), each day still holds the role to its own copy of the policies:
    # it reads through a day only what it reads through fairqueue.finished_jobs.
    conn.execute(f"grant select on {', '.join(days)} to fairqueue_app")
    for tenant in ("a", "b", None):
        with tenant_transaction(app, tenant):
            through_table = {r["id"] for r in app.execute("select id from fairqueue.finished_jobs")}
            through_days = {r["id"] for d in days for r in app.execute(f"select id from {d}")}
            through_view = {
                r["id"]
                for r in app.execute("select id from fairqueue.all_jobs where status = 'done'")
            }
        assert len(through_table) == 1
        assert through_days == through_table == through_view
    with app.transaction():  # no clamp at all
        assert sum(count(app, d) for d in days) == 0
        assert count(app, "fairqueue.all_jobs") == 0

"""What the application role may do to the tables that decide the order: nothing but read."""

from __future__ import annotations

import psycopg
import pytest

from fairqueue import Stage, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.pipeline.claim import claim_batch, give_back
from fairqueue.tenancy import tenant_transaction

SERVED = Stage("served_kind", handler=lambda job: None)


def served(conn: Connection) -> list[tuple[str, str, int]]:
    rows = conn.execute("select type, group_key, n from fairqueue.served order by 1, 2")
    return [(r["type"], r["group_key"], r["n"]) for r in rows.fetchall()]


@pytest.mark.parametrize(
    "statement",
    [
        "update fairqueue.served set n = -1000000000",
        "insert into fairqueue.served (type, group_key, n) values ('served_kind', 'g', -1e9)",
        "delete from fairqueue.served",
        "update fairqueue.served_watermark set watermark = now()",
        "select * from fairqueue.tenant_standings",
        "update fairqueue.tenant_standings set n = -1000000000",
        "insert into fairqueue.tenant_changes values ('served_kind', '', -1000000000)",
        "delete from fairqueue.tenant_level_types",
        "select fairqueue.tenant_standings_fold('served_kind')",
        "select fairqueue.tenant_level_listed('served_kind', '{}', '{}', 1)",
        "select fairqueue.tenant_standings_restamped('served_kind', '{}', '{}', 1000)",
    ],
)
def test_the_application_role_cannot_rig_the_served_counts(
    dsn: str, conn: Connection, statement: str
) -> None:
    enqueue(conn, "served_kind", {}, group_id="g")
    run_pipeline(dsn, [SERVED])
    before = served(conn)
    assert before == [("served_kind", "/g", 1)]
    with connect(dsn, autocommit=True) as app, pytest.raises(psycopg.errors.InsufficientPrivilege):
        app.execute(statement)  # type: ignore[arg-type]
    assert served(conn) == before


def test_the_served_triggers_still_count_for_the_application_role(
    dsn: str, conn: Connection
) -> None:
    with connect(dsn, autocommit=True) as app:
        for group in ("a", "a", "b"):
            enqueue(app, "served_kind", {}, tenant_id="t", group_id=group)
        # Claimed and not completed: running jobs count, and stay in the table the role writes.
        claimed = claim_batch(app, "served_kind", batch=10, lease_s=60, locked_by="me")
    assert len(claimed) == 3
    assert served(conn) == [("served_kind", "t/a", 2), ("served_kind", "t/b", 1)]
    # Given back through the lifecycle's door: the claims no longer count.
    group_a = [job.id for job in claimed if job.group_id == "a"]
    with connect(dsn, autocommit=True) as app, tenant_transaction(app, "t"):
        assert give_back(app, group_a, "me", tenant_id="t") == 2
    assert served(conn) == [("served_kind", "t/a", 0), ("served_kind", "t/b", 1)]


PLANS = "array['free']::text[], array[0]::integer[], 0"
# Each plan's quantum beside its name, then the default quantum: valid unless a call says not.
QUANTA = "array[1]::integer[], 1"
# Each plan's cap beside its name, then the default cap (0: none): valid unless a call says not.
CAPS = "array[0]::integer[], 0"
HOSTILE_CALLS = [
    # Caps per tenant: one cap for each plan name, each from 0 (none) to 1,000,000.
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, {QUANTA},"
    " array[1, 2], 0)",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, {QUANTA},"
    " array[-1], 0)",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, {QUANTA}, null, 0)",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, {QUANTA},"
    " array[0], -1)",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, {QUANTA},"
    " array[1000001], 0)",
    f"select * from fairqueue.claim_by_tenant('served_kind', 10, 60, 'me', null, {PLANS},"
    f" {QUANTA}, array[-2], 0)",
    f"select * from fairqueue.claim_by_tenant('served_kind', 10, 60, 'me', null, {PLANS},"
    f" {QUANTA}, array[0], 1000001)",
    "select * from fairqueue.jobs_claim_by_ids(array[gen_random_uuid()], array['b'],"
    " array['served_kind'], array[60.0]::float8[], 'me', null, array['free'], array[1, 1], 0,"
    " '{}')",
    "select * from fairqueue.jobs_claim_by_ids(array[gen_random_uuid()], array['b'],"
    " array['served_kind'], array[60.0]::float8[], 'me', null, array['free'], array[-1], 0,"
    " '{}')",
    # The types counted by cost: a list, empty for none.
    "select * from fairqueue.jobs_claim_by_ids(array[gen_random_uuid()], array['b'],"
    " array['served_kind'], array[60.0]::float8[], 'me', null, array['free'], array[0], 0,"
    " null)",
    "select fairqueue.tenant_rooms(array['served_kind'], array['b'], array['free'],"
    " array['free'], array[1], 0, false)",
    f"select * from fairqueue.claim('served_kind', 1000000, 10, 'me', null, {PLANS}, {QUANTA},"
    f" {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 1e9, 'me', null, {PLANS}, {QUANTA}, {CAPS})",
    f"select * from fairqueue.claim('served_kind', 0, 60, 'me', null, {PLANS}, {QUANTA}, {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, array[1], 0,"
    f" {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, array[1], 1001,"
    f" {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, array[0], 1,"
    f" {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, array[1001], 1,"
    f" {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, array[1, 2], 1,"
    f" {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, null, 1, {CAPS})",
    "select * from fairqueue.claim('served_kind', 10, 60, 'me', null, array['free', 'free'],"
    f" array[0, 0], 0, array[1, 2], 1, {CAPS})",
    f"select * from fairqueue.claim('served_kind', 10, 60, '', null, {PLANS}, {QUANTA}, {CAPS})",
    "select fairqueue.quanta_stamped('served_kind', array['free'], array[2000], 1)",
    f"select * from fairqueue.claim('served_kind', 10, 60, 'me', null, {PLANS}, {QUANTA},"
    f" {CAPS}, null)",
    "select * from fairqueue.enqueue_job('served_kind', 't', '{}', null, null, 3, null, 0, 0)",
    "select * from fairqueue.enqueue_job('served_kind', 't', '{}', null, null, 3, null, 0,"
    " 1000000001)",
    "select * from fairqueue.enqueue_jobs('served_kind', 't', '[{}]', null, null, array[3], null,"
    " array[0]::float8[], array[-1])",
    "select * from fairqueue.enqueue_jobs('served_kind', 't', '[{}]', null, null, array[3], null,"
    " array[0]::float8[], array[1, 1])",
    "select fairqueue.settle_spent(array['t'], array[gen_random_uuid()], array[0]::bigint[], 'me')",
    "select fairqueue.settle_spent(array['t'], array[gen_random_uuid()], null, 'me')",
    f"select * from fairqueue.claim_by_tenant('served_kind', 1000000, 10, 'me', null, {PLANS},"
    f" {QUANTA}, {CAPS})",
    f"select * from fairqueue.claim_by_tenant('served_kind', 10, 1e9, 'me', null, {PLANS},"
    f" {QUANTA}, {CAPS})",
    f"select * from fairqueue.claim_by_tenant('served_kind', 10, 60, '', null, {PLANS}, {QUANTA},"
    f" {CAPS})",
    "select * from fairqueue.claim_by_tenant('served_kind', 10, 60, 'me', null, "
    f"{PLANS}, array[1], 0, {CAPS})",
    "select * from fairqueue.claim_by_tenant('served_kind', 10, 60, 'me', null, "
    f"{PLANS}, array[1], 1001, {CAPS})",
    "select * from fairqueue.claim_by_tenant('served_kind', 10, 60, 'me', null, "
    f"{PLANS}, array[0], 1, {CAPS})",
    "select * from fairqueue.claim_by_tenant('served_kind', 10, 60, 'me', null, "
    f"{PLANS}, array[1, 2], 1, {CAPS})",
    "select * from fairqueue.claim_by_tenant_unchecked('served_kind', 10, 60, 'me', null, "
    + PLANS
    + ", "
    + QUANTA
    + ", "
    + CAPS
    + ", false)",
    "select * from fairqueue.keep_partitions(interval '1 hour', 7, interval '1 s')",
    "select * from fairqueue.keep_partitions(interval '7 days', 0, interval '1 s')",
    "select * from fairqueue.keep_partitions(interval '7 days', 7, interval '1 minute')",
    "select fairqueue.move_finished(0, interval '1 s')",
    "select fairqueue.move_finished(100, interval '1 minute')",
    "select fairqueue.trim_outputs(interval '-1 day', 100)",
    "select * from fairqueue.claim_results_to_save(array['served_kind'], interval '-1 day', 10,"
    " '{}')",
    "select * from fairqueue.due_result_hooks(array['served_kind'], interval '1 s', 0)",
    "select * from fairqueue.fail_abandoned(array['served_kind'], 1000000)",
    "select * from fairqueue.stale_doorbells(array['served_kind'], interval '-1 s', 10)",
    "select * from fairqueue.stalled_lanes(-1)",
    "select fairqueue.close_abandoned_runs(interval '1 second')",
    "select * from fairqueue.due_give_ups(array['served_kind'], interval '0 s', 10)",
    "select * from fairqueue.due_give_ups(array['served_kind'], interval '1 minute', 0)",
    "select fairqueue.close_abandoned_runs(interval '8 days')",
    "select * from fairqueue.claim_unchecked('served_kind', 10, 60, 'me', null, "
    + PLANS
    + ", "
    + CAPS
    + ", false)",
    "select * from fairqueue.find_jobs(null, null, null, null, null, 0)",
    "select * from fairqueue.find_jobs(null, null, null, null, null, 10001)",
    "select * from fairqueue.find_jobs(null, 'lost', null, null, null, 10)",
    "select * from fairqueue.find_jobs_unchecked(null, null, null, null, null, 10)",
    "select * from fairqueue.group_standing('served_kind', 'a', '{}', '{}', 0, 101)",
    "select * from fairqueue.group_standing('served_kind', 'a', '{pro}', '{}', 0, 3)",
    "select * from fairqueue.served_groups(0)",
    "select * from fairqueue.served_groups(101)",
    "select * from fairqueue.served_groups_unchecked(5)",
    "select * from fairqueue.dashboard_service(0)",
    "select * from fairqueue.dashboard_service(1001)",
    "select * from fairqueue.dashboard_service_unchecked(5)",
    "select * from fairqueue.dashboard_most_served(0)",
    "select * from fairqueue.dashboard_most_served_unchecked(5)",
    "select * from fairqueue.dashboard_waiting(0)",
    "select * from fairqueue.dashboard_waiting_unchecked(5)",
    "select * from fairqueue.dashboard_groups(1001)",
    "select * from fairqueue.dashboard_groups_unchecked(5)",
    "select * from fairqueue.dashboard_balances(null)",
    "select * from fairqueue.dashboard_balances_unchecked(5)",
    "select * from fairqueue.retry_failed(null, 'a', 'note')",
    "select * from fairqueue.retry_failed(gen_random_uuid(), '', 'note')",
    "select * from fairqueue.retry_failed(gen_random_uuid(), 'a', '')",
    "select * from fairqueue.retry_failed_unchecked(gen_random_uuid(), 'a', 'note')",
    "select * from fairqueue.group_standing_unchecked('served_kind', 'a', '{}', '{}', 0, 3)",
    "select * from fairqueue.tenant_standing('served_kind', 'a', '{}', '{}', 0, 101)",
    "select * from fairqueue.tenant_standing('served_kind', 'a', '{pro}', '{}', 0, 3)",
    "select * from fairqueue.tenant_standing_unchecked('served_kind', 'a', '{}', '{}', 0, 3)",
    "select * from fairqueue.define_quota_if_absent('', 10, 0, 60)",
    "select * from fairqueue.define_quota_if_absent('q', 10, 11, 60)",
    "select * from fairqueue.define_quota_if_absent('q', 10, 0, 0)",
    "select fairqueue.dev_upstream_hold('', 'analyze', '{}', true)",
    "select fairqueue.dev_upstream_hold('k', '', '{}', true)",
    "select fairqueue.dev_upstream_hold('k', 'analyze', '[]', true)",
    "select fairqueue.dev_upstream_hold('k', 'analyze', '{}', null)",
    "select fairqueue.dev_upstream_hold_unchecked('k', 'analyze', '{}', true)",
    "select * from fairqueue.dev_upstream_release('')",
    "select * from fairqueue.dev_upstream_release_unchecked('k')",
    "select * from fairqueue.mark_claimed_done(array['a'], array[gen_random_uuid()], '')",
    "select * from fairqueue.mark_claimed_done(array['a', 'b'], array[gen_random_uuid()], 'me')",
    "select * from fairqueue.mark_claimed_done(array['a'], array[null]::uuid[], 'me')",
    "select * from fairqueue.mark_claimed_done(null, null, 'me')",
    "select * from fairqueue.mark_claimed_done(array_fill('a'::text, array[1001]),"
    " array(select gen_random_uuid() from generate_series(1, 1001)), 'me')",
    "select * from fairqueue.mark_claimed_done_unchecked(array['a'], array[gen_random_uuid()],"
    " 'me')",
    "select fairqueue.extend_leases(array['a'], array[gen_random_uuid()], '', 60)",
    "select fairqueue.extend_leases(array['a', 'b'], array[gen_random_uuid()], 'me', 60)",
    "select fairqueue.extend_leases(array['a'], array[null]::uuid[], 'me', 60)",
    "select fairqueue.extend_leases(null, null, 'me', 60)",
    "select fairqueue.extend_leases(array['a'], array[gen_random_uuid()], 'me', 0)",
    "select fairqueue.extend_leases(array['a'], array[gen_random_uuid()], 'me', 86401)",
    "select fairqueue.extend_leases(array['a'], array[gen_random_uuid()], 'me', 'NaN')",
    "select fairqueue.extend_leases(array['a'], array[gen_random_uuid()], 'me', null)",
    "select fairqueue.extend_leases(array_fill('a'::text, array[1001]),"
    " array(select gen_random_uuid() from generate_series(1, 1001)), 'me', 60)",
    "select fairqueue.extend_leases_unchecked(array['a'], array[gen_random_uuid()], 'me', 60)",
    "select fairqueue.door_claimed_batch('x', array['a'], array[gen_random_uuid()], 'me')",
    "select fairqueue.door_claim_arguments(10, 60, 'me')",
    "select fairqueue.door_standing_arguments('x', 3, '{}', '{}')",
]


@pytest.mark.parametrize("call", HOSTILE_CALLS)
def test_a_door_refuses_arguments_out_of_bounds_and_changes_nothing(
    dsn: str, conn: Connection, call: str
) -> None:
    for tenant in ("a", "b"):
        enqueue(conn, "served_kind", {}, tenant_id=tenant, group_id="g")
    run_pipeline(dsn, [SERVED])  # two finished jobs, old enough for a negative window
    pending = enqueue(conn, "served_kind", {}, tenant_id="b")
    jobs_before = conn.execute(
        "select id, status, lease_until, output from fairqueue.jobs order by id"
    ).fetchall()
    with (
        connect(dsn, autocommit=True) as app,
        pytest.raises((psycopg.errors.InvalidParameterValue, psycopg.errors.InsufficientPrivilege)),
    ):
        app.execute(call)  # type: ignore[arg-type]
    jobs_after = conn.execute(
        "select id, status, lease_until, output from fairqueue.jobs order by id"
    ).fetchall()
    assert jobs_after == jobs_before
    assert pending in {row["id"] for row in jobs_after}


def test_a_door_within_bounds_answers(dsn: str, conn: Connection) -> None:
    enqueue(conn, "served_kind", {}, tenant_id="a")
    with connect(dsn, autocommit=True) as app:
        claimed = app.execute(
            f"select * from fairqueue.claim('served_kind', 1000, 86400, 'me', null, {PLANS},"
            " array[1000], 1000, array[1000000], 1000000)"
        ).fetchall()
        assert [row["tenant_id"] for row in claimed] == ["a"]
        kept = app.execute(
            "select * from fairqueue.keep_partitions(interval '7 days', 7, interval '1 s')"
        ).fetchone()
        assert kept == {"made": 0, "dropped": 0, "skipped": 0}  # the migration made them
        moved = app.execute("select fairqueue.move_finished(100, interval '1 s') as n").fetchone()
        assert moved["n"] == 0  # the one job is running
        closed = app.execute(
            "select fairqueue.close_abandoned_runs(interval '20 minutes') as n"
        ).fetchone()
        assert closed["n"] == 0


@pytest.mark.parametrize(
    "statement",
    [
        "update fairqueue.runs set stop_reason = 'no_work', error = null",
        "delete from fairqueue.runs",
        "insert into fairqueue.runs (trigger) values ('forged')",
        "select * from fairqueue.close_run("
        "  (select id from fairqueue.runs limit 1), 'no_work', -1, 0, 0, 0, '{}', null)",
        "select * from fairqueue.open_run('', '{}')",
        "select * from fairqueue.open_run('forged', '[]')",
    ],
)
def test_the_application_role_cannot_rewrite_the_runs(
    dsn: str, conn: Connection, statement: str
) -> None:
    run_pipeline(dsn, [SERVED])
    before = conn.execute("select * from fairqueue.runs order by started_at").fetchall()
    assert [r["stop_reason"] for r in before] == ["no_work"]
    with (
        connect(dsn, autocommit=True) as app,
        pytest.raises((psycopg.errors.InsufficientPrivilege, psycopg.errors.InvalidParameterValue)),
    ):
        app.execute(statement)  # type: ignore[arg-type]
    assert conn.execute("select * from fairqueue.runs order by started_at").fetchall() == before


def test_a_closed_run_cannot_be_closed_again(dsn: str, conn: Connection) -> None:
    result = run_pipeline(dsn, [SERVED])
    with connect(dsn, autocommit=True) as app:
        again = app.execute(
            "select * from fairqueue.close_run(%s, 'error', 0, 0, 0, 0, '{}', 'rewritten')",
            (result.run_id,),
        ).fetchall()
    assert again == []
    (row,) = conn.execute("select stop_reason, error from fairqueue.runs").fetchall()
    assert (row["stop_reason"], row["error"]) == ("no_work", None)


@pytest.mark.parametrize(
    "statement",
    [
        "update fairqueue.quotas set remaining = capacity",
        "delete from fairqueue.quotas",
        "insert into fairqueue.quotas (name, capacity, remaining, period, resets_at)"
        " values ('forged', 1, 1, interval '1 day', now())",
        "select * from fairqueue.spend_quota('metered_api', -5)",
        "select * from fairqueue.define_quota('metered_api', 10, 11, 60)",
        "select * from fairqueue.define_quota('metered_api', 10, 0, -60)",
    ],
)
def test_the_application_role_cannot_refill_or_forge_a_quota(
    dsn: str, conn: Connection, statement: str
) -> None:
    from datetime import timedelta

    from fairqueue import define_quota
    from fairqueue.quotas import spend

    define_quota(conn, "metered_api", capacity=10, period=timedelta(days=1))
    with connect(dsn, autocommit=True) as app:
        assert spend(app, "metered_api", 7) == 3
    before = conn.execute("select * from fairqueue.quotas order by name").fetchall()
    with (
        connect(dsn, autocommit=True) as app,
        pytest.raises((psycopg.errors.InsufficientPrivilege, psycopg.errors.InvalidParameterValue)),
    ):
        app.execute(statement)  # type: ignore[arg-type]
    assert conn.execute("select * from fairqueue.quotas order by name").fetchall() == before

"""The fair order's inputs and the money are written only through doors: code holding the
application role, in a transaction clamped to a tenant (its own, or one it clamps itself to),
cannot rewrite a job's status, times, attempts or lease, a tenant's plan, or the credit ledger
with plain statements; and the doors it may call make only the changes they are for."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import pytest

from fairqueue import connect
from fairqueue.db import Connection
from fairqueue.tenancy import tenant_transaction

KIND = "rewrite_kind"


def _insert_job(conn: Connection, tenant: str, status: str, **extra: Any) -> UUID:
    columns = {"type": KIND, "tenant_id": tenant, "group_id": "g", "status": status} | extra
    if status == "done":
        now = datetime.now(UTC)
        columns |= {"attempts": 1, "locked_at": now, "finished_at": now}
    names = ", ".join(columns)
    marks = ", ".join("%s" for _ in columns)
    row = conn.execute(
        f"insert into fairqueue.jobs ({names}) values ({marks}) returning id",  # type: ignore[arg-type]
        tuple(columns.values()),
    ).fetchone()
    assert row is not None
    return UUID(str(row["id"]))


@pytest.fixture
def world(conn: Connection) -> dict[str, UUID]:
    """Tenants a and b on the free plan, each with three done jobs of group g (a served count of
    3), a pending job charged 5 credits of a 20-credit grant, and a running job."""
    ids: dict[str, UUID] = {}
    for tenant in ("a", "b"):
        conn.execute("insert into fairqueue.tenants (id, plan) values (%s, 'free')", (tenant,))
        for _ in range(3):
            _insert_job(conn, tenant, "done")
        ids[f"{tenant}_pending"] = _insert_job(conn, tenant, "pending", credit_cost=5)
        ids[f"{tenant}_running"] = _insert_job(
            conn,
            tenant,
            "running",
            attempts=1,
            locked_by="w",
            locked_at=datetime.now(UTC),
            lease_until="2999-01-01",
        )
        conn.execute(
            "insert into fairqueue.credits (tenant_id, kind, amount) values (%s, 'grant', 20)",
            (tenant,),
        )
        conn.execute(
            "insert into fairqueue.credits (tenant_id, job_id, kind, amount)"
            " values (%s, %s, 'debit', -5)",
            (tenant, ids[f"{tenant}_pending"]),
        )
    return ids


def snapshot(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the order and the money are made of, as the owner sees them."""
    tables = {
        "jobs": "select id, status, attempts, created_at, run_after, locked_at, lease_until,"
        " locked_by, finished_at, give_up_owed from fairqueue.jobs order by id",
        "finished": "select id, status from fairqueue.finished_jobs order by id",
        "served": "select type, group_key, n from fairqueue.served order by 1, 2",
        "tenants": "select id, plan from fairqueue.tenants order by id",
        "credits": "select tenant_id, job_id, kind, amount from fairqueue.credits order by id",
    }
    return {
        name: [tuple(r.values()) for r in conn.execute(statement).fetchall()]  # type: ignore[arg-type]
        for name, statement in tables.items()
    }


def balance(conn: Connection, tenant: str) -> int:
    row = conn.execute(
        "select coalesce(sum(amount), 0) as b from fairqueue.credits where tenant_id = %s",
        (tenant,),
    ).fetchone()
    assert row is not None
    return int(row["b"])


REWRITES = [
    # done -> cancelled: the group's served count back to 0, the group ahead of everyone.
    "update fairqueue.jobs set status = 'cancelled' where status = 'done'",
    # The group's jobs made the oldest: its head first in its type's order.
    "update fairqueue.jobs set created_at = '1970-01-01'",
    # Pushed back: the tenant's jobs made the newest.
    "update fairqueue.jobs set created_at = now() + interval '1 year'",
    "update fairqueue.jobs set run_after = now() + interval '1 year'",
    "update fairqueue.jobs set attempts = 0",
    "update fairqueue.jobs set lease_until = now() + interval '1 year'",
    "update fairqueue.jobs set locked_by = 'thief', status = 'running',"
    " lease_until = now() + interval '1 hour'",
    "update fairqueue.jobs set finished_at = null, status = 'pending' where status = 'done'",
    "delete from fairqueue.jobs",
    "insert into fairqueue.jobs (type, tenant_id, group_id, created_at)"
    " select 'rewrite_kind', fairqueue.current_tenant(), 'g', '1970-01-01'",
    "insert into fairqueue.jobs (type, tenant_id, group_id, status, attempts, locked_at,"
    " finished_at) select 'rewrite_kind', fairqueue.current_tenant(), 'g', 'done', 1, now(),"
    " now()",
    "update fairqueue.finished_jobs set status = 'cancelled'",
    # The plan raised: every group of the tenant ahead of the free plan's.
    "update fairqueue.tenants set plan = 'team'",
    "delete from fairqueue.tenants",
    "insert into fairqueue.tenants (id, plan) select fairqueue.current_tenant(), 'team'"
    " on conflict (id) do update set plan = 'team'",
    # Credits minted by a refund of a made-up job, a grant, or an old entry changed.
    "insert into fairqueue.credits (tenant_id, job_id, kind, amount, note)"
    " select fairqueue.current_tenant(), gen_random_uuid(), 'refund', 1000, 'minted'",
    "insert into fairqueue.credits (tenant_id, kind, amount)"
    " select fairqueue.current_tenant(), 'grant', 1000",
    "update fairqueue.credits set amount = 1000 where kind = 'grant'",
    "delete from fairqueue.credits where kind = 'debit'",
]


@pytest.mark.parametrize("tenant", ["a", "b"])
@pytest.mark.parametrize("statement", REWRITES)
def test_a_plain_rewrite_of_the_order_or_the_money_is_refused(
    dsn: str, conn: Connection, world: dict[str, UUID], statement: str, tenant: str
) -> None:
    """Clamped to a, or to b by the same code that would push b back."""
    before = snapshot(conn)
    assert ("rewrite_kind", f"{tenant}/g", 4) in before["served"]  # three done, one running
    with (
        connect(dsn, autocommit=True) as app,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
        tenant_transaction(app, tenant),
    ):
        app.execute(statement)  # type: ignore[arg-type]
    assert snapshot(conn) == before


def _app_call(dsn: str, tenant: str, statement: str, params: tuple[Any, ...]) -> list[Any]:
    with connect(dsn, autocommit=True) as app, tenant_transaction(app, tenant):
        return [tuple(r.values()) for r in app.execute(statement, params).fetchall()]  # type: ignore[arg-type]


def test_a_refund_is_only_of_a_cancelled_or_failed_jobs_own_debit(
    dsn: str, conn: Connection, world: dict[str, UUID]
) -> None:
    before = snapshot(conn)
    refund = "select amount from fairqueue.credit_refund(%s, %s, 'r')"
    # A made-up job, and a job still pending (nothing to pay back yet).
    assert _app_call(dsn, "a", refund, ("a", uuid.uuid4())) == []
    assert _app_call(dsn, "a", refund, ("a", world["a_pending"])) == []
    # b's job from a's clamp: named as b's, or as a's.
    conn.execute(
        "update fairqueue.jobs set status = 'cancelled', finished_at = now() where id = %s",
        (world["b_pending"],),
    )
    assert _app_call(dsn, "a", refund, ("b", world["b_pending"])) == []
    assert _app_call(dsn, "a", refund, ("a", world["b_pending"])) == []
    assert snapshot(conn)["credits"] == before["credits"]
    # b's own cancelled job, once.
    assert _app_call(dsn, "b", refund, ("b", world["b_pending"])) == [(5,)]
    assert _app_call(dsn, "b", refund, ("b", world["b_pending"])) == []
    assert (balance(conn, "a"), balance(conn, "b")) == (15, 20)


def test_a_debit_is_of_a_real_job_of_the_clamps_tenant(
    dsn: str, conn: Connection, world: dict[str, UUID]
) -> None:
    before = snapshot(conn)
    entry = "select id from fairqueue.credit_entry(%s, %s, %s, %s, null)"
    refused = [
        ("a", ("a", uuid.uuid4(), "debit", -5)),  # no such job
        ("a", ("a", world["b_running"], "debit", -5)),  # b's job
        ("a", ("b", None, "grant", 5)),  # b's ledger from a's clamp
        ("a", ("a", world["a_running"], "refund", 5)),  # a refund is credit_refund's alone
        ("a", ("a", None, "grant", -5)),  # a grant that takes
        ("a", ("a", world["a_running"], "debit", 5)),  # a debit that gives
        ("a", ("a", None, "grant", 10**15)),  # past the most a balance holds
        ("a", ("a", None, "grant", 9223372036854775807)),
    ]
    for tenant, params in refused:
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            _app_call(dsn, tenant, entry, params)
    assert snapshot(conn) == before
    # The job's own debit, once.
    assert len(_app_call(dsn, "a", entry, ("a", world["a_running"], "debit", -3))) == 1
    assert _app_call(dsn, "a", entry, ("a", world["a_running"], "debit", -3)) == []
    assert balance(conn, "a") == 12


def test_a_plan_is_set_only_for_the_clamps_tenant(
    dsn: str, conn: Connection, world: dict[str, UUID]
) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        _app_call(dsn, "a", "select fairqueue.tenant_set_plan(%s, 'team')", ("b",))
    assert snapshot(conn) == before
    _app_call(dsn, "b", "select fairqueue.tenant_set_plan(%s, 'pro')", ("b",))
    assert snapshot(conn)["tenants"] == [("a", "free"), ("b", "pro")]


@pytest.mark.parametrize(
    ("statement", "job"),
    [
        ("select * from fairqueue.job_cancel(%s, 'b', 'x')", "b_pending"),
        ("select * from fairqueue.job_fail_now(%s, 'b', 'w', 'x')", "b_running"),
        ("select * from fairqueue.job_retry_or_fail(%s, 'b', 'w', 'x', 1)", "b_running"),
        ("select * from fairqueue.job_defer(%s, 'b', 'w', now() + interval '1 year')", "b_running"),
        ("select * from fairqueue.jobs_give_back(array[%s]::uuid[], 'b', 'w')", "b_running"),
        (
            "select * from fairqueue.jobs_claim_by_ids(array[%s]::uuid[], array['b'],"
            " array['rewrite_kind'], array[60.0]::float8[], 'thief', null, '{}', '{}', 0,"
            " '{}')",
            "b_pending",
        ),
        (
            "select * from fairqueue.complete_claimed(array['b'], array[%s]::uuid[],"
            " array['{}'::jsonb], 'w')",
            "b_running",
        ),
        (
            "select * from fairqueue.complete_claimed(array['b'], array[%s]::uuid[],"
            " array[null::jsonb], 'w')",
            "b_running",
        ),
    ],
)
def test_a_lifecycle_door_changes_no_job_outside_the_callers_clamp(
    dsn: str, conn: Connection, world: dict[str, UUID], statement: str, job: str
) -> None:
    before = snapshot(conn)
    assert _app_call(dsn, "a", statement, (world[job],)) == []
    assert snapshot(conn) == before


def test_a_lifecycle_door_makes_only_its_own_transition(
    dsn: str, conn: Connection, world: dict[str, UUID]
) -> None:
    # A done job is not cancelled, a pending one is not failed or put back by a claimer's door.
    done = conn.execute(
        "select id from fairqueue.jobs where tenant_id = 'a' and status = 'done' limit 1"
    ).fetchone()
    assert done is not None
    before = snapshot(conn)
    assert (
        _app_call(dsn, "a", "select * from fairqueue.job_cancel(%s, 'a', 'x')", (done["id"],)) == []
    )
    pending = (world["a_pending"],)
    for door in (
        "select * from fairqueue.job_fail_now(%s, 'a', 'w', 'x')",
        "select * from fairqueue.job_retry_or_fail(%s, 'a', 'w', 'x', 1)",
        "select * from fairqueue.job_defer(%s, 'a', 'w', now())",
    ):
        assert _app_call(dsn, "a", door, pending) == []
    # Another claimer's running job is not this claimer's to finish.
    running = (world["a_running"],)
    assert (
        _app_call(dsn, "a", "select * from fairqueue.job_fail_now(%s, 'a', 'x', 'x')", running)
        == []
    )
    assert snapshot(conn) == before
    # An admission cannot come in running, or at a negative cost.
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        _app_call(
            dsn,
            "a",
            "select * from fairqueue.admission_insert(gen_random_uuid(), 'rewrite_kind', '{}',"
            " 'a', 'g', null, 3, 'lane', null, %s, null, 'running')",
            (0,),
        )
    assert snapshot(conn) == before

"""Give-up hooks run at least once: owed from the failure's own transaction, cleared in the one
the hook runs in (with the hook's writes through job.conn), and fired again by the sweeper when
the process died mid-hook or the hook raised."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

import pytest

from fairqueue import Job, Stage, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.pipeline.give_ups import OWED_GRACE_S
from fairqueue.roles.backstop import Backstop
from fairqueue.roles.sweeper import sweep
from support.rows import job


@pytest.fixture
def refunds(conn: Connection) -> Iterator[None]:
    """An application table give-up hooks write to, as the application role."""
    conn.execute("create table public.refunds (job_id uuid not null, tenant_id text)")
    conn.execute("grant select, insert on public.refunds to fairqueue_app")
    yield
    conn.execute("drop table public.refunds")


def refunded(conn: Connection) -> list[UUID]:
    return [r["job_id"] for r in conn.execute("select job_id from public.refunds").fetchall()]


def failed_long_ago(conn: Connection, job_id: UUID) -> None:
    """Past the sweeper's grace, as a failure whose process died a while ago."""
    conn.execute(
        "update fairqueue.jobs set finished_at = now() - %s * interval '1 second' where id = %s",
        (OWED_GRACE_S + 60, job_id),
    )


def failing(_job: Job) -> None:
    raise RuntimeError("upstream said no")


class Refund:
    """Writes the refund through job.conn; raises instead while ``broken``."""

    def __init__(self) -> None:
        self.broken = False
        self.calls: list[UUID] = []

    def __call__(self, given: Job, error: str) -> None:
        self.calls.append(given.id)
        assert given.conn is not None
        given.conn.execute(
            "insert into public.refunds values (%s, %s)", (given.id, given.tenant_id)
        )
        if self.broken:
            raise RuntimeError("the refund service is down")


@pytest.mark.timeout(60)
def test_a_hook_that_raised_is_fired_again_by_the_sweeper_and_its_writes_land_once(
    dsn: str, conn: Connection, refunds: None
) -> None:
    hook = Refund()
    hook.broken = True
    stage = Stage("give_up_refund", handler=failing, max_attempts=1, on_give_up=hook)
    job_id = enqueue(conn, stage.name, {}, tenant_id="acme")
    assert job_id is not None

    result = run_pipeline(dsn, [stage])
    assert (result.jobs_failed, len(result.summary["hook_errors"])) == (1, 1)
    assert hook.calls == [job_id]
    assert refunded(conn) == []  # the raising hook's write went back with it
    assert (job(conn, job_id)["status"], job(conn, job_id)["give_up_owed"]) == ("failed", True)

    # Within the grace the sweeper leaves it to the process that failed it.
    assert sweep(dsn, [stage]).owed_give_ups_fired == 0
    hook.broken = False
    failed_long_ago(conn, job_id)
    assert sweep(dsn, [stage]).owed_give_ups_fired == 1
    assert hook.calls == [job_id, job_id]
    assert refunded(conn) == [job_id]
    assert job(conn, job_id)["give_up_owed"] is False
    assert sweep(dsn, [stage]).owed_give_ups_fired == 0
    assert hook.calls == [job_id, job_id]


@pytest.mark.timeout(60)
def test_a_hook_runs_once_and_a_stage_without_one_owes_nothing(
    dsn: str, conn: Connection, refunds: None
) -> None:
    hook = Refund()
    hooked = Stage("give_up_once", handler=failing, max_attempts=1, on_give_up=hook)
    plain = Stage("give_up_plain", handler=failing, max_attempts=1)
    hooked_id = enqueue(conn, hooked.name, {}, tenant_id="acme")
    plain_id = enqueue(conn, plain.name, {}, tenant_id="acme")

    result = run_pipeline(dsn, [hooked, plain])
    assert result.jobs_failed == 2
    assert (hook.calls, refunded(conn)) == ([hooked_id], [hooked_id])
    for job_id in (hooked_id, plain_id):
        assert (job(conn, job_id)["status"], job(conn, job_id)["give_up_owed"]) == (
            "failed",
            False,
        )
        failed_long_ago(conn, job_id)
    assert sweep(dsn, [hooked, plain]).owed_give_ups_fired == 0
    assert hook.calls == [hooked_id]


@pytest.mark.timeout(60)
def test_a_job_owing_its_hook_stays_in_the_hot_table_until_the_hook_ran(
    dsn: str, conn: Connection, refunds: None
) -> None:
    hook = Refund()
    hook.broken = True
    stage = Stage("give_up_kept", handler=failing, max_attempts=1, on_give_up=hook)
    job_id = enqueue(conn, stage.name, {}, tenant_id="acme")
    run_pipeline(dsn, [stage])
    assert Backstop(dsn, [stage]).rescue().jobs_moved == 0
    assert job(conn, job_id)["give_up_owed"] is True

    hook.broken = False
    failed_long_ago(conn, job_id)
    assert sweep(dsn, [stage]).owed_give_ups_fired == 1
    assert Backstop(dsn, [stage]).rescue().jobs_moved == 1
    moved = conn.execute(
        "select status from fairqueue.finished_jobs where id = %s", (job_id,)
    ).fetchone()
    assert moved == {"status": "failed"}

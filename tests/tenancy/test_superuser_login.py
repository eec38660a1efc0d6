"""A superuser (or BYPASSRLS) login is not held by the tenant policies, so every statement the
library makes for a tenant names that tenant itself. Here the library runs on the server's
superuser login: the loop's own connection is the superuser's (``conn=admin``, a caller's
connection, used as it is), so the statements it makes are held by nothing but their own
tenant predicates; a statement naming the wrong tenant reads and writes nothing, and the
normal path still works. (Connections the library opens for itself work as the application
role: tests/tenancy/test_app_role.py.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from fairqueue import Defer, Job, Stage, connect, enqueue, run_pipeline
from fairqueue.doorbells import Doorbell
from fairqueue.errors import UnknownJob
from fairqueue.groups import pause_group
from fairqueue.lanes import admit
from fairqueue.results import Result, ResultSettings, fire_hook, read_result, save_result
from fairqueue.roles.backstop import Backstop
from fairqueue.roles.worker import ring_all
from fairqueue.upstream import InProcessUpstream
from support import doorbell_stages
from support.rows import job


@pytest.fixture
def admin(admin_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """The library's own connection, on the superuser login."""
    with connect(admin_dsn, autocommit=True) as c:
        yield c


def test_a_doorbell_naming_another_tenant_claims_nothing_and_is_dropped(
    admin_dsn, admin, conn
) -> None:
    doorbell_stages.reset()
    tenant_job = enqueue(conn, "bell", {}, tenant_id="a")
    system_job = enqueue(conn, "bell", {})
    wrong = [
        Doorbell(job_id=tenant_job, tenant_id="b"),
        Doorbell(job_id=tenant_job, tenant_id=None),
        Doorbell(job_id=system_job, tenant_id="a"),
    ]
    for bell in wrong:
        result = ring_all(admin_dsn, doorbell_stages.STAGES, [bell], conn=admin)
        assert (result.summary.get("doorbells_dropped"), result.jobs_done) == (1, 0)
    for job_id in (tenant_job, system_job):
        row = job(conn, job_id)
        assert (row["status"], row["attempts"], row["locked_by"]) == ("pending", 0, None)
    assert doorbell_stages.RAN == []
    # The right doorbell still runs each job, once.
    right = [
        Doorbell(job_id=tenant_job, tenant_id="a"),
        Doorbell(job_id=system_job, tenant_id=None),
    ]
    assert ring_all(admin_dsn, doorbell_stages.STAGES, right, conn=admin).jobs_done == 2
    assert sorted(doorbell_stages.RAN) == sorted([(tenant_job, 1), (system_job, 1)])


def test_a_doorbell_is_not_held_by_another_tenants_paused_group(admin_dsn, admin, conn) -> None:
    doorbell_stages.reset()
    conn.execute("insert into fairqueue.groups (id, tenant_id, status) values ('g', 'b', 'paused')")
    job_id = enqueue(conn, "bell", {}, tenant_id="a", group_id="g")
    result = ring_all(
        admin_dsn, doorbell_stages.STAGES, [Doorbell(job_id=job_id, tenant_id="a")], conn=admin
    )
    # As under the application role: tenant a's job does not see tenant b's group.
    assert result.jobs_done == 1
    assert [(job_id, 1)] == doorbell_stages.RAN


def test_pausing_a_group_of_another_tenants_name_changes_only_ones_own(admin, conn) -> None:
    conn.execute("insert into fairqueue.groups (id, tenant_id) values ('g', 'a')")
    pause_group(admin, "g", tenant_id="b")
    rows = conn.execute("select id, tenant_id, status from fairqueue.groups order by 2").fetchall()
    assert [(r["id"], r["tenant_id"], r["status"]) for r in rows] == [
        ("g", "a", "active"),
        ("g", "b", "paused"),
    ]


HOOKED: list[tuple[UUID, str | None]] = []


def note_hook(result: Result, conn: psycopg.Connection[Any]) -> None:
    HOOKED.append((result.job_id, result.tenant_id))


RESULTS = Stage(
    "su_result",
    handler=lambda job: {"n": job.payload["n"]},
    render_result=lambda output: {"shown": output["n"]},
    after_result=note_hook,
)


def results_rows(conn) -> list[tuple[UUID, str | None, Any]]:
    rows = conn.execute("select job_id, tenant_id, body from fairqueue.results order by job_id")
    return [(r["job_id"], r["tenant_id"], r["body"]) for r in rows]


def done_job(admin_dsn: str, admin, conn, tenant_id: str | None, n: int = 1) -> UUID:
    job_id = enqueue(conn, "su_result", {"n": n}, tenant_id=tenant_id)
    assert job_id is not None
    assert run_pipeline(admin_dsn, [RESULTS], conn=admin).jobs_done == 1
    return job_id


def test_a_result_named_with_another_tenant_is_neither_written_nor_read(
    admin_dsn, admin, conn
) -> None:
    HOOKED.clear()
    a_job = done_job(admin_dsn, admin, conn, "a")
    with pytest.raises(UnknownJob):
        save_result(admin, a_job, {"shown": "by b"}, tenant_id="b")
    assert results_rows(conn) == []
    assert conn.execute("select result_at from fairqueue.jobs").fetchone()["result_at"] is None

    save_result(admin, a_job, {"shown": "by a"}, tenant_id="a")
    assert results_rows(conn) == [(a_job, "a", {"shown": "by a"})]
    assert [(a_job, "a")] == HOOKED
    assert read_result(admin, a_job, tenant_id="b") is None
    assert read_result(admin, a_job, tenant_id=None) is None
    stored = read_result(admin, a_job, tenant_id="a")
    assert stored is not None and stored.body == {"shown": "by a"}

    # A hook owed on tenant a's row is not fired, nor marked, by a call naming tenant b.
    conn.execute("update fairqueue.results set hook_fired_at = null")
    assert fire_hook(admin, RESULTS, a_job, "b") is False
    assert [(a_job, "a")] == HOOKED
    assert (
        conn.execute("select hook_fired_at from fairqueue.results").fetchone()["hook_fired_at"]
        is None
    )
    assert fire_hook(admin, RESULTS, a_job, "a") is True
    assert [(a_job, "a"), (a_job, "a")] == HOOKED


def test_a_re_check_naming_another_tenants_job_cannot_replace_or_read_its_result(
    admin_dsn, admin, conn
) -> None:
    a_job = done_job(admin_dsn, admin, conn, "a", 1)
    save_result(admin, a_job, {"shown": "a's own"}, tenant_id="a")
    b_job = done_job(admin_dsn, admin, conn, "b", 2)
    # A row the library never makes (admission checks the lane): b's job names a's as its
    # original, so its result row would be a's.
    conn.execute("update fairqueue.jobs set delta_of = %s where id = %s", (a_job, b_job))
    with pytest.raises(UnknownJob):
        save_result(admin, b_job, {"shown": "b's"}, tenant_id="b")
    assert results_rows(conn) == [(a_job, "a", {"shown": "a's own"})]
    assert read_result(admin, b_job, tenant_id="b") is None


def test_the_backstop_on_a_superuser_login_writes_each_tenants_result_once(
    admin_dsn, admin, conn
) -> None:
    HOOKED.clear()
    jobs = {tenant: done_job(admin_dsn, admin, conn, tenant, n) for n, tenant in enumerate("ab")}
    conn.execute("update fairqueue.jobs set finished_at = now() - interval '1 minute'")
    swept = Backstop(admin_dsn, [RESULTS], ResultSettings(grace_s=0.3)).rescue(conn=admin)
    assert swept is not None
    assert (swept.written, swept.refused, swept.hooks_fired) == (2, 0, 2)
    assert sorted(results_rows(conn), key=str) == sorted(
        [(jobs["a"], "a", {"shown": 0}), (jobs["b"], "b", {"shown": 1})], key=str
    )
    assert sorted(HOOKED, key=str) == sorted([(jobs["a"], "a"), (jobs["b"], "b")], key=str)


RAN: list[tuple[UUID, str | None]] = []
GIVEN_UP: list[tuple[UUID, str | None]] = []


def mixed(job: Job) -> dict[str, Any]:
    RAN.append((job.id, job.tenant_id))
    outcome = job.payload["do"]
    if outcome == "fail":
        raise RuntimeError(f"{job.tenant_id} fails")
    if outcome == "retry":
        raise RuntimeError(f"{job.tenant_id} tries again later")
    if outcome == "defer":
        raise Defer(timedelta(minutes=10))
    if outcome == "follow":
        job.enqueue("su_mixed", {"do": "done"}, tenant_id=job.tenant_id)
    return {"tenant": job.tenant_id}


UP = InProcessUpstream()
DOWN = InProcessUpstream()
MIXED = Stage(
    "su_mixed",
    handler=mixed,
    max_attempts=3,
    on_give_up=lambda job, error: GIVEN_UP.append((job.id, job.tenant_id)),
)
HELD_UP = Stage("su_held_up", handler=lambda job: None, upstream=UP)
HELD_DOWN = Stage(
    "su_held_down",
    handler=lambda job: None,
    upstream=DOWN,
    release_window_s=600,
    release_backoff_s=60,  # not due again in this run
)

OUTCOMES = ["done", "fail", "retry", "defer", "follow"]


def test_a_run_over_two_tenants_on_a_superuser_login_finishes_each_job_once(
    admin_dsn, admin, conn
) -> None:
    RAN.clear()
    GIVEN_UP.clear()
    UP.work.clear()
    DOWN.work.clear()
    mine: dict[UUID, tuple[str | None, str]] = {}
    for tenant in ("a", "b", None):
        for outcome in OUTCOMES:
            max_attempts = 1 if outcome == "fail" else 3
            job_id = enqueue(
                conn, "su_mixed", {"do": outcome}, tenant_id=tenant, max_attempts=max_attempts
            )
            assert job_id is not None
            mine[job_id] = (tenant, outcome)
    # A job that died on its last attempt: failed by the run, its give-up hook called once.
    abandoned = enqueue(conn, "su_mixed", {"do": "done"}, tenant_id="b", max_attempts=1)
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_by = 'gone',"
        " lease_until = now() - interval '1 minute' where id = %s",
        (abandoned,),
    )
    held: dict[str, tuple[UUID, UUID]] = {}
    for tenant in ("a", "b"):
        up = admit(admin, "l1", "su_held_up", {}, tenant_id=tenant).job_id
        down = admit(admin, "l2", "su_held_down", {}, tenant_id=tenant).job_id
        held[tenant] = (up, down)
    DOWN.available = False
    try:
        result = run_pipeline(admin_dsn, [MIXED, HELD_UP, HELD_DOWN], conn=admin)
    finally:
        DOWN.available = True

    assert result.stop_reason == "no_work"
    # Every job of mine ran once, for its own tenant; each follow-up ran once after it.
    follow_ups = conn.execute(
        "select id, tenant_id from fairqueue.jobs where type = 'su_mixed' and id <> all(%s)",
        ([*mine, abandoned],),
    ).fetchall()
    assert sorted(RAN, key=str) == sorted(
        [(job_id, tenant) for job_id, (tenant, _) in mine.items()]
        + [(r["id"], r["tenant_id"]) for r in follow_ups],
        key=str,
    )
    assert sorted(r["tenant_id"] or "" for r in follow_ups) == ["", "a", "b"]
    expected = {
        "done": ("done", 1),
        "follow": ("done", 1),
        "fail": ("failed", 1),
        "retry": ("pending", 1),
        "defer": ("pending", 0),
    }
    for job_id, (tenant, outcome) in mine.items():
        row = job(conn, job_id)
        assert (row["tenant_id"], row["status"], row["attempts"]) == (tenant, *expected[outcome])
        if outcome in ("done", "follow"):
            assert row["output"] == {"tenant": tenant}
    for r in follow_ups:
        assert job(conn, r["id"])["status"] == "done"
    assert job(conn, abandoned)["status"] == "failed"
    failed = [job_id for job_id, (_, outcome) in mine.items() if outcome == "fail"]
    assert sorted(GIVEN_UP, key=str) == sorted(
        [(job_id, mine[job_id][0]) for job_id in failed] + [(abandoned, "b")], key=str
    )
    # Failed: one "fail" job per tenant, and the abandoned one.
    assert (result.jobs_done, result.jobs_failed, result.jobs_deferred) == (9 + 2, 3 + 1, 3)
    assert result.summary["abandoned_failed"] == 1
    for tenant, (up, down) in held.items():
        up_row, down_row = job(conn, up), job(conn, down)
        assert (up_row["tenant_id"], up_row["status"]) == (tenant, "done")
        assert up_row["released_at"] is not None
        assert (down_row["status"], down_row["attempts"], down_row["release_tries"]) == (
            "pending",
            0,
            1,
        )
    assert all(work.released for work in UP.work.values()) and len(UP.work) == 2


def test_a_stop_request_gives_each_tenants_jobs_back_on_a_superuser_login(
    admin_dsn, admin, conn
) -> None:
    stop = threading.Event()
    RAN.clear()

    def stopping(job: Job) -> None:
        RAN.append((job.id, job.tenant_id))
        stop.set()

    stage = Stage("su_stop", handler=stopping, batch=10)
    ids = [enqueue(conn, "su_stop", {}, tenant_id=t) for t in ("a", "b", "c", None)]
    result = run_pipeline(admin_dsn, [stage], stop=stop, conn=admin)
    assert result.jobs_done == 1
    rows = [job(conn, job_id) for job_id in ids]
    assert sorted((r["status"], r["attempts"]) for r in rows) == [
        ("done", 1),
        ("pending", 0),
        ("pending", 0),
        ("pending", 0),
    ]


def test_the_batch_functions_name_each_jobs_tenant(admin, conn) -> None:
    from fairqueue.pipeline.claim import claim_batch, complete_claimed, read_jobs

    Stage("batched_su", handler=lambda job: None)
    a_job = enqueue(conn, "batched_su", {}, tenant_id="a")
    (claimed,) = claim_batch(admin, "batched_su", batch=1, lease_s=60, locked_by="me")
    assert claimed.id == a_job
    # The pair names tenant b for a's job: nothing is read, nothing finished.
    assert read_jobs(admin, "b", [a_job]) == []
    assert complete_claimed(admin, [("b", a_job)], "me") == set()
    assert job(conn, a_job)["status"] == "running"
    assert complete_claimed(admin, [("a", a_job)], "me") == {a_job}

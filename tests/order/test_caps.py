"""Caps per tenant (Plan(max_running=n)): a tenant on a capped plan never has more than n jobs of
one type running, whoever claims them (pipelines side by side, doorbells); the claim passes it
over for the others, and a run stops with no_work only when what is left is capped or held by a
claim in flight. The order of the batches with caps is checked against the plain model in
test_claim_order_property.py and test_tenant_quantum_property.py."""

from __future__ import annotations

import io
import threading
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console

from fairqueue import PLANS, Plan, Plans, Stage, connect, enqueue, run_pipeline
from fairqueue.cli.top import render
from fairqueue.db import Connection
from fairqueue.doorbells import Doorbell
from fairqueue.errors import ConfigurationError
from fairqueue.job_info import find_jobs
from fairqueue.overview import overview
from fairqueue.pipeline.claim import claim_batch
from fairqueue.plans import set_plan
from fairqueue.roles.worker import ring_all
from fairqueue.stage import FairShare
from fairqueue.waiting import why_waiting
from support.order_workloads import Workload
from support.order_workloads import load as load_workload
from support.rows import race

# free: at most 2 running per tenant, pro: 5, team: none.
CAPPED = Plans(
    tuple(
        replace(plan, max_running=cap) for plan, cap in zip(PLANS.plans, (2, 5, None), strict=True)
    )
)
CAPS = {plan.name: plan.max_running for plan in CAPPED.plans}
BATCH = 50


@pytest.mark.parametrize("cap", [0, -1, True, 1.5, "2"])
def test_a_plan_refuses_a_cap_that_is_not_a_positive_whole_number(cap: Any) -> None:
    with pytest.raises(ConfigurationError, match="plan 'free': max_running"):
        Plan("free", priority=1, daily_units=None, description="", max_running=cap)


def test_the_plans_table_shows_each_plans_cap() -> None:
    lines = CAPPED.table().splitlines()
    assert lines[0].split() == [
        "plan",
        "priority",
        "weight",
        "max",
        "running",
        "daily",
        "units",
        "description",
    ]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows["free"][3] == "2" and rows["pro"][3] == "5" and rows["team"][3] == "-"


def _running_by_tenant(conn: Connection, job_type: str) -> dict[str, int]:
    rows = conn.execute(
        "select tenant_id, count(*) as n from fairqueue.jobs"
        " where type = %s and status = 'running' and tenant_id is not null group by 1",
        (job_type,),
    ).fetchall()
    return {row["tenant_id"]: row["n"] for row in rows}


def _over_cap(running: dict[str, int], plans: dict[str, str]) -> dict[str, int]:
    return {t: n for t, n in running.items() if (cap := CAPS[plans[t]]) is not None and n > cap}


def test_a_doorbell_for_a_tenant_at_its_cap_claims_nothing_and_the_job_stays(
    dsn: str, conn: Connection
) -> None:
    ran: list[str] = []
    stage = Stage("capped_bell", handler=lambda job: ran.append(str(job.id)), delivery="doorbell")
    set_plan(conn, "a", "free", plans=CAPPED)
    busy = [enqueue(conn, stage.name, {}, tenant_id="a", group_id=g) for g in ("x", "y")]
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_at = now(),"
        " lease_until = now() + interval '1 hour', locked_by = 'other' where id = any(%s)",
        (busy,),
    )
    waiting = enqueue(conn, stage.name, {}, tenant_id="a", group_id="z")
    bell = [Doorbell(job_id=waiting, tenant_id="a")]
    assert ring_all(dsn, [stage], bell, plans=CAPPED).jobs_done == 0
    row = conn.execute("select status, attempts from fairqueue.jobs where id = %s", (waiting,))
    assert row.fetchone() == {"status": "pending", "attempts": 0}
    # The cron's claim passes it over too while the tenant is at its cap.
    assert run_pipeline(dsn, [stage], trigger="test", plans=CAPPED).jobs_done == 0
    # One running job finishes: the doorbell now takes the job.
    conn.execute(
        "update fairqueue.jobs set status = 'done', finished_at = now() where id = %s", (busy[0],)
    )
    assert ring_all(dsn, [stage], bell, plans=CAPPED).jobs_done == 1
    assert ran == [str(waiting)]


@pytest.mark.parametrize("fair_share", ["group", "tenant"])
def test_concurrent_pipelines_never_pass_a_cap_and_drain_every_job_once(
    conn: Connection, dsn: str, admin_dsn: str, fair_share: FairShare
) -> None:
    job_type = f"capped_{fair_share}"
    tenants = {f"t{t}": CAPPED.plans[t % 3].name for t in range(200)}
    for tenant, plan in tenants.items():
        set_plan(conn, tenant, plan, plans=CAPPED)
    every = [
        row["id"]
        for row in conn.execute(
            "insert into fairqueue.jobs (type, tenant_id, group_id)"
            " select %s, 't' || (i %% 200), 'g' || (i %% 1000) from generate_series(1, 4000) i"
            " returning id::text",
            (job_type,),
        ).fetchall()
    ]
    conn.execute("analyze fairqueue.jobs")
    ran: list[str] = []
    over: list[dict[str, int]] = []
    # The most running jobs any tenant of each plan was seen with.
    most: dict[str, int] = {}
    lock = threading.Lock()
    local = threading.local()
    opened: list[Connection] = []

    def check(job: Any) -> None:
        # Every claimed job's handler counts its tenant's running jobs: never past the cap.
        if not hasattr(local, "conn"):
            local.conn = connect(admin_dsn, autocommit=True)
            with lock:
                opened.append(local.conn)
        running = _running_by_tenant(local.conn, job_type)
        with lock:
            ran.append(str(job.id))
            if found := _over_cap(running, tenants):
                over.append(found)
            for tenant, n in running.items():
                most[tenants[tenant]] = max(most.get(tenants[tenant], 0), n)

    stage = Stage(job_type, batch=BATCH, handler=check, fair_share=fair_share)
    pipelines = 8
    left_at_stop: list[int] = []

    def drain() -> str:
        result = run_pipeline(dsn, [stage], trigger="test", plans=CAPPED)
        # Read as the superuser: the application role sees no tenant's jobs unclamped.
        with connect(admin_dsn, autocommit=True) as look:
            running = _running_by_tenant(look, job_type)
            rows = look.execute(
                "select tenant_id from fairqueue.jobs"
                " where type = %s and status = 'pending' and run_after <= now()",
                (job_type,),
            ).fetchall()
        # What could be claimed now: each tenant's due jobs, at most its room. When the claim
        # found none, only the other seven's claims in flight held any; since then their
        # running jobs (a batch each) may have finished and given their tenants room again.
        due = Counter(r["tenant_id"] for r in rows)
        free = [
            min(n, cap - running.get(t, 0)) if (cap := CAPS[tenants[t]]) is not None else n
            for t, n in due.items()
        ]
        left_at_stop.append(sum(max(0, n) for n in free))
        return result.stop_reason

    outcomes = race([drain] * pipelines)
    for opened_conn in opened:
        opened_conn.close()
    assert outcomes == ["no_work"] * pipelines
    assert over == []
    # The cap bound: some tenant of free was seen at its cap, none past it (above).
    assert most["free"] == 2
    assert max(left_at_stop) <= 2 * (pipelines - 1) * BATCH
    assert Counter(ran) == Counter(every)


def test_jobs_show_says_a_job_waits_for_its_tenants_cap(conn: Connection) -> None:
    stage = Stage("capped_show", handler=lambda _job: None)
    set_plan(conn, "a", "free", plans=CAPPED)
    busy = [enqueue(conn, stage.name, {}, tenant_id="a", group_id=g) for g in ("x", "y")]
    waiting = enqueue(conn, stage.name, {}, tenant_id="a", group_id="z")
    (job,) = find_jobs(conn, ids=[waiting], tenant_id="a", limit=1)
    assert not any("cap" in r for r in why_waiting(conn, job, stage, CAPPED).reasons)
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_at = now(),"
        " lease_until = now() + interval '1 hour', locked_by = 'other' where id = any(%s)",
        (busy,),
    )
    reasons = why_waiting(conn, job, stage, CAPPED).reasons
    assert reasons == ["its tenant is at its plan's cap of 2 running (2 of this type)"]


def test_top_marks_a_waiting_group_whose_tenant_is_at_its_cap(conn: Connection) -> None:
    Stage("capped_top", handler=lambda _job: None)
    set_plan(conn, "a", "free", plans=CAPPED)
    set_plan(conn, "b", "free", plans=CAPPED)
    busy = [enqueue(conn, "capped_top", {}, tenant_id="a", group_id=g) for g in ("x", "y")]
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_at = now(),"
        " lease_until = now() + interval '1 hour', locked_by = 'other' where id = any(%s)",
        (busy,),
    )
    enqueue(conn, "capped_top", {}, tenant_id="a", group_id="z")
    enqueue(conn, "capped_top", {}, tenant_id="b", group_id="w")
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(render(overview(conn), 24, CAPPED))
    lines = console.export_text().splitlines()
    assert [line.split() for line in lines if " z " in line or " w " in line] == [
        ["capped_top", "a", "z", "(at", "cap", "2)", "0"],
        ["capped_top", "b", "w", "0"],
    ]


@pytest.mark.parametrize(
    ("plans", "batch"),
    [(PLANS, ["B1", "C1", "D1", "A1", "B2", "C2"]), (CAPPED, ["B1", "C1", "D1", "C2", "D2"])],
)
def test_the_guides_batch_with_caps(conn: Connection, plans: Plans, batch: list[str]) -> None:
    # docs/guide/fairness.md: acme (groups a, b), bolt (c), cora (d), all on free, five jobs a
    # group created in turn, one of acme's jobs (in a) running. Capped at 2, acme has room for
    # one (B1), bolt and cora give two each, and the batch comes back with five.
    Stage("capped_guide", handler=lambda _job: None)
    keys = {"a": ("acme", "a"), "b": ("acme", "b"), "c": ("bolt", "c"), "d": ("cora", "d")}
    workload = Workload(
        plans={"acme": "free", "bolt": "free", "cora": "free"},
        paused=frozenset(),
        history=[],
        jobs=[(keys[g], True) for _ in range(5) for g in "abcd"],
        batches=[],
        running=(keys["a"],),
    )
    due = load_workload(conn, "capped_guide", workload)
    names = {job_id: f"{key[1].upper()}{age // 4 + 1}" for job_id, key, age, _ in due}
    claimed = claim_batch(
        conn, "capped_guide", batch=6, lease_s=600, locked_by="guide", plans=plans
    )
    assert sorted(names[c.id] for c in claimed) == sorted(batch)

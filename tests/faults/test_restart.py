"""A Postgres restart mid-drain, on a private cluster: no job lost, each job's writes through
job.conn exactly once, every run row closed."""

from __future__ import annotations

import threading
import time

import pytest

from fairqueue import Job, NewJob, RunResult, Stage, connect, enqueue_many, run_pipeline
from fairqueue.migrate import migrate
from support.private_cluster import private_cluster

JOBS = 500


@pytest.mark.timeout(240)
def test_a_restart_mid_drain_loses_nothing_and_writes_each_job_once() -> None:
    with private_cluster() as cluster:
        with connect(cluster.dsn, autocommit=True) as admin:
            migrate(admin)
            admin.execute(
                "create table public.effects (job_id uuid not null, attempt integer not null)"
            )
            admin.execute("grant select, insert on public.effects to fairqueue_app")

        def write(job: Job) -> None:
            assert job.conn is not None
            job.conn.execute("insert into public.effects values (%s, %s)", (job.id, job.attempts))
            time.sleep(0.01)

        stage = Stage(
            "restart_drain", handler=write, batch=20, max_attempts=10, backoff_unit_s=0.01
        )
        with connect(cluster.dsn, autocommit=True) as admin:
            with admin.transaction():
                made = enqueue_many(admin, stage.name, [NewJob({"n": n}) for n in range(JOBS)])
            ids = {m.job_id for m in made}

            results: list[RunResult] = []
            errors: list[BaseException] = []

            def drain() -> None:
                try:
                    while True:
                        result = run_pipeline(cluster.dsn, [stage], time_budget_s=60)
                        results.append(result)
                        if result.stop_reason == "no_work":
                            return
                except BaseException as exc:
                    errors.append(exc)

            drainer = threading.Thread(target=drain)
            drainer.start()
            deadline = time.monotonic() + 60
            while admin.execute("select count(*) as n from public.effects").fetchone()["n"] < 60:
                assert time.monotonic() < deadline, "the drain never got going"
                time.sleep(0.05)
        cluster.restart()
        drainer.join(180)
        assert not drainer.is_alive()
        assert errors == []

        with connect(cluster.dsn, autocommit=True) as admin:
            # Whatever the restart cut short is retried; drain what is left.
            while True:
                left = admin.execute(
                    "select count(*) as n from fairqueue.jobs where status <> 'done'"
                ).fetchone()["n"]
                if left == 0:
                    break
                admin.execute(
                    "update fairqueue.jobs set run_after = now(), lease_until = now()"
                    " where status <> 'done'"
                )
                results.append(run_pipeline(cluster.dsn, [stage], time_budget_s=60))
            done = admin.execute(
                "select id, status from fairqueue.all_jobs where type = %s", (stage.name,)
            ).fetchall()
            assert {r["id"] for r in done} == ids
            assert {r["status"] for r in done} == {"done"}
            effects = admin.execute(
                "select job_id, count(*) as n from public.effects group by job_id"
            ).fetchall()
            assert {r["job_id"] for r in effects} == ids
            assert [r for r in effects if r["n"] != 1] == []
            open_runs = admin.execute(
                "select id from fairqueue.runs where finished_at is null"
            ).fetchall()
            assert open_runs == []
            assert any(r.stop_reason == "error" for r in results)

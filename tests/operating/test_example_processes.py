"""The example across processes: what `fairqueue serve --role api` admitted, `fairqueue tick` in
another process drains, its held work kept by the development upstream in the database; and the
example brings its own quota wherever its stages run, keeping an operator's."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fairqueue import Stage, api, connect, enqueue, run_pipeline
from fairqueue.db import Connection
from fairqueue.dev import example
from fairqueue.dev import pooler as local_pooler
from fairqueue.dev.example import CLICKS, MAX_ANALYSIS_PAGES, SEARCH_QUOTA, check_analysis
from fairqueue.dev.upstream import DatabaseUpstream, bind_stages
from fairqueue.errors import ConfigurationError, UpstreamRejected, UpstreamUnavailable
from fairqueue.lanes import add_credits
from fairqueue.quotas import define_quota

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SECRET = "test-secret-of-the-example-api-0123456789"

# A user's own stage whose quota nobody defined: loaded by `fairqueue tick --stages` below.
OWN_STAGES = [Stage("own_metered", handler=lambda job: None, quota="own_budget")]


def fairqueue_env(**extra: str) -> dict[str, str]:
    """The environment of a command run on the example's stages, in development."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT / "tests")]),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        **extra,
    }
    for name in ("FAIRQUEUE_STAGES", "FAIRQUEUE_UPSTREAM_URL", "FAIRQUEUE_ENV"):
        env.pop(name, None)
    return env


def fairqueue(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairqueue", "--database-url", dsn, *args],
        env=fairqueue_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def tick(dsn: str, *args: str) -> dict[str, Any]:
    done = fairqueue(dsn, "tick", *args)
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def post_job(port: int, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "POST",
            "/jobs",
            body=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def serve_api(dsn: str, port: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "fairqueue", "--database-url", dsn, "serve", "--role", "api"],
        env=fairqueue_env(FAIRQUEUE_API_SECRET=SECRET, FAIRQUEUE_API_PORT=str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if not local_pooler.wait_listening(process, port, timeout_s=20):
        assert process.poll() is None, process.communicate()[0]
        pytest.fail("the API did not start listening")
    return process


def held_work(conn: Connection) -> dict[str, dict[str, Any]]:
    rows = conn.execute("select * from fairqueue.dev_upstream_work order by created_at").fetchall()
    return {row["id"]: row for row in rows}


@pytest.mark.timeout(90)
def test_what_serve_role_api_admitted_tick_in_another_process_drains_lane_by_lane(
    dsn: str, conn: Connection
) -> None:
    tenants = sorted({tenant for tenant, _ in CLICKS})
    for tenant in tenants:
        add_credits(conn, tenant, 20, note="test grant")
    port = local_pooler.free_port()
    process = serve_api(dsn, port)
    admitted: dict[tuple[str, str], list[str]] = {}
    try:
        for click, (tenant, user) in enumerate(CLICKS, start=1):
            token = api.mint_token(SECRET, tenant_id=tenant, lane=user)
            body = {"type": "analyze", "payload": {"doc": f"{user}-{click}", "pages": click}}
            status, answer = post_job(port, token, body)
            assert status == 202, answer
            admitted.setdefault((tenant, user), []).append(answer["id"])
        # The stand-in service's own validation answers through the API of that process too.
        token = api.mint_token(SECRET, tenant_id=tenants[0], lane="someone")
        too_long = {"type": "analyze", "payload": {"doc": "big", "pages": MAX_ANALYSIS_PAGES + 1}}
        status, answer = post_job(port, token, too_long)
        assert (status, answer["error"]["code"]) == (422, "upstream_rejected"), answer
    finally:
        # The API process is gone before the tick starts: nothing it held in memory is needed.
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    assert process.returncode == 0, output
    every = {job_id for ids in admitted.values() for job_id in ids}
    held = held_work(conn)
    assert set(held) == every
    assert all(row["released_at"] is None for row in held.values())

    answer = tick(dsn)
    assert (answer["stopReason"], answer["jobsDone"], answer["error"]) == (
        "no_work",
        len(every),
        None,
    )

    jobs = conn.execute(
        "select id::text, tenant_id, lane, status, attempts, locked_at, finished_at"
        " from fairqueue.all_jobs where type = 'analyze'"
    ).fetchall()
    assert sorted(row["id"] for row in jobs) == sorted(every)  # none lost, none added
    assert {(row["status"], row["attempts"]) for row in jobs} == {("done", 1)}
    by_id = {row["id"]: row for row in jobs}
    held = held_work(conn)
    for ids in admitted.values():
        started = sorted(ids, key=lambda i: by_id[i]["locked_at"])
        released = sorted(ids, key=lambda i: held[i]["released_at"])
        assert started == released == ids  # each lane in click order
        for before, after in itertools.pairwise(ids):
            assert by_id[before]["finished_at"] <= by_id[after]["locked_at"]  # one at a time
    assert {row["releases"] for row in held.values()} == {1}  # none started twice


@pytest.mark.timeout(60)
def test_tick_on_a_fresh_database_brings_the_examples_own_quota(dsn: str, conn: Connection) -> None:
    assert conn.execute("select count(*) as n from fairqueue.quotas").fetchone()["n"] == 0
    for job_type, payload in (
        ("search", {"doc": "by-hand", "results": 0}),
        ("ingest", {"doc": "d"}),
    ):
        done = fairqueue(dsn, "enqueue", job_type, json.dumps(payload))
        assert done.returncode == 0, done.stderr
    answer = tick(dsn)
    assert answer["stopReason"] != "error", answer["error"]
    assert answer["jobsDone"] >= 3  # the search by hand, the ingest and the search it asked for
    quota = conn.execute(
        "select capacity, reserve, period from fairqueue.quotas where name = %s", (SEARCH_QUOTA,)
    ).fetchone()
    assert quota == {"capacity": 32, "reserve": 5, "period": timedelta(seconds=20)}


@pytest.mark.timeout(60)
def test_an_operators_quota_is_kept_and_a_users_own_missing_quota_still_stops_the_run(
    dsn: str, conn: Connection
) -> None:
    define_quota(conn, SEARCH_QUOTA, capacity=3, period=timedelta(hours=1))
    done = fairqueue(dsn, "enqueue", "ingest", json.dumps({"doc": "d"}))
    assert done.returncode == 0, done.stderr
    assert tick(dsn)["stopReason"] == "no_work"
    quota = conn.execute(
        "select capacity, remaining, reserve, period from fairqueue.quotas where name = %s",
        (SEARCH_QUOTA,),
    ).fetchone()
    assert quota == {"capacity": 3, "remaining": 2, "reserve": 0, "period": timedelta(hours=1)}

    conn.execute("insert into fairqueue.jobs (type) values ('own_metered')")
    answer = tick(dsn, "--stages", "test_example_processes:OWN_STAGES")
    assert answer["stopReason"] == "error"
    assert "fairqueue quotas define own_budget" in answer["error"]
    assert conn.execute("select count(*) as n from fairqueue.quotas").fetchone()["n"] == 1


@pytest.mark.timeout(30)
def test_the_development_upstream_holds_validates_and_releases_once_from_any_process(
    dsn: str, conn: Connection
) -> None:
    admitting, releasing = DatabaseUpstream(validate=check_analysis), DatabaseUpstream()
    bound = bind_stages([Stage("dev_held", handler=lambda job: None, upstream=admitting)], dsn)
    assert bound == 1
    releasing.bind(conn)  # another object on the same database: another process, as it were
    key = str(uuid.uuid4())
    assert admitting.create("analyze", {"doc": "d", "pages": 3}, key=key) == key
    assert admitting.create("analyze", {"doc": "d", "pages": 3}, key=key) == key
    assert held_work(conn)[key]["released_at"] is None
    releasing.release(key)
    releasing.release(key)  # after a crash between the call and its record: no error
    row = held_work(conn)[key]
    assert (row["payload"], row["releases"]) == ({"doc": "d", "pages": 3}, 2)
    assert row["released_at"] is not None

    with pytest.raises(UpstreamRejected, match="over the service's limit"):
        admitting.create("analyze", {"doc": "d", "pages": MAX_ANALYSIS_PAGES + 1}, key="big")
    with pytest.raises(UpstreamUnavailable, match="has no work"):
        releasing.release("never-created")
    started = str(uuid.uuid4())
    admitting.create("analyze", {"doc": "e", "pages": 1}, key=started, held=False)
    assert held_work(conn)[started]["releases"] == 1
    assert set(held_work(conn)) == {key, started}

    # Its store is the stand-in service's: the application role reads none of it.
    with (
        connect(dsn, autocommit=True) as app,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        app.execute("select * from fairqueue.dev_upstream_work")


@pytest.mark.timeout(30)
def test_the_development_upstream_without_a_database_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="has no database"):
        DatabaseUpstream().release("x")


@pytest.mark.timeout(30)
def test_the_development_upstream_is_refused_in_production(
    production_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = production_dsn
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    with pytest.raises(ConfigurationError, match="refused when FAIRQUEUE_ENV=production"):
        DatabaseUpstream(dsn=dsn)

    def tick(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fairqueue", "--database-url", dsn, "tick"],
            env={**fairqueue_env(), "FAIRQUEUE_ENV": "production", **extra},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    # Production names its stage list: the example is not taken by default.
    done = tick()
    assert done.returncode == 2
    assert "FAIRQUEUE_ENV=production needs FAIRQUEUE_STAGES" in done.stderr
    # Named, the example's stages cannot load there without a real upstream.
    done = tick(FAIRQUEUE_STAGES="fairqueue.dev.example:STAGES")
    assert done.returncode == 2
    assert "DatabaseUpstream is refused when FAIRQUEUE_ENV=production" in done.stderr


@pytest.mark.timeout(60)
def test_ingest_brings_the_quota_where_no_command_started_the_stages(
    dsn: str, conn: Connection
) -> None:
    # What a deployed function does: its cold start opens no connection, so no start-up defined
    # the quota; the search that ingest asks for comes with it, in the same transaction.
    example._quota_found.clear()
    enqueue(conn, "ingest", {"doc": "d"})
    result = run_pipeline(dsn, example.STAGES, trigger="test")
    assert (result.stop_reason, result.error) == ("no_work", None)
    assert result.jobs_done == 2
    assert conn.execute("select capacity from fairqueue.quotas").fetchall() == [{"capacity": 32}]

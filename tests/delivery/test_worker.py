"""Doorbells end to end: enqueue rings after commit, the worker claims by id under the tenant,
the sweeper rings what was lost. SQS is a moto server on loopback, reached over HTTP."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from fairqueue import connect, enqueue
from fairqueue.dev.lambda_loop import LocalContext, load_module, scheduled_event
from fairqueue.doorbells import Doorbell, MemoryDoorbells, SqsDoorbells, ringing
from fairqueue.errors import ConfigurationError
from fairqueue.roles.sweeper import sweep
from fairqueue.roles.worker import ring_all
from support import doorbell_stages
from support.rows import age_job, job

pytest_plugins = ["support.moto_sqs"]

STAGES = doorbell_stages.STAGES
ROOT_FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


@pytest.fixture(autouse=True)
def fresh_ringing() -> Iterator[None]:
    doorbell_stages.reset()
    yield
    ringing.use_doorbells(None)


@pytest.fixture
def memory() -> MemoryDoorbells:
    bells = MemoryDoorbells()
    ringing.use_doorbells(bells)
    return bells


def test_enqueue_rings_after_commit_and_not_after_rollback(dsn, memory) -> None:
    with connect(dsn) as c:
        kept = enqueue(c, "bell", {}, tenant_id="a")
        assert memory.drain() == []  # not before the commit
    assert memory.drain() == [Doorbell(job_id=kept, tenant_id="a")]
    with connect(dsn) as c:
        enqueue(c, "bell", {}, tenant_id="a")
        c.rollback()
    assert memory.drain() == []
    with connect(dsn, autocommit=True) as c:  # its own transaction: rung at once
        alone = enqueue(c, "bell", {}, tenant_id="b")
        enqueue(c, "plain_cron", {}, tenant_id="b")  # a cron stage rings nothing
    assert memory.drain() == [Doorbell(job_id=alone, tenant_id="b")]


def test_duplicate_doorbell_runs_the_handler_once(dsn, conn) -> None:
    job_id = enqueue(conn, "bell", {}, tenant_id="a")
    bell = Doorbell(job_id=job_id, tenant_id="a")
    result = ring_all(dsn, STAGES, [bell, bell])
    assert [(job_id, 1)] == doorbell_stages.RAN
    assert result.summary["doorbells_ran"] == 1
    assert result.summary["doorbells_dropped"] == 1
    assert job(conn, job_id)["status"] == "done"
    late = ring_all(dsn, STAGES, [bell])  # late: the job is finished
    assert late.summary == {"stages": {}, "doorbells_dropped": 1}
    assert [(job_id, 1)] == doorbell_stages.RAN


def test_doorbell_with_another_tenants_id_is_dropped_and_reads_nothing(dsn, conn) -> None:
    job_id = enqueue(conn, "bell", {}, tenant_id="a")
    for wrong in ("b", None):
        result = ring_all(dsn, STAGES, [Doorbell(job_id=job_id, tenant_id=wrong)])
        assert result.summary["doorbells_dropped"] == 1
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["locked_by"]) == ("pending", 0, None)
    assert doorbell_stages.RAN == []


def test_a_cron_stages_job_is_not_claimed_by_a_doorbell(dsn, conn) -> None:
    job_id = enqueue(conn, "plain_cron", {}, tenant_id="a")
    result = ring_all(dsn, STAGES, [Doorbell(job_id=job_id, tenant_id="a")])
    assert result.summary["doorbells_dropped"] == 1
    assert job(conn, job_id)["status"] == "pending"


def test_sqs_down_at_enqueue_loses_nothing_and_the_sweep_rings_it(
    dsn, conn, sqs_queue, closed_endpoint, monkeypatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", closed_endpoint)
    down = SqsDoorbells(sqs_queue.url)
    ringing.use_doorbells(down)
    with connect(dsn) as c:
        job_id = enqueue(c, "bell", {"n": 1}, tenant_id="a")
    down.close()
    assert job(conn, job_id)["status"] == "pending"

    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs_queue.endpoint)
    up = SqsDoorbells(sqs_queue.url)
    ringing.use_doorbells(up)
    assert sweep(dsn, STAGES).republished == 0  # not stale yet
    age_job(conn, job_id, created_at=120)
    result = sweep(dsn, STAGES)
    assert result.republished == 1
    assert sweep(dsn, STAGES).republished == 0  # rung just now
    up.close()

    bodies = receive_all(sqs_queue.url)
    assert [Doorbell.parse(b) for b in bodies] == [Doorbell(job_id=job_id, tenant_id="a")]
    ring_all(dsn, STAGES, [Doorbell.parse(b) for b in bodies + bodies])
    assert [(job_id, 1)] == doorbell_stages.RAN
    assert job(conn, job_id)["status"] == "done"


def receive_all(queue_url: str) -> list[str]:
    client = boto3.client("sqs")
    try:
        found = client.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", [])
    finally:
        client.close()
    return [m["Body"] for m in found]


def sqs_event(queue_url: str, bodies: list[str]) -> dict[str, Any]:
    """The event Lambda's SQS source delivers, built from messages really sent and received."""
    client = boto3.client("sqs")
    try:
        for body in bodies:
            client.send_message(QueueUrl=queue_url, MessageBody=body)
        messages: list[dict[str, Any]] = []
        while len(messages) < len(bodies):
            batch = client.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=1,
                AttributeNames=["All"],
            ).get("Messages", [])
            assert batch, "the queue ran dry"
            messages.extend(batch)
        arn = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
    finally:
        client.close()
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


LoadFunction = Callable[[str], Any]


@pytest.fixture
def load_function(dsn, sqs_queue, monkeypatch) -> Iterator[LoadFunction]:
    """A function's module (functions/<name>.py) loaded afresh under a Lambda-like environment."""
    loaded: list[Any] = []

    def load(name: str) -> Any:
        monkeypatch.setenv("DATABASE_URL", dsn)
        monkeypatch.setenv("FAIRQUEUE_STAGES", "support.doorbell_stages:STAGES")
        monkeypatch.setenv("FAIRQUEUE_DOORBELLS", "sqs")
        monkeypatch.setenv("FAIRQUEUE_DOORBELL_QUEUE_URL", sqs_queue.url)
        monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", f"fairqueue-{name}")
        monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "fairqueue")
        module = load_module(ROOT_FUNCTIONS / f"{name}.py")
        loaded.append(module)
        # powertools binds its log handler to the stdout of the first Logger() of the process.
        for handler in logging.getLogger(f"fairqueue-{name}").handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.stream = sys.stdout
        return module

    yield load
    for module in loaded:
        module.CONNECTION.close()


def test_worker_function_reports_only_the_malformed_record(
    load_function, conn, sqs_queue, capsys, memory
) -> None:
    worker = load_function("worker")  # enqueue below rings the memory doorbells, not the queue
    ids = [enqueue(conn, "bell", {"n": n}, tenant_id="t") for n in range(9)]
    bodies = [Doorbell(job_id=i, tenant_id="t").to_json() for i in ids]
    bodies.insert(4, '{"job_id": "not-a-uuid", "tenant_id": "t"}')
    event = sqs_event(sqs_queue.url, bodies)
    malformed = next(r["messageId"] for r in event["Records"] if "not-a-uuid" in r["body"])
    answer = worker.handler(event, LocalContext(timeout_s=60))
    assert answer == {"batchItemFailures": [{"itemIdentifier": malformed}]}
    assert sorted(i for i, _ in doorbell_stages.RAN) == sorted(ids)
    run = conn.execute("select * from fairqueue.runs").fetchone()
    assert (run["trigger"], run["stop_reason"], run["jobs_done"]) == ("doorbell", "no_work", 9)
    assert '"DoorbellsRan":[9.0]' in capsys.readouterr().out


def test_sweeper_function_fails_the_abandoned_and_publishes_the_backlog(
    load_function, conn, capsys
) -> None:
    sweeper = load_function("sweeper")
    dead = enqueue(conn, "bell", {}, tenant_id="t", max_attempts=1)
    conn.execute(
        "update fairqueue.jobs set status = 'running', attempts = 1, locked_by = 'gone',"
        " locked_at = now() - interval '10 minutes', lease_until = now() - interval '1 minute'"
        " where id = %s",
        (dead,),
    )
    enqueue(conn, "plain_cron", {}, tenant_id="t")
    answer = sweeper.handler(scheduled_event(), LocalContext(timeout_s=60))
    assert answer["abandonedFailed"] == 1
    assert answer["backlog"] == {"bell": 0, "plain_cron": 1}
    assert [dead] == doorbell_stages.GIVEN_UP
    assert job(conn, dead)["status"] == "failed"
    out = capsys.readouterr().out
    assert '"JobType":"plain_cron"' in out
    assert '"Backlog":[1.0]' in out


def test_backstop_function_saves_the_missing_results_and_reports_them(
    load_function, conn, capsys
) -> None:
    backstop = load_function("backstop")
    job_id = enqueue(conn, "rendered", {}, tenant_id="t")
    conn.execute(
        "update fairqueue.jobs set status = 'done', output = '{\"n\": 2}',"
        " finished_at = now() - interval '10 minutes' where id = %s",
        (job_id,),
    )
    answer = backstop.handler(scheduled_event(), LocalContext(timeout_s=60))
    assert (answer["written"], answer["interrupted"]) == (1, False)
    row = conn.execute("select body, saved_by from fairqueue.results").fetchone()
    assert row == {"body": {"shown": {"n": 2}}, "saved_by": "worker"}
    assert '"ResultsRescued":[1.0]' in capsys.readouterr().out
    # A Lambda with less time left than the margin records nothing and says so.
    assert backstop.handler(scheduled_event(), LocalContext(timeout_s=5))["interrupted"] is True


def test_production_refuses_the_in_memory_doorbells_at_startup(load_function, monkeypatch) -> None:
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    load_function("sweeper")  # sqs: fine
    monkeypatch.setenv("FAIRQUEUE_DOORBELLS", "memory")
    with pytest.raises(ConfigurationError, match="FAIRQUEUE_DOORBELLS=memory is refused"):
        ringing.check_configuration()


def test_a_stage_refuses_an_unknown_delivery() -> None:
    from fairqueue import Stage

    with pytest.raises(ConfigurationError, match="delivery must be 'cron' or 'doorbell'"):
        Stage("odd", handler=print, delivery="pigeon")  # type: ignore[arg-type]


def test_follow_ups_of_doorbell_stages_ring_once_committed(dsn, conn, memory) -> None:
    from fairqueue import Stage, run_pipeline

    def parent(job) -> None:
        job.enqueue("bell", {"from": str(job.id)})

    def give_up(job, error: str) -> None:
        job.enqueue("bell", {"refund": str(job.id)})

    stages = [
        Stage("bell_parent", handler=parent),
        Stage("bell_doomed", handler=lambda job: 1 / 0, max_attempts=1, on_give_up=give_up),
    ]
    enqueue(conn, "bell_parent", {}, tenant_id="a")
    enqueue(conn, "bell_doomed", {}, tenant_id="b")
    run_pipeline(dsn, stages)
    rows = conn.execute("select id, tenant_id from fairqueue.jobs where type = 'bell'").fetchall()
    expected = {Doorbell(job_id=r["id"], tenant_id=r["tenant_id"]) for r in rows}
    assert len(expected) == 2
    assert set(memory.drain()) == expected

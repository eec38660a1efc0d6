"""Every function run the way Lambda runs it, as template.yaml deploys it.

Each function gets a process of its own with exactly the environment the template gives it
(the database in a Secrets Manager secret, no DATABASE_URL, production mode, the SQS doorbell
adapter), with the template's references resolved to local stand-ins: a moto server on loopback
for Secrets Manager and SQS, an upstream service on loopback, and a UDP socket where the X-Ray
daemon would be. Events come from ``sam local generate-event`` and from the schedules' own
``Input``; the context's remaining time counts down from the template's timeout. What an
operator would see is checked: the answer, the run row, the log lines, metrics and traces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from fairqueue import enqueue
from fairqueue.db import Connection
from fairqueue.dev import pooler as local_pooler
from fairqueue.doorbells import Doorbell
from fairqueue.lanes import add_credits
from fairqueue.roles.worker import WORKER_MARGIN_S
from support import deployed_stages
from support.deployed import EVENTS, GENERATED_EVENTS, Invocation, generated_event, http_api_event
from support.deployment import FUNCTIONS, Deployment
from support.rows import age_job, job, runs

pytest_plugins = ["support.moto_sqs", "support.deployment_fixture"]

TESTS = Path(__file__).resolve().parents[1]
# The tenant whose data must never reach a trace.
TENANT = "tenant-7f3a9c"
SECRET_DOC = "doc-only-the-tenant-may-read"


def add(conn: Connection, job_type: str, payload: dict[str, Any], **options: Any) -> UUID:
    job_id = enqueue(conn, job_type, payload, **options)
    assert job_id is not None
    return job_id


def closed_port() -> int:
    """A loopback port nobody listens on: a database that is down."""
    return local_pooler.free_port()


def bell(job_id: UUID, tenant_id: str | None = TENANT) -> str:
    return Doorbell(job_id=job_id, tenant_id=tenant_id).to_json()


def claims(tenant: str = TENANT, user: str = "ada") -> dict[str, str]:
    return {"sub": user, "tenant_id": tenant, "token_use": "access", "scope": "jobs"}


def assert_operable(invocation: Invocation, closing: str) -> None:
    """What an operator relies on for every invocation: no error, nothing on stderr, every
    line Powertools JSON with the request id, the named closing line last, and a trace that
    holds neither the answer nor the tenant's data."""
    assert invocation.error is None, invocation.error
    assert invocation.stderr == ""
    logs = invocation.logs
    assert logs, "no log line at all"
    for line in logs:
        assert line.get("function_request_id") == invocation.request_id, line
        assert {"level", "location", "message", "service", "timestamp"} <= set(line), line
    assert logs[-1]["message"] == closing, invocation.messages()
    assert invocation.segments, "no trace was sent"
    sent = json.dumps(invocation.segments)
    assert "handler response" not in sent
    for secret in (TENANT, SECRET_DOC):
        assert secret not in sent, f"{secret} went into a trace"


def test_the_kept_events_are_what_sam_generates_today() -> None:
    sam = Path(sys.executable).parent / "sam"
    for name, (service, event) in GENERATED_EVENTS.items():
        made = subprocess.run(
            [str(sam), "local", "generate-event", service, event],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
            timeout=60,
        )
        assert json.loads(made.stdout) == json.loads((EVENTS / name).read_text()), name


def test_every_function_gets_the_template_environment_and_no_database_url(
    deployment: Deployment,
) -> None:
    stack = deployment.stack()
    for logical_id in FUNCTIONS:
        environment = stack.function(logical_id).environment
        assert "DATABASE_URL" not in environment
        assert environment["DATABASE_SECRET_ARN"] == deployment.secret_arn
        assert environment["FAIRQUEUE_ENV"] == "production"
        assert environment["FAIRQUEUE_DOORBELLS"] == "sqs"
        assert environment["FAIRQUEUE_DOORBELL_QUEUE_URL"] == deployment.queue_url
        assert environment["FAIRQUEUE_UPSTREAM_URL"] == deployment.upstream.url
        assert environment["POWERTOOLS_SERVICE_NAME"].startswith("fairqueue-")


def test_the_cron_function_drains_and_records_its_tick(
    deployment: Deployment, conn: Connection
) -> None:
    summary = add(
        conn,
        "summarize",
        {"doc": SECRET_DOC, "result": 1, "credits": 2},
        tenant_id=TENANT,
    )
    cron = deployment.start("CronFunction")

    ran = deployment.invoke(cron, deployment.tick("CronFunction", late_s=42))

    assert_operable(ran, "run closed")
    assert ran.answer["stopReason"] == "no_work"
    assert ran.answer["jobsDone"] == 1
    assert job(conn, summary)["status"] == "done"
    (row,) = runs(conn)
    assert str(row["id"]) == ran.answer["runId"]
    assert (row["trigger"], row["stop_reason"]) == ("schedule", "no_work")
    tick = row["summary"]["schedule"]
    assert tick["execution_id"] and tick["schedule_arn"].endswith("CronFunction-tick")
    assert datetime.fromisoformat(tick["scheduled_time"]) < row["started_at"]
    assert 42 <= tick["late_s"] < 42 + 60
    assert ran.metric("JobsDone") == 1
    assert all(line.get("correlation_id") == tick["execution_id"] for line in ran.logs)


def test_a_classic_rule_event_is_recorded_as_a_tick(
    deployment: Deployment, conn: Connection
) -> None:
    cron = deployment.start("CronFunction")
    event = generated_event("cloudwatch-scheduled-event.json")

    ran = deployment.invoke(cron, event)

    assert_operable(ran, "run closed")
    (row,) = runs(conn)
    assert row["trigger"] == "schedule"
    assert row["summary"]["schedule"] == {
        "execution_id": event["id"],
        "scheduled_time": "1970-01-01T00:00:00+00:00",
        "schedule_arn": event["resources"][0],
        "late_s": pytest.approx(row["started_at"].timestamp(), abs=60),
    }


def test_the_sweeper_records_its_tick(deployment: Deployment, conn: Connection) -> None:
    sweeper = deployment.start("SweeperFunction")

    swept = deployment.invoke(sweeper, deployment.tick("SweeperFunction", late_s=3))

    assert_operable(swept, "sweep closed")
    (row,) = runs(conn)
    assert (str(row["id"]), row["trigger"]) == (swept.answer["runId"], "sweeper")
    assert row["finished_at"] is not None
    tick = row["summary"]["schedule"]
    assert tick["schedule_arn"].endswith("SweeperFunction-tick")
    assert 3 <= tick["late_s"] < 3 + 60


def test_the_backstop_connects_through_the_secret_and_rescues_a_result(
    deployment: Deployment, conn: Connection
) -> None:
    summary = add(
        conn, "summarize", {"doc": SECRET_DOC, "result": 0, "credits": 2}, tenant_id=TENANT
    )
    cron = deployment.start("CronFunction")
    assert deployment.invoke(cron, deployment.tick("CronFunction")).answer["jobsDone"] == 1
    age_job(conn, summary, finished_at=600)  # past the two-minute grace window
    backstop = deployment.start("BackstopFunction")

    swept = deployment.invoke(backstop, deployment.tick("BackstopFunction"))

    assert_operable(swept, "backstop swept")
    assert swept.answer["written"] == 1
    assert swept.metric("ResultsRescued") == 1
    saved = conn.execute(
        "select saved_by, body from fairqueue.results where job_id = %s", (summary,)
    ).fetchone()
    assert saved is not None
    assert saved["saved_by"] == "worker"
    assert saved["body"]["title"] == f"Summary of {SECRET_DOC}, result 0"
    again = deployment.invoke(backstop, deployment.tick("BackstopFunction"))
    assert again.answer["written"] == 0  # the warm container sweeps again, finds nothing


def test_an_sqs_batch_of_only_bad_messages_is_a_partial_failure_of_every_record(
    deployment: Deployment, conn: Connection
) -> None:
    worker = deployment.start("WorkerFunction")
    hello = generated_event("sqs-receive-message.json")["Records"][0]["body"]
    bodies = [hello, json.dumps({"job_id": "not-a-uuid", "tenant_id": TENANT})]
    event = deployment.doorbells(bodies)
    ids = [record["messageId"] for record in event["Records"]]

    answered = deployment.invoke(worker, event)

    assert answered.error is None, answered.error
    assert answered.answer == {"batchItemFailures": [{"itemIdentifier": i} for i in ids]}
    assert_operable(answered, "doorbells handled")
    failures = [line for line in answered.logs if line.get("message_id")]
    assert [line["message_id"] for line in failures] == ids
    assert all(line["level"] == "WARNING" and line["reason"] for line in failures)
    assert "not valid JSON" in failures[0]["reason"]
    assert "job_id is not a UUID" in failures[1]["reason"]
    (row,) = runs(conn)
    assert (row["trigger"], row["stop_reason"], row["error"]) == ("doorbell", "no_work", None)
    assert row["summary"]["doorbells_failed"] == 2
    assert [m["message_id"] for m in row["summary"]["failed_messages"]] == ids
    assert answered.metric("DoorbellsFailed") == 2


def test_a_bad_message_fails_alone_and_the_good_doorbells_run(
    deployment: Deployment, conn: Connection
) -> None:
    refund = add(
        conn, "refund", {"job_id": "j-1", "credits": 2, "reason": "failed"}, tenant_id=TENANT
    )
    worker = deployment.start("WorkerFunction")
    event = deployment.doorbells([bell(refund), "Hello from SQS!", bell(refund)])
    bad = event["Records"][1]["messageId"]

    answered = deployment.invoke(worker, event)

    assert_operable(answered, "doorbells handled")
    assert answered.answer == {"batchItemFailures": [{"itemIdentifier": bad}]}
    assert job(conn, refund)["status"] == "done"
    (row,) = runs(conn)
    summary = row["summary"]
    assert (summary["doorbells_ran"], summary["doorbells_dropped"]) == (1, 1)
    assert summary["doorbells_failed"] == 1
    # The library's own lines come out as the function's JSON, with the logger's name.
    assert any(
        line["name"] == "fairqueue.worker" and line["message"].startswith("dropped doorbell")
        for line in answered.logs
    )
    assert answered.metric("DoorbellsRan") == 1


def test_the_worker_starts_no_job_it_cannot_finish_before_its_deadline(
    deployment: Deployment, conn: Connection
) -> None:
    slow = [add(conn, "slow_bell", {"n": n}, tenant_id=TENANT) for n in range(10)]
    worker = deployment.start("WorkerFunction", StagesSpec="support.deployed_stages:STAGES")
    event = deployment.doorbells([bell(job_id) for job_id in slow])
    left_s = WORKER_MARGIN_S + 3.5 * deployed_stages.SLOW_JOB_S

    answered = deployment.invoke(worker, event, timeout_s=left_s)

    assert_operable(answered, "doorbells handled")
    failed = {f["itemIdentifier"] for f in answered.answer["batchItemFailures"]}
    by_message = {r["messageId"]: UUID(json.loads(r["body"])["job_id"]) for r in event["Records"]}
    unstarted = {by_message[m] for m in failed}
    started = set(slow) - unstarted
    assert 1 <= len(started) <= 4, len(started)
    for job_id in started:
        assert job(conn, job_id)["status"] == "done"
    for job_id in unstarted:
        row = job(conn, job_id)
        assert (row["status"], row["attempts"], row["lease_until"]) == ("pending", 0, None)
    (run,) = runs(conn)
    assert run["finished_at"] is not None
    assert (run["finished_at"] - run["started_at"]).total_seconds() < left_s
    assert run["summary"]["doorbells_failed"] == len(unstarted)
    assert all(
        "left" in m["reason"] or "no time" in m["reason"] for m in run["summary"]["failed_messages"]
    )


def test_an_admitted_job_rings_its_doorbell_and_leaves_no_tenant_data_in_the_trace(
    deployment: Deployment, conn: Connection
) -> None:
    add_credits(conn, TENANT, 10)
    admit = deployment.start("AdmitFunction")
    body = {"type": "analyze", "payload": {"doc": SECRET_DOC, "pages": 3}}

    answered = deployment.invoke(
        admit, http_api_event("POST", "ANY /jobs", "/jobs", claims=claims(), body=body)
    )

    assert_operable(answered, "answered")
    assert answered.answer["statusCode"] == 202, answered.answer
    admitted = json.loads(answered.answer["body"])
    assert admitted["status"] == "pending"
    assert deployment.received_doorbells() == [
        Doorbell(job_id=UUID(admitted["id"]), tenant_id=TENANT)
    ]
    (held,) = deployment.upstream.held.values()
    assert (held["payload"]["doc"], held["held"]) == (SECRET_DOC, True)

    shown = deployment.invoke(
        admit,
        http_api_event("GET", "ANY /jobs/{id}", f"/jobs/{admitted['id']}", claims=claims()),
    )
    assert_operable(shown, "answered")
    assert json.loads(shown.answer["body"])["id"] == admitted["id"]


@pytest.mark.parametrize("logical_id", ["CronFunction", "SweeperFunction", "BackstopFunction"])
def test_an_unreachable_database_is_a_function_error_with_its_log_line(
    deployment: Deployment, logical_id: str
) -> None:
    dead = deployment.secret(f"postgresql://fairqueue_app@127.0.0.1:{closed_port()}/postgres")
    function = deployment.start(logical_id, DatabaseSecretArn=dead)

    failed = deployment.invoke(function, deployment.tick(logical_id))

    assert failed.error_type == "DatabaseUnavailable"
    assert "cannot reach the database" in str(failed.error)
    assert failed.stderr == ""
    (line,) = [line for line in failed.logs if line["message"] == "invocation failed"]
    assert line["level"] == "ERROR"
    assert line["function_request_id"] == failed.request_id
    assert line["error_type"] == "DatabaseUnavailable"
    assert "cannot reach the database" in line["exception"]


def test_the_admission_api_answers_503_when_the_database_is_unreachable(
    deployment: Deployment,
) -> None:
    dead = deployment.secret(f"postgresql://fairqueue_app@127.0.0.1:{closed_port()}/postgres")
    admit = deployment.start("AdmitFunction", DatabaseSecretArn=dead)
    body = {"type": "analyze", "payload": {"doc": "d", "pages": 3}}

    answered = deployment.invoke(
        admit, http_api_event("POST", "ANY /jobs", "/jobs", claims=claims(), body=body)
    )

    assert_operable(answered, "answered")
    assert answered.answer["statusCode"] == 503

"""Doorbells: the message, and its adapters over real transports.

SQS is a moto server on loopback spoken to over HTTP (no in-process patching); NOTIFY goes
through the real Postgres.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import boto3
import psycopg
import pytest
from botocore.config import Config
from pydantic import ValidationError

from fairqueue.db import connect
from fairqueue.doorbells import (
    CHANNEL,
    Doorbell,
    DoorbellAdapter,
    InvalidDoorbell,
    MemoryDoorbells,
    PostgresDoorbells,
    PostgresListener,
    SqsDoorbells,
    adapter_from_env,
    listen,
)
from fairqueue.errors import ConfigurationError, FairqueueError

if TYPE_CHECKING:
    from support.moto_sqs import SqsQueues

pytest_plugins = ["support.moto_sqs"]

JOB = uuid.UUID("6f1c0d3e-2d1a-4c1e-9f5e-1a2b3c4d5e6f")


def bells(n: int, tenant: str | None = "t1") -> list[Doorbell]:
    return [Doorbell(job_id=uuid.uuid4(), tenant_id=tenant) for _ in range(n)]


# --- the message -------------------------------------------------------------------------


def test_the_wire_form_is_two_snake_case_keys_and_parses_back() -> None:
    bell = Doorbell(job_id=JOB, tenant_id="t1")
    assert bell.to_json() == '{"job_id":"6f1c0d3e-2d1a-4c1e-9f5e-1a2b3c4d5e6f","tenant_id":"t1"}'
    assert Doorbell.parse(bell.to_json()) == bell
    assert Doorbell.parse(bell.to_json().encode()) == bell


def test_a_tenantless_job_has_a_null_tenant() -> None:
    bell = Doorbell.parse(json.dumps({"job_id": str(JOB), "tenant_id": None}))
    assert bell.tenant_id is None
    assert json.loads(bell.to_json()) == {"job_id": str(JOB), "tenant_id": None}


def test_the_model_forbids_extra_fields_and_is_frozen() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Doorbell(job_id=JOB, tenant_id="t1", payload={"url": "x"})  # type: ignore[call-arg]
    bell = Doorbell(job_id=JOB, tenant_id="t1")
    with pytest.raises(ValidationError, match="frozen"):
        bell.tenant_id = "t2"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"job_id": str(JOB), "tenant_id": "t1", "payload": {}},
            "unexpected field 'payload': a doorbell carries only job_id and tenant_id",
        ),
        ({"job_id": "42", "tenant_id": "t1"}, "job_id is not a UUID"),
        ({"job_id": 42, "tenant_id": "t1"}, "job_id is not a UUID"),
        ({"tenant_id": "t1"}, "missing field 'job_id'"),
        ({"job_id": str(JOB)}, "missing field 'tenant_id'"),
        ({"job_id": str(JOB), "tenant_id": ""}, "tenant_id must be a non-empty string or null"),
        ({"job_id": str(JOB), "tenant_id": 7}, "tenant_id must be a non-empty string or null"),
        ([str(JOB), "t1"], "not a JSON object"),
        ("{oops", "not valid JSON"),
        ("", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_a_malformed_body_names_the_problem(body: Any, message: str) -> None:
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    with pytest.raises(InvalidDoorbell, match=message) as caught:
        Doorbell.parse(raw)
    assert isinstance(caught.value, FairqueueError)


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(InvalidDoorbell) as caught:
        Doorbell.parse('{"job_id": "x", "extra": 1}')
    text = str(caught.value)
    for part in ("unexpected field 'extra'", "job_id is not a UUID", "missing field 'tenant_id'"):
        assert part in text


# --- SQS over HTTP to moto ---------------------------------------------------------------


def receive_all(queue_url: str, expected: int, timeout_s: float = 10) -> list[str]:
    client = boto3.client("sqs")
    bodies: list[str] = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(bodies) < expected and time.monotonic() < deadline:
            answer = client.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            )
            for message in answer.get("Messages", []):
                bodies.append(message["Body"])
                client.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        # Anything beyond the expected count would be a duplicate or a stray.
        extra = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
        bodies.extend(message["Body"] for message in extra.get("Messages", []))
    finally:
        client.close()
    return bodies


def test_sqs_publishes_25_doorbells_in_batches_and_all_arrive(sqs_queue: SqsQueues) -> None:
    sent = bells(25) + bells(1, tenant=None)
    with SqsDoorbells(sqs_queue.url) as adapter:
        assert adapter.publish(sent) == []
    bodies = receive_all(sqs_queue.url, expected=len(sent))
    assert len(bodies) == len(sent)
    assert {Doorbell.parse(body) for body in bodies} == set(sent)


def test_sqs_down_returns_every_doorbell_and_raises_nothing(
    sqs_queue: SqsQueues,
    closed_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", closed_endpoint)
    client = boto3.client(
        "sqs",
        config=Config(connect_timeout=0.5, read_timeout=0.5, retries={"total_max_attempts": 1}),
    )
    sent = bells(25)
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="fairqueue.doorbells"):
            failed = SqsDoorbells(sqs_queue.url, client=client).publish(sent)
    finally:
        client.close()
    assert failed == sent
    assert time.monotonic() - started < 5
    assert "SQS unreachable, 25 doorbell(s) left for the sweep" in caplog.text


def test_sqs_down_with_the_default_client_gives_up_quickly(
    sqs_queue: SqsQueues, closed_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", closed_endpoint)
    sent = bells(3)
    started = time.monotonic()
    with SqsDoorbells(sqs_queue.url) as adapter:
        assert adapter.publish(sent) == sent
    assert time.monotonic() - started < 8


def test_sqs_refusing_the_call_returns_the_doorbells(sqs_queue: SqsQueues) -> None:
    missing = sqs_queue.url.rsplit("/", 1)[0] + "/no-such-queue"
    sent = bells(12)
    with SqsDoorbells(missing) as adapter:
        assert adapter.publish(sent) == sent


class PartlyFailingClient:
    """Answers as SQS does when some entries of a batch are refused: the failing ids are the
    entries whose tenant is "bad". Only the mapping from entry ids back to doorbells is
    under test here; the transport is covered above."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:
        self.calls.append(len(Entries))
        ok, failed = [], []
        for entry in Entries:
            if json.loads(entry["MessageBody"])["tenant_id"] == "bad":
                failed.append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"})
            else:
                ok.append({"Id": entry["Id"], "MessageId": uuid.uuid4().hex})
        return {"Successful": ok, "Failed": failed}


def test_sqs_maps_refused_entries_back_to_their_doorbells() -> None:
    good, bad = bells(18), bells(4, tenant="bad")
    sent = good[:9] + bad[:2] + good[9:] + bad[2:]
    client = PartlyFailingClient()
    assert SqsDoorbells("http://sqs.invalid/1/q", client=client).publish(sent) == bad
    assert client.calls == [10, 10, 2]


# --- Postgres LISTEN/NOTIFY --------------------------------------------------------------


def test_notify_arrives_only_after_commit_and_never_after_rollback(dsn: str) -> None:
    committed, rolled_back, marker = bells(3)
    with PostgresListener(dsn) as listener, connect(dsn) as publisher:
        adapter = PostgresDoorbells(publisher)
        publisher.execute("select 1")  # the caller's transaction is open
        assert adapter.publish([committed]) == []
        assert list(listener.doorbells(timeout_s=0.3)) == []
        publisher.commit()
        assert list(listener.doorbells(timeout_s=5, stop_after=1)) == [committed]

        publisher.execute("select 1")
        assert adapter.publish([rolled_back]) == []
        publisher.rollback()
        assert adapter.publish([marker]) == []  # idle connection: its own transaction
        assert list(listener.doorbells(timeout_s=5, stop_after=1)) == [marker]
        assert list(listener.doorbells(timeout_s=0.2)) == []


def test_a_failed_notify_leaves_the_callers_transaction_usable(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    too_long = Doorbell(job_id=JOB, tenant_id="t" * 9000)  # NOTIFY payloads stop at 8000 bytes
    fine = bells(1)
    with PostgresListener(dsn) as listener, connect(dsn) as publisher:
        adapter = PostgresDoorbells(publisher)
        publisher.execute("create temp table t (x int)")
        with caplog.at_level(logging.WARNING, logger="fairqueue.doorbells"):
            assert adapter.publish([too_long]) == [too_long]
        assert "NOTIFY failed" in caplog.text
        publisher.execute("insert into t values (1)")
        assert adapter.publish(fine) == []
        publisher.commit()
        assert list(listener.doorbells(timeout_s=5, stop_after=1)) == fine


def test_notify_on_a_closed_connection_returns_the_doorbells(dsn: str) -> None:
    publisher = connect(dsn)
    publisher.close()
    sent = bells(2)
    assert PostgresDoorbells(publisher).publish(sent) == sent


def test_listen_yields_doorbells_and_skips_malformed_payloads(
    dsn: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    sent = bells(2)
    received: list[Doorbell] = []

    def listener() -> None:
        received.extend(listen(dsn, timeout_s=5, stop_after=2))

    with caplog.at_level(logging.WARNING, logger="fairqueue.doorbells"):
        thread = threading.Thread(target=listener)
        thread.start()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            row = conn.execute(
                "select count(*) as n from pg_stat_activity "
                "where datname = current_database() and query ilike 'LISTEN%%'"
            ).fetchone()
            if row and row["n"]:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the listen() thread never ran LISTEN")
        conn.execute("select pg_notify(%s, %s)", (CHANNEL, '{"job_id": "nope"}'))
        assert PostgresDoorbells(conn).publish(sent) == []
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert received == sent
    assert "skipped a payload on fairqueue_doorbell" in caplog.text
    assert "job_id is not a UUID" in caplog.text


# --- memory ------------------------------------------------------------------------------


def test_memory_round_trip() -> None:
    adapter: DoorbellAdapter = MemoryDoorbells()
    sent = bells(3)
    assert adapter.publish(sent) == []
    assert isinstance(adapter, MemoryDoorbells)
    assert adapter.receive(timeout_s=1) == sent[0]
    assert adapter.drain() == sent[1:]
    assert adapter.receive(timeout_s=0.01) is None
    assert adapter.drain() == []


# --- choosing an adapter -----------------------------------------------------------------


def test_memory_is_the_development_default() -> None:
    assert isinstance(adapter_from_env({}), MemoryDoorbells)
    assert isinstance(adapter_from_env({"FAIRQUEUE_DOORBELLS": "memory"}), MemoryDoorbells)


def test_sqs_from_the_environment_reaches_the_queue(sqs_queue: SqsQueues) -> None:
    env = {"FAIRQUEUE_DOORBELLS": "sqs", "FAIRQUEUE_DOORBELL_QUEUE_URL": sqs_queue.url}
    adapter = adapter_from_env(env)
    try:
        assert isinstance(adapter, SqsDoorbells)
        assert adapter.name == "sqs"
        sent = bells(2)
        assert adapter.publish(sent) == []
    finally:
        adapter.close()
    assert {Doorbell.parse(body) for body in receive_all(sqs_queue.url, 2)} == set(sent)


def test_postgres_from_the_environment_uses_the_given_connection(
    conn: psycopg.Connection[Any],
) -> None:
    env = {"FAIRQUEUE_DOORBELLS": "postgres", "FAIRQUEUE_ENV": "production"}
    adapter = adapter_from_env(env, conn=conn)
    assert isinstance(adapter, PostgresDoorbells)
    assert adapter.name == "postgres"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"FAIRQUEUE_DOORBELLS": "sqs"},
            "FAIRQUEUE_DOORBELLS=sqs needs FAIRQUEUE_DOORBELL_QUEUE_URL",
        ),
        (
            {"FAIRQUEUE_DOORBELLS": "sqs", "FAIRQUEUE_DOORBELL_QUEUE_URL": "doorbells"},
            "got 'doorbells'",
        ),
        ({"FAIRQUEUE_DOORBELLS": "postgres"}, "needs the database connection that enqueues"),
        (
            {"FAIRQUEUE_DOORBELLS": "kafka"},
            "FAIRQUEUE_DOORBELLS='kafka' is not one of: sqs, postgres, memory",
        ),
        ({"FAIRQUEUE_DOORBELLS": "SQS"}, "is not one of: sqs, postgres, memory"),
    ],
)
def test_a_bad_choice_is_a_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        adapter_from_env(env)


def test_production_refuses_the_in_memory_adapter() -> None:
    env = {"FAIRQUEUE_ENV": "production", "FAIRQUEUE_DOORBELLS": "memory"}
    with pytest.raises(ConfigurationError) as caught:
        adapter_from_env(env)
    text = str(caught.value)
    assert "FAIRQUEUE_DOORBELLS=memory is refused when FAIRQUEUE_ENV=production" in text
    assert "sqs or postgres" in text


def test_production_refuses_the_default_too() -> None:
    with pytest.raises(ConfigurationError, match="FAIRQUEUE_DOORBELLS is not set"):
        adapter_from_env({"FAIRQUEUE_ENV": "production"})

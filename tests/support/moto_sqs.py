"""SQS for tests: a moto server on loopback, spoken to over real HTTP.

Use it from a test module with ``pytest_plugins = ["support.moto_sqs"]`` (and import nothing
else from it at run time: pytest must import it first to rewrite its asserts), then ask for
``sqs_queue`` (a fresh queue with a dead-letter queue, and the AWS environment pointing at the
server), ``moto_server_url`` (the server alone) or ``closed_endpoint`` (a URL where nothing
listens).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from fairqueue.dev import pooler as local_pooler

REGION = "us-east-1"
MAX_RECEIVE_COUNT = 3


def wait_for_port(port: int, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


@pytest.fixture(scope="session")
def moto_server_url() -> Iterator[str]:
    """``moto_server`` (next to this Python) on a free loopback port, for the whole session."""
    port = local_pooler.free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if not wait_for_port(port):
            pytest.fail(f"moto_server did not accept connections on 127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


@pytest.fixture
def closed_endpoint() -> str:
    """A loopback URL where nothing listens: a queue service that is down."""
    return f"http://127.0.0.1:{local_pooler.free_port()}"


@dataclass(frozen=True)
class SqsQueues:
    endpoint: str
    url: str
    dlq_url: str
    dlq_arn: str


def aws_env(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """Fake credentials, the region, and the SQS endpoint boto3 will use."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", endpoint)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sqs_queue(monkeypatch: pytest.MonkeyPatch, moto_server_url: str) -> SqsQueues:
    """A fresh queue whose redrive policy sends a message to a fresh dead-letter queue after
    ``MAX_RECEIVE_COUNT`` receives; the environment points boto3 at the moto server."""
    aws_env(monkeypatch, moto_server_url)
    name = f"doorbells-{uuid.uuid4().hex[:12]}"
    client = boto3.client("sqs")
    try:
        dlq_url = client.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVE_COUNT)}
        url = client.create_queue(
            QueueName=name, Attributes={"RedrivePolicy": json.dumps(redrive)}
        )["QueueUrl"]
    finally:
        client.close()
    return SqsQueues(endpoint=moto_server_url, url=url, dlq_url=dlq_url, dlq_arn=dlq_arn)

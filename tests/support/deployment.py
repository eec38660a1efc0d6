"""template.yaml stood up on loopback for the functions' tests: a moto server for Secrets
Manager and SQS, an upstream service, a UDP socket where the X-Ray daemon would be, and each
function a process of its own with exactly the environment the template gives it. A test
module takes the ``deployment`` fixture with
``pytest_plugins = ["support.moto_sqs", "support.deployment_fixture"]``."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3

import fairqueue
from fairqueue.doorbells import Doorbell
from support.deployed import (
    REGION,
    DeployedFunction,
    FunctionProcess,
    Invocation,
    Stack,
    XRayDaemon,
    load_template,
    runtime_environment,
    scheduler_event,
    sqs_event,
)
from support.upstream_service import FakeService

TESTS = Path(__file__).resolve().parents[1]
PACKAGE_ROOT = Path(fairqueue.__file__).resolve().parents[1]
# Every function the template deploys, by logical id.
FUNCTIONS = (
    "CronFunction",
    "WorkerFunction",
    "SweeperFunction",
    "BackstopFunction",
    "AdmitFunction",
)


class Deployment:
    """template.yaml stood up on loopback: one secret, the doorbell queues, an upstream."""

    def __init__(self, dsn: str, endpoint: str, workdir: Path) -> None:
        self.endpoint = endpoint
        self.workdir = workdir
        self.secrets = self._client("secretsmanager")
        self.sqs = self._client("sqs")
        self.secret_arn = self.secret(dsn)
        name = f"doorbells-{uuid.uuid4().hex[:12]}"
        properties = load_template()["Resources"]["DoorbellQueue"]["Properties"]
        self.dlq_url = self.sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        self.dlq_arn = self._arn(self.dlq_url)
        redrive = {
            "deadLetterTargetArn": self.dlq_arn,
            "maxReceiveCount": str(properties["RedrivePolicy"]["maxReceiveCount"]),
        }
        self.queue_name = name
        self.queue_url = self.sqs.create_queue(
            QueueName=name,
            Attributes={
                "VisibilityTimeout": str(properties["VisibilityTimeout"]),
                "RedrivePolicy": json.dumps(redrive),
            },
        )["QueueUrl"]
        self.queue_arn = self._arn(self.queue_url)
        # Where !GetAtt DatabaseProxy.Endpoint points when a test deploys with the RDS Proxy.
        self.proxy_endpoint = "fairqueue.proxy-0123.us-east-1.rds.amazonaws.com"
        self.upstream = FakeService()
        self.xray = XRayDaemon()
        self.processes: list[FunctionProcess] = []

    def _client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def _arn(self, queue_url: str) -> str:
        attributes = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    def secret(self, value: str) -> str:
        """A new secret holding ``value``; its ARN."""
        created = self.secrets.create_secret(
            Name=f"fairqueue/db-{uuid.uuid4().hex[:8]}", SecretString=value
        )
        return str(created["ARN"])

    def _parameters(self, *, defaults: bool, **overrides: str) -> dict[str, str]:
        """The parameters of a deploy: with ``defaults``, only the database secret (which has
        a local stand-in) and ``overrides``, the template's defaults for the rest; else the
        tests' full stage list with every part deployed (the upstream, the admission API)."""
        given = {"DatabaseSecretArn": self.secret_arn}
        if not defaults:
            given |= {
                "StagesSpec": "support.deployed_stages:PIPELINE",
                "JwtIssuer": "https://issuer.example.com",
                "JwtAudience": "fairqueue-client",
                "UpstreamUrl": self.upstream.url,
            }
        return given | overrides

    def stack(
        self, *, defaults: bool = False, check_rules: bool = True, **parameters: str
    ) -> Stack:
        """The template deployed with ``parameters`` (see :meth:`_parameters`); raises
        :class:`~support.deployed.DeployRefused` where CloudFormation would refuse it."""
        return Stack(
            parameters=self._parameters(defaults=defaults, **parameters),
            check_rules=check_rules,
            refs={"DoorbellQueue": self.queue_url, "DoorbellDeadLetterQueue": self.dlq_url},
            attributes={
                ("DoorbellQueue", "QueueName"): self.queue_name,
                ("DoorbellQueue", "Arn"): self.queue_arn,
                ("DoorbellDeadLetterQueue", "Arn"): self.dlq_arn,
                ("DatabaseProxy", "Endpoint"): self.proxy_endpoint,
            },
        )

    def start(
        self, logical_id: str, *, defaults: bool = False, **parameters: str
    ) -> FunctionProcess:
        """A cold start of the function, with the environment the template gives it, that
        must succeed."""
        process = self.cold_start(self.stack(defaults=defaults, **parameters).function(logical_id))
        assert process.init_error is None, process.init_error
        return process

    def cold_start(self, function: DeployedFunction) -> FunctionProcess:
        """A cold start of ``function``; its ``init_error`` says whether it failed."""
        environment = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.workdir),
            "PYTHONUNBUFFERED": "1",
            # The package under test (whichever checkout this test process imports it from),
            # and the function's own code: a stage list the template's StagesSpec may name.
            "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), str(TESTS)]),
            # The role's credentials, as Lambda passes them.
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_CONFIG_FILE": str(self.workdir / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.workdir / "no-aws-credentials"),
            # The stand-ins for the AWS endpoints and the X-Ray daemon.
            "AWS_ENDPOINT_URL_SQS": self.endpoint,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": self.endpoint,
            "AWS_XRAY_DAEMON_ADDRESS": self.xray.address,
            **runtime_environment(function),
            **function.environment,
        }
        process = FunctionProcess(function, environment, self.workdir)
        self.processes.append(process)
        return process

    def invoke(self, process: FunctionProcess, event: Any, **options: Any) -> Invocation:
        return process.invoke(event, xray=self.xray, **options)

    def tick(self, logical_id: str, *, late_s: float = 0.0) -> dict[str, Any]:
        """The input the function's schedule sends for one tick, ``late_s`` after it was due."""
        function = self.stack().function(logical_id)
        assert function.schedule_input is not None, f"{logical_id} has no schedule Input"
        due = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=late_s)
        arn = f"arn:aws:scheduler:{REGION}:123456789012:schedule/default/{logical_id}-tick"
        return scheduler_event(function.schedule_input, schedule_arn=arn, scheduled_time=due)

    def doorbells(self, bodies: list[str]) -> dict[str, Any]:
        return sqs_event(bodies, queue_arn=self.queue_arn)

    def received_doorbells(self) -> list[Doorbell]:
        found = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        return [Doorbell.parse(message["Body"]) for message in found.get("Messages", [])]

    def close(self) -> None:
        for process in self.processes:
            process.close()
        self.upstream.stop()
        self.xray.close()
        self.secrets.close()
        self.sqs.close()

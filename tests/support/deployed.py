"""The functions as template.yaml deploys them: environment, timeout and events, read from the
template and from AWS's own event generator, not written out by hand here.

``Stack`` reads template.yaml with its intrinsic functions and resolves what a function's
environment needs: parameters (given, else their defaults), conditions, ``Ref`` and
``GetAtt`` of the resources the tests stand up locally (the secret, the queues), and
``AWS::NoValue``. Anything it does not know raises, so a template change that the stand-ins do
not cover fails the tests instead of being skipped. What CloudFormation checks before it
creates anything is checked too, and refused as it would refuse the deploy
(:class:`DeployRefused`): a parameter with no value and no default, a value outside its
``AllowedValues`` or ``AllowedPattern``, and the template's ``Rules``.

The events are ``sam local generate-event`` output kept in ``tests/events`` (a test checks they
still match the generator); these helpers fill in the parts each test sets (bodies, routes,
claims), the way SQS, API Gateway and EventBridge Scheduler fill them in.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = ROOT / "template.yaml"
EVENTS = ROOT / "tests" / "events"

# The generator commands behind each kept event (``sam local generate-event <service> <event>``).
GENERATED_EVENTS = {
    "sqs-receive-message.json": ("sqs", "receive-message"),
    "cloudwatch-scheduled-event.json": ("cloudwatch", "scheduled-event"),
    "apigateway-http-api-proxy.json": ("apigateway", "http-api-proxy"),
}

ACCOUNT = "123456789012"
REGION = "us-east-1"
STACK_NAME = "fairqueue-local"


class _TemplateLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags read as their long forms (``!Ref X`` is
    ``{"Ref": "X"}``, ``!If [...]`` is ``{"Fn::If": [...]}``)."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_TemplateLoader.add_multi_constructor("!", _intrinsic)


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    document = yaml.load(path.read_text(), Loader=_TemplateLoader)
    assert isinstance(document, dict)
    return document


class DeployRefused(Exception):
    """What CloudFormation answers, before creating anything, to a deploy it refuses."""


class _NoValue:
    """``AWS::NoValue``: the property or list item it stands for is left out."""


NO_VALUE = _NoValue()


@dataclass(frozen=True)
class DeployedFunction:
    """One function as deployed: where its handler is, how long it may run, its environment
    (the template's, plus what Lambda itself sets), and the input its schedule sends."""

    logical_id: str
    handler_file: Path
    handler_name: str
    timeout_s: float
    memory_mb: int
    environment: dict[str, str]
    schedule_input: str | None


@dataclass
class Stack:
    """template.yaml deployed onto local stand-ins."""

    parameters: dict[str, Any]
    refs: dict[str, str]
    attributes: dict[tuple[str, str], str]
    template: dict[str, Any] = field(default_factory=load_template)
    # False only to show what a rule guards against: the deploy as if it had no Rules.
    check_rules: bool = True

    def __post_init__(self) -> None:
        declared = self.template["Parameters"]
        unknown = set(self.parameters) - set(declared)
        assert not unknown, f"not parameters of the template: {sorted(unknown)}"
        missing = [
            name
            for name, spec in declared.items()
            if name not in self.parameters and "Default" not in spec
        ]
        if missing:
            # CloudFormation's own wording for a parameter left without a value.
            raise DeployRefused(f"Parameters: [{', '.join(missing)}] must have values")
        values: dict[str, Any] = {}
        for name, spec in declared.items():
            value = self.parameters.get(name, spec.get("Default"))
            _check_parameter(name, spec, str(value))
            if spec["Type"] == "CommaDelimitedList" and isinstance(value, str):
                value = value.split(",")
            values[name] = value
        self.parameters = values
        rules = self.template.get("Rules", {}) if self.check_rules else {}
        for rule in rules.values():
            if "RuleCondition" in rule and not self._truth(rule["RuleCondition"]):
                continue
            for assertion in rule["Assertions"]:
                if not self._truth(assertion["Assert"]):
                    raise DeployRefused(assertion["AssertDescription"])

    def deploys(self, logical_id: str) -> bool:
        """Whether the resource is created with these parameters (its Condition holds)."""
        condition = self.template["Resources"][logical_id].get("Condition")
        return condition is None or self.condition(condition)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref" or key.startswith("Fn::"):
                return self._function(key, argument)
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def _function(self, name: str, argument: Any) -> Any:
        if name == "Ref":
            return self._ref(argument)
        if name == "Fn::GetAtt":
            resource, attribute = argument
            key = (resource, attribute)
            assert key in self.attributes, f"no local stand-in for !GetAtt {resource}.{attribute}"
            return self.attributes[key]
        if name == "Fn::If":
            condition, if_true, if_false = argument
            return self.resolve(if_true if self.condition(condition) else if_false)
        if name == "Fn::Equals":
            left, right = (self.resolve(item) for item in argument)
            return left == right
        if name == "Fn::Not":
            (inner,) = argument
            return not self._truth(inner)
        if name == "Fn::And":
            return all(self._truth(inner) for inner in argument)
        if name == "Fn::Or":
            return any(self._truth(inner) for inner in argument)
        if name == "Fn::EachMemberEquals":
            items, expected = argument
            return all(item == expected for item in self.resolve(items))
        if name == "Fn::Join":
            separator, items = argument
            return separator.join(str(item) for item in self.resolve(items))
        raise AssertionError(f"the harness does not evaluate {name}")

    def _truth(self, value: Any) -> bool:
        if isinstance(value, dict) and set(value) == {"Condition"}:
            return self.condition(value["Condition"])
        resolved = self.resolve(value)
        assert isinstance(resolved, bool), f"not a condition: {value!r}"
        return resolved

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name == "AWS::Region":
            return REGION
        if name == "AWS::AccountId":
            return ACCOUNT
        if name == "AWS::StackName":
            return STACK_NAME
        if name in self.parameters:
            return self.parameters[name]
        assert name in self.refs, f"no local stand-in for !Ref {name}"
        return self.refs[name]

    def condition(self, name: str) -> bool:
        return self._truth(self.template["Conditions"][name])

    def function(self, logical_id: str) -> DeployedFunction:
        resource = self.template["Resources"][logical_id]
        assert resource["Type"] == "AWS::Serverless::Function", logical_id
        assert self.deploys(logical_id), f"{logical_id} is not deployed with these parameters"
        properties = resource["Properties"]
        defaults = self.template.get("Globals", {}).get("Function", {})
        variables = {
            **defaults.get("Environment", {}).get("Variables", {}),
            **properties.get("Environment", {}).get("Variables", {}),
        }
        environment = {
            name: str(value)
            for name, value in self.resolve(variables).items()
            if value is not NO_VALUE
        }
        module, _, attribute = properties["Handler"].rpartition(".")
        schedules = [
            event["Properties"].get("Input")
            for event in properties.get("Events", {}).values()
            if event["Type"] == "ScheduleV2"
        ]
        return DeployedFunction(
            logical_id=logical_id,
            handler_file=ROOT / properties["CodeUri"] / f"{module}.py",
            handler_name=attribute,
            timeout_s=float(properties.get("Timeout", defaults.get("Timeout", 3))),
            memory_mb=int(properties.get("MemorySize", defaults.get("MemorySize", 128))),
            environment=environment,
            schedule_input=schedules[0] if schedules else None,
        )


def _check_parameter(name: str, spec: dict[str, Any], value: str) -> None:
    """CloudFormation's checks of one parameter's value; a list's are of each member."""
    members = value.split(",") if spec["Type"] == "CommaDelimitedList" else [value]
    allowed = spec.get("AllowedValues")
    pattern = spec.get("AllowedPattern")
    for member in members:
        fits = (
            (allowed is None or member in [str(a) for a in allowed])
            and (pattern is None or re.fullmatch(pattern, member) is not None)
            and ("MinValue" not in spec or float(member) >= spec["MinValue"])
            and ("MaxValue" not in spec or float(member) <= spec["MaxValue"])
        )
        if not fits:
            reason = spec.get("ConstraintDescription", "must be a value the template allows")
            raise DeployRefused(f"Parameter '{name}' {reason}")


def runtime_environment(function: DeployedFunction) -> dict[str, str]:
    """What the Lambda runtime itself sets beside the template's variables."""
    name = f"{STACK_NAME}-{function.logical_id}"
    return {
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": f"2026/12/01/[$LATEST]{uuid.uuid4().hex}",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "LAMBDA_TASK_ROOT": str(function.handler_file.parent),
        "_HANDLER": f"{function.handler_file.stem}.{function.handler_name}",
    }


def generated_event(name: str) -> dict[str, Any]:
    """A kept ``sam local generate-event`` event, a fresh copy."""
    event = json.loads((EVENTS / name).read_text())
    assert isinstance(event, dict)
    return event


def scheduler_event(
    schedule_input: str,
    *,
    schedule_arn: str,
    scheduled_time: datetime | None = None,
) -> dict[str, Any]:
    """The schedule's ``Input`` with the ``<aws.scheduler.*>`` placeholders filled in, as
    EventBridge Scheduler fills them for each tick."""
    due = scheduled_time or datetime.now(UTC).replace(microsecond=0)
    filled = (
        schedule_input.replace("<aws.scheduler.execution-id>", str(uuid.uuid4()))
        .replace("<aws.scheduler.scheduled-time>", due.isoformat().replace("+00:00", "Z"))
        .replace("<aws.scheduler.schedule-arn>", schedule_arn)
    )
    assert "<aws.scheduler." not in filled, filled
    event = json.loads(filled)
    assert isinstance(event, dict)
    return event


def sqs_event(bodies: list[str], *, queue_arn: str) -> dict[str, Any]:
    """An SQS batch as Lambda's poller hands it over: the generator's record, once per body."""
    (record,) = generated_event("sqs-receive-message.json")["Records"]
    records = []
    for body in bodies:
        message = copy.deepcopy(record)
        message["messageId"] = str(uuid.uuid4())
        message["receiptHandle"] = base64.b64encode(uuid.uuid4().bytes).decode()
        message["body"] = body
        message["md5OfBody"] = hashlib.md5(body.encode()).hexdigest()
        message["eventSourceARN"] = queue_arn
        message["awsRegion"] = REGION
        records.append(message)
    return {"Records": records}


def http_api_event(
    method: str,
    route: str,
    path: str,
    *,
    claims: dict[str, str],
    body: Any = None,
) -> dict[str, Any]:
    """An HTTP API (payload 2.0) request on one of the template's routes, behind its JWT
    authorizer, made from the generator's event."""
    event = generated_event("apigateway-http-api-proxy.json")
    raw = b"" if body is None else json.dumps(body).encode()
    event.update(
        routeKey=route,
        rawPath=path,
        rawQueryString="",
        queryStringParameters=None,
        pathParameters=None,
        headers={"content-type": "application/json", "content-length": str(len(raw))},
        body=base64.b64encode(raw).decode() if raw else None,
        isBase64Encoded=bool(raw),
    )
    for absent in ("queryStringParameters", "pathParameters", "body"):
        if event[absent] is None:
            del event[absent]
    context = event["requestContext"]
    context.update(routeKey=route, requestId=str(uuid.uuid4()))
    context["http"].update(method=method, path=path)
    context["authorizer"]["jwt"]["claims"] = claims
    return event


class XRayDaemon:
    """A UDP socket where an X-Ray daemon would listen: it keeps every segment the functions
    send, so a test can read what a trace would hold."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.socket.getsockname()[1]}"

    def drain(self, wait_s: float = 0.2) -> list[dict[str, Any]]:
        """The segment documents sent since the last drain."""
        segments: list[dict[str, Any]] = []
        self.socket.settimeout(wait_s)
        while True:
            try:
                datagram, _ = self.socket.recvfrom(65536)
            except (TimeoutError, BlockingIOError):
                return segments
            # Each datagram is a header line, then one segment document.
            _, _, document = datagram.decode().partition("\n")
            segments.append(json.loads(document))

    def close(self) -> None:
        self.socket.close()


def trace_header() -> str:
    """An ``_X_AMZN_TRACE_ID`` as Lambda sets it for a sampled invocation."""
    root = f"1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]}"
    return f"Root={root};Parent={uuid.uuid4().hex[:16]};Sampled=1"


@dataclass(frozen=True)
class Invocation:
    """One invocation's outcome and everything the function printed meanwhile."""

    request_id: str
    answer: Any
    error_type: str | None
    error: str | None
    stdout: str
    stderr: str
    segments: list[dict[str, Any]]

    def lines(self) -> list[dict[str, Any]]:
        """Every stdout line as JSON; a line that is not JSON fails the test."""
        parsed = []
        for line in self.stdout.splitlines():
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError:
                raise AssertionError(f"a line of plain text in the log: {line!r}") from None
        return parsed

    @property
    def logs(self) -> list[dict[str, Any]]:
        """The log lines (not the embedded metrics)."""
        return [line for line in self.lines() if "_aws" not in line]

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """The embedded-metric-format records."""
        return [line for line in self.lines() if "_aws" in line]

    def metric(self, name: str) -> float:
        """The one value of metric ``name`` published by this invocation."""
        values = [record[name] for record in self.metrics if name in record]
        assert len(values) == 1, f"{name}: {values}"
        value = values[0][0] if isinstance(values[0], list) else values[0]
        return float(value)

    def messages(self) -> list[str]:
        return [str(line.get("message")) for line in self.logs]


class FunctionProcess:
    """A warm execution environment of one function: its own process, cold-started once."""

    def __init__(
        self, function: DeployedFunction, environment: dict[str, str], workdir: Path
    ) -> None:
        self.function = function
        self._stdout = open(workdir / f"{function.logical_id}.stdout", "w+")  # noqa: SIM115
        self._stderr = open(workdir / f"{function.logical_id}.stderr", "w+")  # noqa: SIM115
        read_end, write_end = os.pipe()
        self._process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve().parent / "lambda_runtime.py"),
                str(function.handler_file),
                function.handler_name,
                str(write_end),
            ],
            stdin=subprocess.PIPE,
            stdout=self._stdout,
            stderr=self._stderr,
            env=environment,
            cwd=function.handler_file.parent,
            pass_fds=(write_end,),
            text=True,
        )
        os.close(write_end)
        self._results = os.fdopen(read_end)
        started = self._reply(timeout_s=60)
        self.init_error: str | None = started.get("init_error")

    def _reply(self, timeout_s: float) -> dict[str, Any]:
        ready, _, _ = select.select([self._results], [], [], timeout_s)
        assert ready, f"{self.function.logical_id} did not answer within {timeout_s} s"
        line = self._results.readline()
        assert line, f"{self.function.logical_id} exited: {self._read(self._stderr, 0)}"
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply

    @staticmethod
    def _read(stream: Any, offset: int) -> str:
        stream.flush()
        stream.seek(offset)
        text = stream.read()
        assert isinstance(text, str)
        return text

    def invoke(
        self,
        event: Any,
        *,
        xray: XRayDaemon,
        timeout_s: float | None = None,
    ) -> Invocation:
        """Invoke as Lambda does; ``timeout_s`` (default: the template's) is the time left."""
        assert self.init_error is None, self.init_error
        assert self._process.stdin is not None
        out_at, err_at = self._stdout.seek(0, 2), self._stderr.seek(0, 2)
        xray.drain(wait_s=0)
        left = self.function.timeout_s if timeout_s is None else timeout_s
        request = {"event": event, "timeout_s": left, "trace_id": trace_header()}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        reply = self._reply(timeout_s=left + 30)
        return Invocation(
            request_id=reply["request_id"],
            answer=reply.get("answer"),
            error_type=reply.get("error_type"),
            error=reply.get("error"),
            stdout=self._read(self._stdout, out_at),
            stderr=self._read(self._stderr, err_at),
            segments=xray.drain(),
        )

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._results.close()
        self._stdout.close()
        self._stderr.close()

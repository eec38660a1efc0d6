"""template.yaml deployed with its defaults: every function it creates starts and works, and
what would not is refused by CloudFormation before anything is created, naming the parameter.

The defaults leave one choice to the deployer, their stage list (``StagesSpec`` has none);
here that is ``support.deployed_stages:STAGES``, a stage list that needs no upstream. Without
``JwtIssuer`` the admission API is not deployed at all: checked on the template as SAM
transforms it.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from fairqueue import enqueue
from fairqueue.db import Connection
from fairqueue.doorbells import Doorbell
from support import deployed_stages  # noqa: F401 - declares slow_bell for enqueue
from support.deployed import REGION, DeployRefused, Stack, load_template
from support.deployment import Deployment
from support.rows import job, runs

pytest_plugins = ["support.moto_sqs", "support.deployment_fixture"]

# The deployer's own stage list, the one parameter the defaults leave to them.
OWN_STAGES = "support.deployed_stages:STAGES"
ADMISSION_API = {"JwtIssuer": "https://issuer.example.com", "JwtAudience": "fairqueue-client"}
# The scheduled functions that record their tick as a run row, and their closing log line.
RUN_ROWS = {"CronFunction": "run closed", "SweeperFunction": "sweep closed"}


def test_a_deploy_that_names_no_stage_list_is_refused_naming_stages_spec(
    deployment: Deployment,
) -> None:
    with pytest.raises(DeployRefused) as refused:
        deployment.stack(defaults=True)
    assert str(refused.value) == "Parameters: [StagesSpec] must have values"


@pytest.mark.parametrize("spec", ["fairqueue.dev.example:STAGES", "fairqueue.dev:STAGES"])
def test_a_development_stage_list_is_refused_naming_stages_spec(
    deployment: Deployment, spec: str
) -> None:
    """The layer leaves fairqueue.dev out: its stage lists could only fail at cold start."""
    with pytest.raises(DeployRefused) as refused:
        deployment.stack(defaults=True, StagesSpec=spec, UpstreamUrl=deployment.upstream.url)
    assert str(refused.value) == (
        "Parameter 'StagesSpec' must look like module:attribute, e.g. my_stages:STAGES, and"
        " name your own stage list (fairqueue.dev, the bundled example's, is development code"
        " that the layer leaves out)."
    )
    own = deployment.stack(defaults=True, StagesSpec="fairqueue_devices:STAGES")
    assert (
        own.function("CronFunction").environment["FAIRQUEUE_STAGES"] == "fairqueue_devices:STAGES"
    )


@pytest.mark.parametrize(
    ("parameters", "named"),
    [
        ({"StagesSpec": "my_stages"}, "StagesSpec"),
        ({"CronIntervalMinutes": "3"}, "CronIntervalMinutes"),
        ({"WorkerMaxConcurrency": "1"}, "WorkerMaxConcurrency"),
        ({"WorkerBatchSize": "11"}, "WorkerBatchSize"),
        ({"WorkerBatchingWindowSeconds": "61"}, "WorkerBatchingWindowSeconds"),
        ({"JwtIssuer": "http://issuer.example.com"}, "JwtIssuer"),
        ({"JwtIssuer": "https://issuer.example.com"}, "JwtAudience"),
        ({"JwtAudience": "fairqueue-client"}, "JwtIssuer"),
    ],
)
def test_a_bad_or_half_given_parameter_is_refused_by_name(
    deployment: Deployment, parameters: dict[str, str], named: str
) -> None:
    with pytest.raises(DeployRefused) as refused:
        deployment.stack(defaults=True, **({"StagesSpec": OWN_STAGES} | parameters))
    assert named in str(refused.value)


def test_by_default_the_doorbell_queue_invokes_the_worker_without_waiting_to_fill_a_batch(
    deployment: Deployment,
) -> None:
    stack = deployment.stack(defaults=True, StagesSpec=OWN_STAGES)
    worker = stack.template["Resources"]["WorkerFunction"]["Properties"]
    source = stack.resolve(worker["Events"]["Doorbells"]["Properties"])
    assert (source["MaximumBatchingWindowInSeconds"], source["BatchSize"]) == (0, 10)
    wider = deployment.stack(
        defaults=True, StagesSpec=OWN_STAGES, WorkerBatchingWindowSeconds="5", WorkerBatchSize="4"
    )
    source = wider.resolve(worker["Events"]["Doorbells"]["Properties"])
    assert (source["MaximumBatchingWindowInSeconds"], source["BatchSize"]) == ("5", "4")


@pytest.mark.parametrize("logical_id", sorted(RUN_ROWS))
def test_with_the_defaults_the_cron_function_and_the_sweeper_start_and_close_their_tick(
    deployment: Deployment, conn: Connection, logical_id: str
) -> None:
    stack = deployment.stack(defaults=True, StagesSpec=OWN_STAGES)
    environment = stack.function(logical_id).environment
    assert environment["FAIRQUEUE_ENV"] == "production"
    assert "FAIRQUEUE_UPSTREAM_URL" not in environment
    function = deployment.start(logical_id, defaults=True, StagesSpec=OWN_STAGES)

    ticked = deployment.invoke(function, deployment.tick(logical_id))

    assert ticked.error is None, ticked.error
    assert ticked.stderr == ""
    assert ticked.logs[-1]["message"] == RUN_ROWS[logical_id]
    (row,) = runs(conn)
    assert str(row["id"]) == ticked.answer["runId"]
    assert row["finished_at"] is not None
    assert row["error"] is None


def test_with_the_defaults_the_backstop_starts_and_finishes_its_pass(
    deployment: Deployment,
) -> None:
    backstop = deployment.start("BackstopFunction", defaults=True, StagesSpec=OWN_STAGES)

    swept = deployment.invoke(backstop, deployment.tick("BackstopFunction"))

    assert swept.error is None, swept.error
    assert swept.stderr == ""
    assert swept.logs[-1]["message"] == "backstop swept"
    assert (swept.answer["written"], swept.answer["interrupted"]) == (0, False)


def test_with_the_defaults_the_cron_function_runs_the_deployers_stage(
    deployment: Deployment, conn: Connection
) -> None:
    queued = enqueue(conn, "slow_bell", {"n": 1}, tenant_id="t-defaults")
    assert queued is not None
    cron = deployment.start("CronFunction", defaults=True, StagesSpec=OWN_STAGES)

    ran = deployment.invoke(cron, deployment.tick("CronFunction"))

    assert ran.error is None, ran.error
    assert (ran.answer["jobsDone"], ran.answer["stopReason"]) == (1, "no_work")
    assert job(conn, queued)["status"] == "done"


def test_with_the_defaults_the_worker_starts_and_runs_a_doorbell(
    deployment: Deployment, conn: Connection
) -> None:
    queued = enqueue(conn, "slow_bell", {"n": 2}, tenant_id="t-defaults")
    assert queued is not None
    worker = deployment.start("WorkerFunction", defaults=True, StagesSpec=OWN_STAGES)
    bell = Doorbell(job_id=queued, tenant_id="t-defaults").to_json()

    answered = deployment.invoke(worker, deployment.doorbells([bell]))

    assert answered.error is None, answered.error
    assert answered.answer == {"batchItemFailures": []}
    assert answered.logs[-1]["message"] == "doorbells handled"
    assert job(conn, queued)["status"] == "done"


def test_with_the_defaults_there_is_no_admission_function(deployment: Deployment) -> None:
    assert not deployment.stack(defaults=True, StagesSpec=OWN_STAGES).deploys("AdmitFunction")
    with_api = deployment.stack(defaults=True, StagesSpec=OWN_STAGES, **ADMISSION_API)
    assert with_api.deploys("AdmitFunction")
    assert with_api.function("AdmitFunction").environment["FAIRQUEUE_TENANT_CLAIM"] == "tenant_id"


def transformed() -> dict[str, Any]:
    """template.yaml as SAM's translator turns it into plain CloudFormation (as `sam build`
    and cfn-lint do), with the local code folders given stand-in S3 locations."""
    template = copy.deepcopy(load_template())
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in properties:
                properties[key] = "s3://bucket/key"
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    # No policy map given: the translator's bundled ARNs of the managed policies, offline.
    document = Translator(managed_policy_map=None, sam_parser=Parser()).translate(
        sam_template=template, parameter_values={}
    )
    assert isinstance(document, dict)
    return document


def deployed_resources(template: dict[str, Any], **parameters: str) -> dict[str, str]:
    """The resources (by logical id, their types) created with ``parameters``."""
    given = {"DatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:db"}
    stack = Stack(parameters=given | parameters, refs={}, attributes={}, template=template)
    return {
        logical_id: resource["Type"]
        for logical_id, resource in template["Resources"].items()
        if stack.deploys(logical_id)
    }


def test_left_out_the_admission_api_leaves_no_http_api_in_the_transformed_template() -> None:
    template = transformed()

    without = deployed_resources(template, StagesSpec=OWN_STAGES)
    with_api = deployed_resources(template, StagesSpec=OWN_STAGES, **ADMISSION_API)

    assert not [t for t in without.values() if t.startswith("AWS::ApiGatewayV2::")]
    assert not [name for name in without if name.startswith("Admit")]
    added = {name: t for name, t in with_api.items() if name not in without}
    assert set(without) < set(with_api)
    assert added["AdmitApi"] == "AWS::ApiGatewayV2::Api"
    assert added["AdmitFunction"] == "AWS::Lambda::Function"
    assert set(added.values()) == {
        "AWS::ApiGatewayV2::Api",
        "AWS::ApiGatewayV2::Stage",
        "AWS::IAM::Role",
        "AWS::Lambda::Function",
        "AWS::Lambda::Permission",
        "AWS::Logs::LogGroup",
    }
    outputs = template["Outputs"]
    assert {
        name for name, output in outputs.items() if output.get("Condition") == "HasAdmissionApi"
    } == {name for name in outputs if name.startswith("Admit")}


def test_the_cron_interval_sets_the_schedule_and_the_not_running_alarm() -> None:
    template = load_template()
    intervals = template["Mappings"]["CronIntervals"]
    allowed = template["Parameters"]["CronIntervalMinutes"]["AllowedValues"]
    assert sorted(intervals, key=int) == [str(minutes) for minutes in allowed]
    for minutes, entry in intervals.items():
        unit = "hour" if int(minutes) == 60 else "minute"
        count = 1 if int(minutes) == 60 else int(minutes)
        assert entry["Schedule"] == f"rate({count} {unit}{'' if count == 1 else 's'})"
        assert entry["AlarmPeriod"] == int(minutes) * 60
    resources = template["Resources"]
    tick = resources["CronFunction"]["Properties"]["Events"]["Tick"]["Properties"]
    interval = ["CronIntervals", {"Ref": "CronIntervalMinutes"}]
    assert tick["ScheduleExpression"] == {"Fn::FindInMap": [*interval, "Schedule"]}
    alarm = resources["CronNotRunningAlarm"]["Properties"]
    assert alarm["Period"] == {"Fn::FindInMap": [*interval, "AlarmPeriod"]}
    assert template["Parameters"]["CronIntervalMinutes"]["Default"] == 5

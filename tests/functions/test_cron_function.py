"""The cron Lambda (functions/cron.py) loaded and invoked as the local runner does it.

The handler gets EventBridge's real input and a context whose remaining time really counts
down; the database is real. What Lambda would see is checked: the answer, the runs row, the
EMF metrics printed on stdout.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from fairqueue import ConfigurationError, define_quota, enqueue
from fairqueue.db import Connection
from fairqueue.dev.lambda_loop import Handler, LocalContext, load_handler, scheduled_event
from support import cron_stages
from support.databases import ROOT
from support.rows import job, runs

HANDLER_SPEC = f"{ROOT / 'functions' / 'cron.py'}:handler"
ANSWER_KEYS = {"runId", "stopReason", "jobsDone", "jobsFailed", "jobsDeferred", "units", "error"}

LoadCron = Callable[..., Handler]


@pytest.fixture
def load_cron(dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoadCron]:
    """Loads cron.py afresh (module-level STAGES and connection cache) under a Lambda-like env."""
    loaded: list[Handler] = []

    def load(stages: str = "support.cron_stages:STAGES") -> Handler:
        monkeypatch.setenv("DATABASE_URL", dsn)
        monkeypatch.setenv("FAIRQUEUE_STAGES", stages)
        monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "fairqueue-cron")
        monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "fairqueue")
        monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
        monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
        handler = load_handler(HANDLER_SPEC)
        loaded.append(handler)
        # powertools binds its log handler to the sys.stdout of the first Logger() of the
        # process; point it at this test's stdout, or it writes to an earlier test's closed one.
        for log_handler in logging.getLogger("fairqueue-cron").handlers:
            if isinstance(log_handler, logging.StreamHandler):
                log_handler.stream = sys.stdout  # not setStream: it flushes the closed one
        return handler

    cron_stages.reset()
    yield load
    # Lambda keeps the cached connection for the next invocation; a test must close it.
    for handler in loaded:
        inspect.unwrap(handler).__globals__["CONNECTION"].close()


def add(conn: Connection, job_type: str, payload: dict[str, Any], **options: Any) -> UUID:
    """Enqueue a job that must be new; its id."""
    job_id = enqueue(conn, job_type, payload, **options)
    assert job_id is not None
    return job_id


def emf_records(out: str) -> list[dict[str, Any]]:
    """The CloudWatch embedded-metric-format objects among the printed lines."""
    records = []
    for line in out.splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "_aws" in data:
            records.append(data)
    return records


def metric_value(record: dict[str, Any], name: str) -> float:
    """One metric's value; EMF may carry it as a number or as a list of one."""
    value = record[name]
    if isinstance(value, list):
        assert len(value) == 1, value
        value = value[0]
    return float(value)


def metric_names(record: dict[str, Any]) -> set[str]:
    return {m["Name"] for d in record["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}


def dimension_sets(record: dict[str, Any]) -> list[list[str]]:
    return [dims for d in record["_aws"]["CloudWatchMetrics"] for dims in d["Dimensions"]]


def test_scheduler_input_runs_every_stage_and_answers_like_lambda(
    load_cron: LoadCron, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    define_quota(conn, cron_stages.QUOTA, capacity=100, period=timedelta(hours=1))
    done = [add(conn, "cronfn_echo", {"n": n}) for n in range(3)]
    spent = [add(conn, "cronfn_spend", {"n": n}) for n in range(2)]
    failed = add(conn, "cronfn_broken", {})
    deferred = add(conn, "cronfn_later", {})
    handler = load_cron()
    capsys.readouterr()

    answer = handler(scheduled_event(), LocalContext())

    assert set(answer) == ANSWER_KEYS
    assert answer["stopReason"] == "no_work"
    assert answer["error"] is None
    assert (answer["jobsDone"], answer["jobsFailed"], answer["jobsDeferred"]) == (5, 1, 1)
    assert answer["units"] == 4  # two spend jobs, two units each
    (row,) = runs(conn)
    assert str(row["id"]) == answer["runId"]
    assert row["trigger"] == "schedule"
    assert row["stop_reason"] == "no_work"
    assert row["finished_at"] is not None
    assert row["error"] is None
    assert (row["jobs_done"], row["jobs_failed"], row["jobs_deferred"], row["quota_units"]) == (
        5,
        1,
        1,
        4,
    )
    for job_id in [*done, *spent]:
        assert job(conn, job_id)["status"] == "done"
    assert job(conn, failed)["status"] == "failed"
    later = job(conn, deferred)
    assert (later["status"], later["attempts"]) == ("pending", 0)

    records = emf_records(capsys.readouterr().out)
    runs_metrics = [r for r in records if "Runs" in metric_names(r)]
    assert len(runs_metrics) == 1, records
    (run_metric,) = runs_metrics
    assert run_metric["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "fairqueue"
    assert any("StopReason" in dims for dims in dimension_sets(run_metric))
    assert run_metric["StopReason"] == "no_work"
    assert metric_value(run_metric, "Runs") == 1
    (flushed,) = [r for r in records if "JobsDone" in metric_names(r)]
    assert metric_value(flushed, "JobsDone") == 5
    assert metric_value(flushed, "JobsFailed") == 1
    assert metric_value(flushed, "JobsDeferred") == 1
    assert metric_value(flushed, "QuotaUnits") == 4


def test_a_classic_eventbridge_rule_event_is_a_schedule_trigger(
    load_cron: LoadCron, conn: Connection
) -> None:
    handler = load_cron()
    event = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2024-05-01T03:00:00Z",
        "region": "eu-west-1",
        "resources": ["arn:aws:events:eu-west-1:123456789012:rule/fairqueue-cron"],
        "detail": {},
    }
    answer = handler(event, LocalContext())
    assert answer["stopReason"] == "no_work"
    (row,) = runs(conn)
    assert (row["trigger"], row["stop_reason"]) == ("schedule", "no_work")
    assert str(row["id"]) == answer["runId"]


def test_an_empty_event_is_a_direct_invoke(load_cron: LoadCron, conn: Connection) -> None:
    add(conn, "cronfn_echo", {})
    handler = load_cron()
    answer = handler({}, LocalContext())
    assert (answer["stopReason"], answer["jobsDone"]) == ("no_work", 1)
    (row,) = runs(conn)
    assert (row["trigger"], row["jobs_done"]) == ("invoke", 1)


# The handler raises before any metric is added; powertools then warns that it has nothing to
# publish, which this suite's warnings-as-errors would turn into the error under test.
@pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
@pytest.mark.parametrize(
    ("event", "message"),
    [
        ([], "must be a JSON object, got list"),
        (["executionId", "x"], "must be a JSON object, got list"),
        ("tick", "must be a JSON object, got str"),
        ({"time_budget_s": -1}, "time_budget_s"),
        ({"time_budget_s": 10_000}, "time_budget_s"),
        ({"scheduledTime": "around three"}, "scheduledTime"),
        ({"trigger": "x" * 65}, "trigger"),
    ],
)
def test_a_malformed_event_is_a_configuration_error_and_writes_no_run(
    load_cron: LoadCron, conn: Connection, event: Any, message: str
) -> None:
    add(conn, "cronfn_echo", {})
    handler = load_cron()
    with pytest.raises(ConfigurationError, match="the scheduled event") as raised:
        handler(event, LocalContext())
    assert message in str(raised.value)
    assert runs(conn) == []
    assert cron_stages.seen() == []


def test_a_run_with_less_time_left_than_a_batch_needs_claims_nothing(
    load_cron: LoadCron, conn: Connection
) -> None:
    slow = add(conn, "cronfn_slow", {})
    handler = load_cron("support.cron_stages:SLOW_STAGES")
    # 16 s left, 15 s kept back for closing the run: about 1 s, and the stage's batch needs 5 s.
    answer = handler(scheduled_event(), LocalContext(timeout_s=16))
    assert answer["stopReason"] == "time_budget"
    assert (answer["jobsDone"], answer["jobsFailed"], answer["jobsDeferred"]) == (0, 0, 0)
    assert cron_stages.seen() == []
    row = job(conn, slow)
    assert (row["status"], row["attempts"], row["locked_by"], row["run_id"]) == (
        "pending",
        0,
        None,
        None,
    )
    (run,) = runs(conn)
    assert (run["stop_reason"], run["trigger"]) == ("time_budget", "schedule")
    assert run["finished_at"] is not None


def test_a_slow_stage_with_no_work_does_not_stop_the_stages_after_it(
    load_cron: LoadCron, conn: Connection
) -> None:
    # DESIGN: the loop picks the first stage *that has claimable work*, then asks whether its
    # batch fits. Here the slow stage (5 s batches) is empty and the echo stage after it needs
    # no time bound, so ~1 s of budget is enough to do the echo job.
    echo = add(conn, "cronfn_echo", {})
    handler = load_cron("support.cron_stages:SLOW_FIRST_STAGES")
    answer = handler(scheduled_event(), LocalContext(timeout_s=16))
    assert job(conn, echo)["status"] == "done"
    assert (answer["stopReason"], answer["jobsDone"]) == ("no_work", 1)


def test_the_closed_run_row_keeps_the_budget_and_host_it_opened_with(
    load_cron: LoadCron, conn: Connection
) -> None:
    handler = load_cron()
    handler(scheduled_event(), LocalContext(timeout_s=60))
    (run,) = runs(conn)
    assert run["finished_at"] is not None
    # The run was opened with {"budget_s", "host"}; closing must not throw them away.
    assert 0 < run["summary"].get("budget_s", -1) <= 45
    assert run["summary"].get("host")
    assert "stages" in run["summary"]


def test_a_broken_cached_connection_is_replaced(load_cron: LoadCron, conn: Connection) -> None:
    handler = load_cron()
    first = handler(scheduled_event(), LocalContext())
    assert first["stopReason"] == "no_work"

    others = (
        "select pid from pg_stat_activity"
        " where datname = current_database() and pid <> pg_backend_pid()"
    )
    (cached,) = conn.execute(others).fetchall()  # the connection Lambda keeps warm
    conn.execute("select pg_terminate_backend(%s)", (cached["pid"],))
    echo = add(conn, "cronfn_echo", {})

    second = handler(scheduled_event(), LocalContext())

    assert second["stopReason"] == "no_work"
    assert second["error"] is None
    assert second["jobsDone"] == 1
    assert job(conn, echo)["status"] == "done"
    rows = runs(conn)
    assert [r["stop_reason"] for r in rows] == ["no_work", "no_work"]
    assert [str(r["id"]) for r in rows] == [first["runId"], second["runId"]]
    (replacement,) = conn.execute(others).fetchall()
    assert replacement["pid"] != cached["pid"]

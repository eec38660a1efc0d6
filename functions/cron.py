"""The scheduled cron function: parse the event, run the pipeline, shape the answer."""

import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from fairqueue.roles.cron import CronAnswer, invoke
from fairqueue.roles.function import ScheduledEvent, function_setup, invocation_logging

logger = Logger()
metrics = Metrics()
tracer = Tracer()

CONNECTION, STAGES = function_setup(logger)


@logger.inject_lambda_context(clear_state=True)
@invocation_logging(logger)
# A run's answer and errors may carry tenant data: they go to the run row and the logs only.
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parsed = ScheduledEvent.parse(event)
    if parsed.correlation_id:
        logger.set_correlation_id(parsed.correlation_id)
    started = time.monotonic()
    result = invoke(CONNECTION, STAGES, parsed, context)
    metrics.add_metric(
        name="RunDuration", unit=MetricUnit.Seconds, value=time.monotonic() - started
    )
    metrics.add_metric(name="JobsDone", unit=MetricUnit.Count, value=result.jobs_done)
    metrics.add_metric(name="JobsFailed", unit=MetricUnit.Count, value=result.jobs_failed)
    metrics.add_metric(name="JobsDeferred", unit=MetricUnit.Count, value=result.jobs_deferred)
    metrics.add_metric(name="QuotaUnits", unit=MetricUnit.Count, value=result.units)
    # single_metric prints even when metrics are disabled (the local loop), hence the guard.
    if not is_metrics_disabled():
        with single_metric(
            name="Runs",
            unit=MetricUnit.Count,
            value=1,
            default_dimensions=metrics.default_dimensions,
        ) as run_metric:
            run_metric.add_dimension(name="StopReason", value=result.stop_reason)
    if result.stop_reason == "error":
        metrics.add_metric(name="RunErrors", unit=MetricUnit.Count, value=1)
        logger.error(
            "run stopped on an error", extra={"run_id": str(result.run_id), "error": result.error}
        )
    logger.info(
        "run closed", extra={"run_id": str(result.run_id), "stop_reason": result.stop_reason}
    )
    return CronAnswer.of(result).model_dump()

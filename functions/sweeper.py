"""The sweeper, every minute: ring stale doorbells, fail abandoned jobs, close abandoned runs,
make the schedules' due ticks, publish the backlog."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from fairqueue.roles.function import ScheduledEvent, function_setup, invocation_logging
from fairqueue.roles.sweeper import sweep

logger = Logger()
metrics = Metrics()
tracer = Tracer()

CONNECTION, STAGES = function_setup(logger)


@logger.inject_lambda_context(clear_state=True)
@invocation_logging(logger)
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    tick = ScheduledEvent.parse(event)
    if tick.correlation_id:
        logger.set_correlation_id(tick.correlation_id)
    conn = CONNECTION.get()
    result = sweep(CONNECTION.dsn, STAGES, conn=conn, summary=tick.schedule_context())
    backlog = {s.type: s.backlog for s in result.status}
    stuck = {s.type: s.stuck for s in result.status}
    metrics.add_metric(name="Republished", unit=MetricUnit.Count, value=result.republished)
    metrics.add_metric(name="AbandonedFailed", unit=MetricUnit.Count, value=result.abandoned_failed)
    metrics.add_metric(
        name="AbandonedRunsClosed", unit=MetricUnit.Count, value=result.abandoned_runs_closed
    )
    metrics.add_metric(name="Backlog", unit=MetricUnit.Count, value=sum(backlog.values()))
    metrics.add_metric(name="Stuck", unit=MetricUnit.Count, value=sum(stuck.values()))
    # single_metric prints even when metrics are disabled (the local loop), hence the guard.
    if not is_metrics_disabled():
        for job_type in backlog:
            for name, value in (("Backlog", backlog[job_type]), ("Stuck", stuck[job_type])):
                with single_metric(
                    name=name,
                    unit=MetricUnit.Count,
                    value=value,
                    default_dimensions=metrics.default_dimensions,
                ) as per_type:
                    per_type.add_dimension(name="JobType", value=job_type)
    answer = {
        "runId": str(result.run_id),
        "republished": result.republished,
        "ringFailures": result.ring_failures,
        "abandonedFailed": result.abandoned_failed,
        "lanesPromoted": result.lanes_promoted,
        "abandonedRunsClosed": result.abandoned_runs_closed,
        "owedGiveUpsFired": result.owed_give_ups_fired,
        "scheduleTicks": result.schedule_ticks,
        "backlog": backlog,
        "stuck": stuck,
    }
    logger.info("sweep closed", extra=answer)
    return answer

"""The backstop, every minute: save the results no client saved, fire the hooks still owed."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from fairqueue.pipeline.run import budget_seconds
from fairqueue.roles.backstop import Backstop
from fairqueue.roles.function import ScheduledEvent, function_setup, invocation_logging

logger = Logger()
metrics = Metrics()
tracer = Tracer()

CONNECTION, STAGES = function_setup(logger)
# The connection is the invocation's (CONNECTION.get()); the backstop holds the stages and
# the guard that keeps one container's sweeps from stacking.
BACKSTOP = Backstop(None, STAGES)


@logger.inject_lambda_context(clear_state=True)
@invocation_logging(logger)
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    tick = ScheduledEvent.parse(event)
    if tick.correlation_id:
        logger.set_correlation_id(tick.correlation_id)
    # The run's margin is kept back, so the batch in flight and its hooks can finish.
    budget_s = budget_seconds(float("inf"), context)
    result = BACKSTOP.rescue(budget_s=budget_s, conn=CONNECTION.get())
    if result is None:
        logger.info("backstop skipped: a sweep of this container is still in flight")
        return {"skipped": "a sweep of this container is still in flight"}
    metrics.add_metric(name="ResultsRescued", unit=MetricUnit.Count, value=result.written)
    metrics.add_metric(name="ResultHooksFired", unit=MetricUnit.Count, value=result.hooks_fired)
    metrics.add_metric(
        name="ResultRenderErrors", unit=MetricUnit.Count, value=len(result.render_errors)
    )
    answer = {
        "written": result.written,
        "refused": result.refused,
        "renderErrors": len(result.render_errors),
        "hooksFired": result.hooks_fired,
        "outputsTrimmed": result.outputs_trimmed,
        "jobsMoved": result.jobs_moved,
        "daysMade": result.days_made,
        "daysDropped": result.days_dropped,
        "daysSkipped": result.days_skipped,
        "tablesVacuumed": result.tables_vacuumed,
        "interrupted": result.interrupted,
    }
    logger.info("backstop swept", extra=answer)
    return answer

"""The doorbell worker: an SQS batch of doorbells, one run, a partial batch response."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from fairqueue.cron import function_setup
from fairqueue.doorbells import Doorbell
from fairqueue.worker import doorbell_run

logger = Logger()
metrics = Metrics()
tracer = Tracer()
processor = BatchProcessor(event_type=EventType.SQS)

CONNECTION, STAGES = function_setup()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    conn = CONNECTION.get()
    with doorbell_run(CONNECTION.dsn, STAGES, conn=conn) as run:

        def ring(record: SQSRecord) -> str:
            # A malformed body raises: that record alone is reported failed.
            return run.ring(Doorbell.parse(record.body))

        response = process_partial_response(
            event=event, record_handler=ring, processor=processor, context=context
        )
    result = run.pipeline.result()
    counters = run.pipeline.tally.counters
    metrics.add_metric(
        name="DoorbellsRan", unit=MetricUnit.Count, value=counters.get("doorbells_ran", 0)
    )
    metrics.add_metric(
        name="DoorbellsDropped", unit=MetricUnit.Count, value=counters.get("doorbells_dropped", 0)
    )
    metrics.add_metric(name="JobsDone", unit=MetricUnit.Count, value=result.jobs_done)
    metrics.add_metric(name="JobsFailed", unit=MetricUnit.Count, value=result.jobs_failed)
    logger.info("doorbells handled", extra={"run_id": str(result.run_id), **counters})
    return response

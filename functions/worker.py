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

from fairqueue.roles.function import function_setup, invocation_logging
from fairqueue.roles.worker import doorbell_run

logger = Logger()
metrics = Metrics()
tracer = Tracer()
# A batch whose every message failed is an answer like any other (all of them listed), not a
# function error that would back the queue's pollers off for everyone's doorbells.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

CONNECTION, STAGES = function_setup(logger)


@logger.inject_lambda_context(clear_state=True)
@invocation_logging(logger)
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    conn = CONNECTION.get()
    with doorbell_run(CONNECTION.dsn, STAGES, conn=conn, context=context) as doorbells:

        def ring(record: SQSRecord) -> str:
            # Raises for a message that fails: that record alone is reported, logged, counted.
            return doorbells.ring_message(record.message_id, record.body)

        response = process_partial_response(
            event=event, record_handler=ring, processor=processor, context=context
        )
    result = doorbells.run.result()
    counters = doorbells.run.tally.counters
    for name, counter in (
        ("DoorbellsRan", "doorbells_ran"),
        ("DoorbellsDropped", "doorbells_dropped"),
        ("DoorbellsFailed", "doorbells_failed"),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=counters.get(counter, 0))
    metrics.add_metric(name="JobsDone", unit=MetricUnit.Count, value=result.jobs_done)
    metrics.add_metric(name="JobsFailed", unit=MetricUnit.Count, value=result.jobs_failed)
    logger.info(
        "doorbells handled",
        extra={
            "run_id": str(result.run_id),
            "records": len(event.get("Records") or []),
            "failed_records": len(response.get("batchItemFailures", [])),
            **counters,
        },
    )
    return response

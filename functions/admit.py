"""The admission API behind API Gateway (HTTP API, payload format 2.0).

API Gateway's JWT authorizer has verified the token before the function runs; the resolver
(fairqueue.api.build_resolver) reads the tenant and the lane from the claims it passes on and
does the rest. GET /openapi.json is the one route without the authorizer.
"""

from contextlib import nullcontext
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from fairqueue import api
from fairqueue.roles.function import function_setup, invocation_logging

logger = Logger()
tracer = Tracer()

# Loading the stages makes their job types known to admit.
CONNECTION, STAGES = function_setup(logger)
RESOLVER = api.build_resolver(lambda: nullcontext(CONNECTION.get()))


@logger.inject_lambda_context(clear_state=True)
@invocation_logging(logger)
# Answers carry tenants' jobs, outputs and results: never into traces, which row-level
# security does not guard.
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    answer = api.answer(RESOLVER, event, context)
    http = (event.get("requestContext") or {}).get("http") or {}
    logger.info(
        "answered",
        extra={
            "method": http.get("method"),
            "route": event.get("routeKey"),
            "status": answer["statusCode"],
        },
    )
    return answer

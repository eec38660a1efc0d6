"""The operators' dashboard behind API Gateway (HTTP API, payload format 2.0), off unless the
stack is given a dashboard secret: the application logs operators in with it itself, so its
API has no authorizer (docs/guide/deploying.md, "The dashboard")."""

from contextlib import nullcontext
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from fairqueue.dashboard import Dashboard, dashboard_secret
from fairqueue.dashboard.lambda_http import answer
from fairqueue.roles.function import function_setup, invocation_logging

logger = Logger()

CONNECTION, STAGES = function_setup(logger)
APP = Dashboard(
    lambda: nullcontext(CONNECTION.get()),
    dashboard_secret(),
    {stage.name: stage for stage in STAGES},
)


@logger.inject_lambda_context(clear_state=True)
@invocation_logging(logger)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The app logs each request's method, path and status; pages carry tenants' labels and are
    # never logged or traced.
    return answer(APP, event)

"""The admission API behind API Gateway (HTTP API, payload format 2.0).

API Gateway's JWT authorizer has verified the token before the function runs; the function
reads the tenant and the lane from the claims it passes on, and the core (fairqueue.api) does
the rest. GET /openapi.json is the one route without the authorizer.
"""

import base64
import binascii
import json
from typing import Any
from urllib.parse import parse_qs, unquote

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.typing import LambdaContext

from fairqueue import api
from fairqueue.errors import DatabaseUnavailable
from fairqueue.function import function_setup, invocation_logging

logger = Logger()
tracer = Tracer()

# Loading the stages makes their job types known to admit.
CONNECTION, STAGES = function_setup(logger)
CLAIMS = api.ClaimNames.from_env()


@logger.inject_lambda_context(clear_state=True)
@invocation_logging(logger)
# Answers carry tenants' jobs, outputs and results: never into traces, which row-level
# security does not guard.
@tracer.capture_lambda_handler(capture_response=False, capture_error=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = APIGatewayProxyEventV2(event)
    reply = answer(request)
    logger.info(
        "answered",
        extra={"method": request.http_method, "route": request.route_key, "status": reply.status},
    )
    return {
        "statusCode": reply.status,
        "headers": {"Content-Type": "application/json", **reply.headers},
        "body": json.dumps(reply.body, separators=(",", ":")),
    }


def answer(request: APIGatewayProxyEventV2) -> api.Reply:
    method, path = request.http_method, unquote(request.path)
    public = api.public_reply(method, path)
    if public is not None:
        return public
    try:
        identity = api.identity_from_claims(request.request_context.authorizer.jwt_claim, CLAIMS)
        body = raw_body(request)
    except api.ApiError as exc:
        return exc.reply()
    query = parse_qs(request.raw_query_string, keep_blank_values=True)
    try:
        conn = CONNECTION.get()
    except DatabaseUnavailable as exc:
        return api.database_unavailable(exc)
    return api.handle(method, path, query, body, identity, conn)


def raw_body(request: APIGatewayProxyEventV2) -> bytes:
    """The body's bytes as the client sent them (API Gateway base64-encodes binary bodies)."""
    body = request.body or ""
    if not request.is_base64_encoded:
        return body.encode()
    try:
        return base64.b64decode(body, validate=True)
    except binascii.Error:
        raise api.ApiError(400, "malformed_json", "the body is not valid base64") from None

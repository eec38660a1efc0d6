"""The HTTP admission API: POST /jobs, GET /jobs/{id}, GET /jobs, and a job's result, GET and
PUT /jobs/{id}/result; the OpenAPI document at GET /openapi.json.

One resolver (Powertools' ``APIGatewayHttpResolver``, built by :func:`build_resolver` in
fairqueue.api.routes) answers every request, carried two ways: by the Lambda function behind
API Gateway (functions/admit.py), whose JWT authorizer has verified the token, and by
``ApiServer`` (fairqueue.api.server), the HTTP/1.1 server of ``fairqueue serve --role api``, which
verifies HS256 tokens signed with ``FAIRQUEUE_API_SECRET`` itself and hands the resolver the
same event API Gateway would. Its requests share one bounded connection pool
(``FAIRQUEUE_API_POOL_SIZE``). docs/api.md has the routes and the error codes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any
from urllib.parse import urlencode

from ..db import Connection
from ..stage import Stage
from .auth import (
    DEFAULT_TOKEN_TTL_S,
    MIN_SECRET_BYTES,
    SIGNING_ALGORITHM,
    SIGNING_KEY_ENV,
    ClaimNames,
    api_secret,
    authenticate,
    identity_from_claims,
    mint_token,
)
from .document import admittable_stages
from .document import openapi_document as _document_of
from .models import (
    OPENAPI_PATH,
    AdmitRequest,
    Admitted,
    ApiError,
    ErrorBody,
    ErrorDetail,
    Identity,
    JobView,
    LaneJobs,
    Reply,
    ResultView,
    error_reply,
)
from .resolver import BODY_ENVELOPE_BYTES, ApiResolver, max_body_bytes
from .routes import ADMIT_ERRORS, ROUTES, SAVE_RESULT_ERRORS, Connections, build_resolver
from .server import ApiConnections, ApiServer, api_address, api_pool_size
from .wsgi import http_api_event, reply_of

__all__ = [
    "ADMIT_ERRORS",
    "BODY_ENVELOPE_BYTES",
    "DEFAULT_TOKEN_TTL_S",
    "MIN_SECRET_BYTES",
    "OPENAPI_PATH",
    "ROUTES",
    "SAVE_RESULT_ERRORS",
    "SIGNING_ALGORITHM",
    "SIGNING_KEY_ENV",
    "AdmitRequest",
    "Admitted",
    "ApiConnections",
    "ApiError",
    "ApiResolver",
    "ApiServer",
    "ClaimNames",
    "Connections",
    "ErrorBody",
    "ErrorDetail",
    "Identity",
    "JobView",
    "LaneJobs",
    "Reply",
    "ResultView",
    "admittable_stages",
    "answer",
    "api_address",
    "api_pool_size",
    "api_secret",
    "authenticate",
    "build_resolver",
    "database_unavailable",
    "error_reply",
    "handle",
    "identity_from_claims",
    "max_body_bytes",
    "mint_token",
    "openapi_document",
]

log = logging.getLogger("fairqueue.api")


def answer(resolver: ApiResolver, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The resolver's answer to an HTTP API event, as the Lambda returns it: status, headers
    (``Content-Type`` among them) and the JSON body. A fault is the documented 500."""
    try:
        resolved = resolver.resolve(event, context)
    except Exception:
        log.exception("the API could not answer")
        resolved = _answer_of(error_reply(500, "internal_error", "the request failed"))
    return {
        "statusCode": resolved["statusCode"],
        "headers": {"Content-Type": "application/json", **(resolved.get("headers") or {})},
        "body": resolved.get("body") or "",
    }


def _answer_of(reply: Reply) -> dict[str, Any]:
    body = json.dumps(reply.body, separators=(",", ":"))
    return {"statusCode": reply.status, "headers": dict(reply.headers), "body": body}


def database_unavailable(exc: Exception) -> Reply:
    """The 503 for a database that cannot be reached; what went wrong stays in the log."""
    log.warning("the database is unavailable: %s", exc)
    return error_reply(503, "database_unavailable", "the database cannot be reached; retry")


# The core without a carrier: one request, an identity and a connection.

_core = threading.local()


@contextmanager
def _core_connection() -> Iterator[Connection]:
    yield _core.conn


@cache
def _resolver() -> ApiResolver:
    """The resolver of ``handle``: the connection is the one its caller passed."""
    return build_resolver(_core_connection, ClaimNames())


def handle(
    method: str,
    path: str,
    query_params: Mapping[str, Sequence[str]],
    body: bytes,
    identity: Identity,
    conn: Connection,
) -> Reply:
    """Answer one request of ``identity`` as the resolver answers it behind API Gateway.
    ``conn`` must be an autocommit connection with no transaction open; every read and write
    is clamped to ``identity.tenant_id``, and the queries name the tenant too, so a
    connection that bypasses row-level security (a superuser's) still sees only that
    tenant's lane."""
    names = ClaimNames()
    claims = {names.tenant: identity.tenant_id, names.lane: identity.lane}
    headers = {"content-type": "application/json"}
    query = urlencode([(k, v) for k, values in query_params.items() for v in values])
    event = http_api_event(method.upper(), path, query, headers, body, claims)
    _core.conn = conn
    try:
        return reply_of(answer(_resolver(), event, None))
    finally:
        _core.conn = None


def openapi_document(stages: list[Stage] | None = None) -> dict[str, Any]:
    """The OpenAPI document the API serves, for ``stages`` (by default the process's)."""
    return _document_of(_resolver(), stages)

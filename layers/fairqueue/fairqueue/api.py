"""The HTTP admission API: POST /jobs, GET /jobs/{id}, GET /jobs, and a job's result, GET and
PUT /jobs/{id}/result; the OpenAPI document at GET /openapi.json.

One resolver (Powertools' ``APIGatewayHttpResolver``, built by :func:`build_resolver` in
fairqueue.api_routes) answers every request, carried two ways: by the Lambda function behind
API Gateway (functions/admit.py), whose JWT authorizer has verified the token, and by
``ApiServer``, the standard library's WSGI server of ``fairqueue serve --role api``, which
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
from socketserver import ThreadingMixIn
from time import monotonic
from typing import Any, Final
from urllib.parse import urlencode
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from .api_auth import (
    DEFAULT_TOKEN_TTL_S,
    MIN_SECRET_BYTES,
    SIGNING_ALGORITHM,
    SIGNING_KEY_ENV,
    ClaimNames,
    api_secret,
    authenticate,
    identity_from_claims,
    mint_token,
    verified_claims,
)
from .api_document import admittable_stages
from .api_document import openapi_document as _document_of
from .api_models import (
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
from .api_resolver import BODY_ENVELOPE_BYTES, ApiResolver, max_body_bytes
from .api_routes import (
    ADMIT_ERRORS,
    PUBLIC_ROUTES,
    ROUTES,
    SAVE_RESULT_ERRORS,
    Connections,
    build_resolver,
    route_of,
)
from .api_wsgi import http_api_event, reply_of, wsgi_app
from .db import (
    Connection,
    FairqueueConnection,
    connection_options,
    is_pooled,
    resolve_dsn,
    work_as_app_role,
)
from .errors import ConfigurationError, DatabaseUnavailable
from .settings import settings_of
from .stage import Stage

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

# How long a request waits for a free connection before it is 503 database_unavailable; it
# gives up sooner once the pool has failed to connect since it started waiting.
POOL_WAIT_S: Final = 30.0
POOL_POLL_S: Final = 0.2
# How long the local server waits on a silent client before it gives up on the request.
REQUEST_TIMEOUT_S: Final = 10.0


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


# Settings of the local server.


def api_address(env: Mapping[str, str] | None = None) -> tuple[str, int]:
    """``FAIRQUEUE_API_HOST`` (127.0.0.1) and ``FAIRQUEUE_API_PORT`` (8080)."""
    found = settings_of(env)
    return found.api_host, found.api_port


def api_pool_size(env: Mapping[str, str] | None = None) -> int:
    """``FAIRQUEUE_API_POOL_SIZE``: the most connections the local server holds at once (10)."""
    return settings_of(env).api_pool_size


# The local server.


class ApiConnections:
    """The local server's connections: one ``psycopg_pool`` pool of at most ``size``, each
    connection set up as ``db.connect(autocommit=True, as_app_role=True)`` sets up its own
    (dict rows, the application role) and checked before a request gets it.

    A request that finds no connection free waits for one, up to ``POOL_WAIT_S``; but once
    the pool has failed to open a connection since it last opened one, the database is taken
    to be unreachable and a request that would wait is 503 at once, as it was when each
    request opened its own.
    """

    def __init__(self, dsn: str | None, size: int) -> None:
        target = resolve_dsn(dsn)
        settings: dict[str, Any] = {"autocommit": True, **connection_options()}
        if "application_name" not in conninfo_to_dict(target):
            settings["application_name"] = "fairqueue-api"
        # Failed connection attempts counted when the pool last opened one.
        self._failures_at_connect = 0
        self.pool = ConnectionPool(
            target,
            connection_class=FairqueueConnection,
            kwargs=settings,
            configure=self._configure,
            check=ConnectionPool.check_connection,
            min_size=0,
            max_size=size,
            open=False,
            name="fairqueue-api",
            timeout=POOL_WAIT_S,
        )
        self.pool.open(wait=False)

    def _configure(self, conn: FairqueueConnection) -> None:
        work_as_app_role(conn, pooled=is_pooled())
        self._failures_at_connect = self._failures()

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        conn = self._take()
        try:
            yield conn
        finally:
            self.pool.putconn(conn)

    def _take(self) -> FairqueueConnection:
        deadline = monotonic() + POOL_WAIT_S
        while True:
            try:
                return self.pool.getconn(timeout=POOL_POLL_S)
            except PoolTimeout as exc:
                if self._failures() > self._failures_at_connect:
                    raise DatabaseUnavailable("the pool cannot connect to the database") from exc
                if monotonic() >= deadline:
                    raise DatabaseUnavailable(
                        f"no database connection came free within {POOL_WAIT_S:g} s"
                    ) from exc

    def _failures(self) -> int:
        return self.pool.get_stats().get("connections_errors", 0)

    def close(self) -> None:
        self.pool.close()


class _RequestHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S
    server_version = "fairqueue-api"

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # One line per answered request, with what an operator filters on.
        log.info(
            "request",
            extra={
                "method": self.command,
                "path": self.path.partition("?")[0],
                "status": int(code) if str(code).isdigit() else code,
                "client": self.address_string(),
            },
        )

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


class ApiServer(ThreadingMixIn, WSGIServer):
    """The API over HTTP on this machine: a thread per request, local HS256 tokens, at most
    ``pool_size`` (``FAIRQUEUE_API_POOL_SIZE``) database connections.

    Closing it waits for the requests in flight (``daemon_threads`` off), then closes the
    pool.
    """

    daemon_threads = False
    block_on_close = True
    # Clients that arrive at once wait in the listen queue (socketserver's default is 5:
    # 40 clients connecting together were sometimes reset).
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        dsn: str,
        *,
        secret: str,
        names: ClaimNames | None = None,
        pool_size: int | None = None,
    ) -> None:
        self.secret = secret
        self.names = names or ClaimNames.from_env()
        self.connections = ApiConnections(dsn, api_pool_size() if pool_size is None else pool_size)
        self.resolver = build_resolver(self.connections.connection, self.names)
        try:
            super().__init__(address, _RequestHandler)
        except OSError as exc:
            self.connections.close()
            raise ConfigurationError(
                f"the API cannot listen on {address[0]}:{address[1]}: {exc}"
            ) from exc
        self.set_app(wsgi_app(self.resolver, self.authorize))

    def authorize(self, path: str, authorization: str | None) -> dict[str, Any] | None:
        """API Gateway's JWT authorizer, played here: the verified claims of a caller whose
        token names a tenant and a lane; None for the routes without the authorizer."""
        if route_of(path) in PUBLIC_ROUTES:
            return None
        claims = verified_claims(authorization, self.secret)
        identity_from_claims(claims, self.names)
        return claims

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away or went silent mid-request: nothing to answer.
        log.info("a request from %s ended without an answer", client_address, exc_info=True)

    def server_close(self) -> None:
        super().server_close()
        self.connections.close()

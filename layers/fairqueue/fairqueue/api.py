"""The HTTP admission API, whoever carries the HTTP: POST /jobs, GET /jobs/{id}, GET /jobs, and
a job's result, GET and PUT /jobs/{id}/result.

``handle`` is the core: method, path, query, raw body, the caller's ``Identity`` and an
autocommit connection in; a ``Reply`` (status, JSON body, headers) out. The tenant and the lane
come only from the identity, never from the request, and the cost only from the stage; only a
stage marked ``clients_may_admit`` can be admitted. Two
adapters carry it: the Lambda function behind API Gateway (functions/admit/app.py), whose JWT
authorizer has verified the token already, and ``ApiServer``, the stdlib HTTP server of
``fairqueue serve --role api``, which verifies HS256 tokens signed with
``FAIRQUEUE_API_SECRET`` itself. docs/api.md has the routes and the error codes; the OpenAPI
document shipped beside this module describes the same.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal
from urllib.parse import parse_qs, unquote, urlsplit
from uuid import UUID

import jwt
import psycopg
from psycopg.pq import TransactionStatus
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .api_document import openapi_document
from .db import Connection, connect
from .errors import (
    ConfigurationError,
    DatabaseUnavailable,
    DuplicateJob,
    FairqueueError,
    InsufficientCredit,
    InvalidPayload,
    JobNotFinished,
    PayloadTooLarge,
    UnknownJob,
    UpstreamRejected,
    UpstreamUnavailable,
)
from .inputs import check_label
from .jobs import max_payload_bytes
from .lanes import admit
from .queries import query
from .results import Result, read_result, save_result
from .stage import known_stage
from .tenancy import tenant_transaction

log = logging.getLogger("fairqueue.api")

SIGNING_KEY_ENV: Final = "FAIRQUEUE_API_SECRET"
MIN_SECRET_BYTES: Final = 32
SIGNING_ALGORITHM: Final = "HS256"
DEFAULT_TOKEN_TTL_S: Final = 3600
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8080
OPENAPI_PATH: Final = "/openapi.json"
# What a body may carry besides its payload (type, ids, keys, JSON punctuation).
BODY_ENVELOPE_BYTES: Final = 16 * 1024
# How long the local server waits on a silent client before it gives up on the request.
REQUEST_TIMEOUT_S: Final = 10.0

JOB_PATH = re.compile(r"^/jobs/([^/]+)$")
RESULT_PATH = re.compile(r"^/jobs/([^/]+)/result$")
ROUTES: Final[Mapping[str, tuple[str, ...]]] = {
    "/jobs": ("GET", "POST"),
    "/jobs/{id}": ("GET",),
    "/jobs/{id}/result": ("GET", "PUT"),
}
ErrorTable = Sequence[tuple[type[FairqueueError], int, str]]
# What admit refuses, as the API answers it. DatabaseUnavailable is every route's 503. An
# unknown job type never reaches admit: the API refuses it first (``_admittable``).
ADMIT_ERRORS: Final[ErrorTable] = (
    (InvalidPayload, 422, "invalid_payload"),
    (UpstreamRejected, 422, "upstream_rejected"),
    (PayloadTooLarge, 413, "payload_too_large"),
    (InsufficientCredit, 402, "insufficient_credit"),
    # A delta_of that is not a job of this lane: another tenant's looks the same as none.
    (UnknownJob, 404, "delta_of_not_found"),
    (DuplicateJob, 409, "duplicate_job"),
    (UpstreamUnavailable, 503, "upstream_unavailable"),
)
# What save_result refuses, as the API answers it. InvalidPayload is a body that parsed but
# cannot be stored as JSON (a number such as 1e400, which Python reads as infinity).
SAVE_RESULT_ERRORS: Final[ErrorTable] = (
    (InvalidPayload, 422, "invalid_result"),
    # A job that passed the lane check is missing here only if it was pruned since.
    (UnknownJob, 404, "job_not_found"),
    (JobNotFinished, 409, "job_not_finished"),
)
# Fields a client might hope to set, and where each really comes from.
SET_ELSEWHERE: Final[Mapping[str, str]] = {
    "tenant_id": "the tenant comes from your token",
    "lane": "the lane comes from your token",
    "cost": "the cost is the job type's own",
}


@dataclass(frozen=True)
class Identity:
    """Who is calling, as the verified token says: whose jobs, and which lane."""

    tenant_id: str
    lane: str


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


class ApiError(Exception):
    """A request refused with a status and a stable code; the message says what was wrong."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def reply(self) -> Reply:
        return error_reply(self.status, self.code, self.message, self.headers)


def error_reply(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> Reply:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return Reply(status, body.model_dump(mode="json"), dict(headers or {}))


def database_unavailable(exc: Exception) -> Reply:
    """The 503 for a database that cannot be reached; what went wrong stays in the log."""
    log.warning("the database is unavailable: %s", exc)
    return error_reply(503, "database_unavailable", "the database cannot be reached; retry")


# The edge: request and response bodies.


class AdmitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=200)
    payload: dict[str, Any]
    dedupe_key: str | None = Field(default=None, min_length=1, max_length=200)
    delta_of: UUID | None = None
    group_id: str | None = Field(default=None, min_length=1, max_length=200)


class Admitted(BaseModel):
    id: UUID
    status: Literal["pending", "queued"]
    place: int
    lane: str


class JobView(BaseModel):
    id: UUID
    type: str
    status: Literal["queued", "pending", "running", "done", "failed", "cancelled"]
    lane: str
    delta_of: UUID | None
    attempts: int
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None
    output: dict[str, Any] | None
    place: int | None


class LaneJobs(BaseModel):
    lane: str
    jobs: list[JobView]


class ResultView(BaseModel):
    job_id: UUID
    saved_by: Literal["client", "worker"]
    saved_at: datetime
    source_job_id: UUID
    body: dict[str, Any]

    @classmethod
    def of(cls, result: Result) -> ResultView:
        return cls(
            job_id=result.job_id,
            # A row without saved_by predates the column and counts as a client's.
            saved_by=result.saved_by or "client",
            saved_at=result.saved_at,
            source_job_id=result.source_job_id,
            body=result.body,
        )


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


# The core.


def handle(
    method: str,
    path: str,
    query_params: Mapping[str, Sequence[str]],
    body: bytes,
    identity: Identity,
    conn: Connection,
) -> Reply:
    """Answer one authenticated request. ``conn`` must be an autocommit connection with no
    transaction open; every read and write is clamped to ``identity.tenant_id``, and the
    queries name the tenant too, so a connection that bypasses row-level security (a
    superuser's) still sees only that tenant's lane."""
    try:
        if path == "/jobs":
            _allow(method, "/jobs")
            if method == "POST":
                return _admit(query_params, body, identity, conn)
            return _list(query_params, identity, conn)
        matched = JOB_PATH.match(path)
        if matched is not None:
            _allow(method, "/jobs/{id}")
            _refuse_query(query_params, allowed=())
            return _show(matched.group(1), identity, conn)
        matched = RESULT_PATH.match(path)
        if matched is not None:
            _allow(method, "/jobs/{id}/result")
            _refuse_query(query_params, allowed=())
            if method == "PUT":
                return _save_result(matched.group(1), body, identity, conn)
            return _read_result(matched.group(1), identity, conn)
        raise ApiError(404, "not_found", f"no route {path}; see {OPENAPI_PATH}")
    except ApiError as exc:
        return exc.reply()
    except (DatabaseUnavailable, psycopg.OperationalError) as exc:
        return database_unavailable(exc)
    except Exception:
        log.exception("%s %s failed", method, path)
        return error_reply(500, "internal_error", "the request failed on the server's side")


def public_reply(method: str, path: str) -> Reply | None:
    """The routes that need no token (the OpenAPI document), or None for every other path."""
    if path != OPENAPI_PATH:
        return None
    if method != "GET":
        return _method_not_allowed(method, OPENAPI_PATH, ("GET",)).reply()
    return Reply(200, openapi_document())


def _allow(method: str, route: str) -> None:
    if method not in ROUTES[route]:
        raise _method_not_allowed(method, route, ROUTES[route])


def _method_not_allowed(method: str, route: str, allowed: Sequence[str]) -> ApiError:
    return ApiError(
        405,
        "method_not_allowed",
        f"{method} is not allowed on {route}; use {' or '.join(allowed)}",
        {"Allow": ", ".join(allowed)},
    )


def _refuse_query(query_params: Mapping[str, Sequence[str]], *, allowed: Sequence[str]) -> None:
    unknown = sorted(set(query_params) - set(allowed))
    if unknown:
        accepted = ", ".join(allowed) if allowed else "none"
        raise ApiError(
            400,
            "invalid_query",
            f"unknown query parameter(s) {', '.join(unknown)}; accepted: {accepted}",
        )


def _admit(
    query_params: Mapping[str, Sequence[str]], body: bytes, identity: Identity, conn: Connection
) -> Reply:
    _refuse_query(query_params, allowed=())
    request = _admit_request(body)
    _admittable(request.type)
    try:
        # No cost is passed: the stage's own credit_cost is what the job costs.
        admission = admit(
            conn,
            identity.lane,
            request.type,
            request.payload,
            tenant_id=identity.tenant_id,
            delta_of=request.delta_of,
            group_id=request.group_id,
            dedupe_key=request.dedupe_key,
        )
    except FairqueueError as exc:
        refusal = _refusal(exc, ADMIT_ERRORS)
        if refusal is None:
            raise
        raise refusal from exc
    answer = Admitted(
        id=admission.job_id, status=admission.status, place=admission.place, lane=identity.lane
    )
    return Reply(202, answer.model_dump(mode="json"), {"Location": f"/jobs/{admission.job_id}"})


def _admittable(job_type: str) -> None:
    """Refuse a type no stage has, and an internal stage's the same way: which internal stages
    exist is not for clients to learn (admit's own message would list every known type)."""
    stage = known_stage(job_type)
    if stage is None or not stage.clients_may_admit:
        raise ApiError(
            422,
            "unknown_job_type",
            f"unknown job type {job_type!r}: no job type of that name may be admitted",
        )


def _refusal(exc: FairqueueError, table: ErrorTable) -> ApiError | None:
    """The API's answer to a refusal the table lists; None for an error it does not."""
    for error, status, code in table:
        if isinstance(exc, error):
            return ApiError(status, code, str(exc))
    return None


def max_body_bytes() -> int:
    return max_payload_bytes() + BODY_ENVELOPE_BYTES


def _admit_request(body: bytes) -> AdmitRequest:
    document = _json_object(body)
    try:
        return AdmitRequest.model_validate(document)
    except ValidationError as exc:
        raise ApiError(400, "invalid_body", _describe(exc)) from None


def _json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, within the size limit; 400 or 413 naming what is wrong."""
    limit = max_body_bytes()
    if len(body) > limit:
        raise ApiError(
            413, "payload_too_large", f"the body is {len(body)} bytes, over the limit of {limit}"
        )
    if not body.strip():
        raise ApiError(400, "malformed_json", "the body is empty; send a JSON object")
    try:
        document = json.loads(body, parse_constant=_refuse_constant)
    except ValueError as exc:  # also a body that is not UTF-8, -16 or -32
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "malformed_json", "the body is nested too deeply") from None
    if not isinstance(document, dict):
        raise ApiError(
            400, "invalid_body", f"the body must be a JSON object, got {_json_type(document)}"
        )
    return document


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "the body"
        if error["type"] == "extra_forbidden":
            why = SET_ELSEWHERE.get(
                where, f"accepted fields: {', '.join(AdmitRequest.model_fields)}"
            )
            problems.append(f"{where} is not accepted: {why}")
        else:
            problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def _show(raw_id: str, identity: Identity, conn: Connection) -> Reply:
    row = _lane_job(_job_id(raw_id), identity, conn)
    return Reply(200, JobView.model_validate(row).model_dump(mode="json"))


def _job_id(raw_id: str) -> UUID:
    try:
        return UUID(raw_id)
    except ValueError:
        raise ApiError(400, "invalid_id", f"{raw_id!r} is not a job id (a UUID)") from None


def _lane_job(job_id: UUID, identity: Identity, conn: Connection) -> dict[str, Any]:
    """The job, if it is in the caller's lane; 404 otherwise."""
    with tenant_transaction(conn, identity.tenant_id):
        row = conn.execute(
            query("lane_job"),
            {"id": job_id, "tenant_id": identity.tenant_id, "lane": identity.lane},
        ).fetchone()
    if row is None:
        # Another tenant's job, another lane's and no job at all look the same.
        raise ApiError(404, "job_not_found", f"no job {job_id} in your lane")
    return row


def _save_result(raw_id: str, body: bytes, identity: Identity, conn: Connection) -> Reply:
    job_id = _job_id(raw_id)
    result_body = _json_object(body)
    # The lane never changes, so the check holds for the save that follows. The save runs in
    # a transaction of its own: its after_result hook fires once that commits.
    _lane_job(job_id, identity, conn)
    try:
        result = save_result(conn, job_id, result_body, tenant_id=identity.tenant_id)
    except FairqueueError as exc:
        refusal = _refusal(exc, SAVE_RESULT_ERRORS)
        if refusal is None:
            raise
        raise refusal from exc
    return Reply(200, ResultView.of(result).model_dump(mode="json"))


def _read_result(raw_id: str, identity: Identity, conn: Connection) -> Reply:
    job_id = _job_id(raw_id)
    _lane_job(job_id, identity, conn)
    result = read_result(conn, job_id, tenant_id=identity.tenant_id)
    if result is None:
        raise ApiError(404, "result_not_found", f"job {job_id} has no result yet")
    return Reply(200, ResultView.of(result).model_dump(mode="json"))


def _list(query_params: Mapping[str, Sequence[str]], identity: Identity, conn: Connection) -> Reply:
    _refuse_query(query_params, allowed=("lane",))
    lanes = query_params.get("lane", [identity.lane])
    if len(lanes) != 1 or not lanes[0]:
        raise ApiError(400, "invalid_query", "lane must be given once, and not empty")
    if lanes[0] != identity.lane:
        raise ApiError(404, "lane_not_found", f"no lane {lanes[0]!r} of yours")
    with tenant_transaction(conn, identity.tenant_id):
        rows = conn.execute(
            query("lane_jobs"), {"tenant_id": identity.tenant_id, "lane": identity.lane}
        ).fetchall()
    listing = LaneJobs(lane=identity.lane, jobs=[JobView.model_validate(row) for row in rows])
    return Reply(200, listing.model_dump(mode="json"))


# Identity: claims verified by API Gateway, or a local token verified here.


@dataclass(frozen=True)
class ClaimNames:
    """Which claims of a token name the tenant and the lane."""

    tenant: str = "tenant_id"
    lane: str = "sub"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClaimNames:
        source = os.environ if env is None else env
        return cls(
            tenant=source.get("FAIRQUEUE_TENANT_CLAIM") or cls.tenant,
            lane=source.get("FAIRQUEUE_LANE_CLAIM") or cls.lane,
        )


def identity_from_claims(claims: Mapping[str, Any], names: ClaimNames) -> Identity:
    """The caller, from a verified token's claims; 401 when one of the two is missing."""
    values: dict[str, str] = {}
    for claim in (names.tenant, names.lane):
        value = claims.get(claim)
        if not isinstance(value, str) or not value:
            raise _unauthorized("missing_claim", f"the token has no {claim} claim (a string)")
        try:
            check_label(f"the token's {claim} claim", value)
        except InvalidPayload as exc:
            raise _unauthorized("invalid_token", str(exc)) from None
        values[claim] = value
    return Identity(tenant_id=values[names.tenant], lane=values[names.lane])


def api_secret(env: Mapping[str, str] | None = None) -> str:
    """The local tokens' signing secret; refused when missing or shorter than 32 bytes."""
    source = os.environ if env is None else env
    secret = source.get(SIGNING_KEY_ENV)
    if not secret:
        raise ConfigurationError(
            f"{SIGNING_KEY_ENV} is not set: the API signs and verifies its local tokens with it "
            f"(at least {MIN_SECRET_BYTES} bytes; `openssl rand -hex 32` makes one)"
        )
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise ConfigurationError(
            f"{SIGNING_KEY_ENV} is {len(secret.encode())} bytes; it must be at least "
            f"{MIN_SECRET_BYTES} (`openssl rand -hex 32` makes one)"
        )
    return secret


def mint_token(
    secret: str,
    *,
    tenant_id: str,
    lane: str,
    ttl_s: int = DEFAULT_TOKEN_TTL_S,
    names: ClaimNames | None = None,
) -> str:
    """A token for the local API, valid ``ttl_s`` seconds."""
    if ttl_s <= 0:
        raise ConfigurationError(f"a token's lifetime must be positive, got {ttl_s} s")
    claim = names or ClaimNames()
    now = datetime.now(UTC)
    return jwt.encode(
        {
            claim.tenant: tenant_id,
            claim.lane: lane,
            "iat": now,
            "exp": now + timedelta(seconds=ttl_s),
        },
        secret,
        algorithm=SIGNING_ALGORITHM,
    )


def authenticate(authorization: str | None, secret: str, names: ClaimNames) -> Identity:
    """The caller of the local API, from its ``Authorization: Bearer`` header."""
    if not authorization:
        raise _unauthorized("missing_token", "send Authorization: Bearer <token>")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("invalid_token", "the Authorization header must be 'Bearer <token>'")
    try:
        claims = jwt.decode(
            token.strip(), secret, algorithms=[SIGNING_ALGORITHM], options={"require": ["exp"]}
        )
    except jwt.ExpiredSignatureError:
        raise _unauthorized("expired_token", "the token has expired; get a new one") from None
    except jwt.InvalidTokenError as exc:
        raise _unauthorized("invalid_token", f"the token was refused: {exc}") from None
    return identity_from_claims(claims, names)


def _unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, {"WWW-Authenticate": f'Bearer error="{code}"'})


# The local server.


def api_address(env: Mapping[str, str] | None = None) -> tuple[str, int]:
    """``FAIRQUEUE_API_HOST`` (127.0.0.1) and ``FAIRQUEUE_API_PORT`` (8080)."""
    source = os.environ if env is None else env
    raw_port = source.get("FAIRQUEUE_API_PORT") or str(DEFAULT_PORT)
    try:
        port = int(raw_port)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"FAIRQUEUE_API_PORT must be a port number, got {raw_port!r}")
    return source.get("FAIRQUEUE_API_HOST") or DEFAULT_HOST, port


class ConnectionPool:
    """Autocommit connections kept between requests, at most ``keep`` idle at once."""

    def __init__(self, dsn: str, *, keep: int = 4) -> None:
        self.dsn = dsn
        self.keep = keep
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        conn = self._take()
        try:
            yield conn
        finally:
            self._give_back(conn)

    def _take(self) -> Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return connect(self.dsn, autocommit=True, as_app_role=True)
            try:
                # A kept connection may have been closed by the server since.
                conn.execute("select 1")
                return conn
            except psycopg.Error:
                conn.close()

    def _give_back(self, conn: Connection) -> None:
        reusable = (
            not conn.closed
            and not conn.broken
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        with self._lock:
            if reusable and len(self._idle) < self.keep:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class ApiServer(ThreadingHTTPServer):
    """The API over HTTP on this machine: a thread per request, local HS256 tokens.

    Closing it waits for the requests in flight (``daemon_threads`` off), then closes the
    kept connections.
    """

    daemon_threads = False

    def __init__(
        self,
        address: tuple[str, int],
        dsn: str,
        *,
        secret: str,
        names: ClaimNames | None = None,
    ) -> None:
        self.secret = secret
        self.names = names or ClaimNames.from_env()
        self.connections = ConnectionPool(dsn)
        try:
            super().__init__(address, _RequestHandler)
        except OSError as exc:
            raise ConfigurationError(
                f"the API cannot listen on {address[0]}:{address[1]}: {exc}"
            ) from exc

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(
        self,
        method: str,
        path: str,
        query_params: Mapping[str, Sequence[str]],
        body: bytes,
        authorization: str | None,
    ) -> Reply:
        public = public_reply(method, path)
        if public is not None:
            return public
        try:
            identity = authenticate(authorization, self.secret, self.names)
            with self.connections.connection() as conn:
                return handle(method, path, query_params, body, identity, conn)
        except ApiError as exc:
            return exc.reply()
        except DatabaseUnavailable as exc:
            return database_unavailable(exc)

    def server_close(self) -> None:
        super().server_close()
        self.connections.close()


class _RequestHandler(BaseHTTPRequestHandler):
    server: ApiServer
    timeout = REQUEST_TIMEOUT_S
    server_version = "fairqueue-api"

    def _dispatch(self) -> None:
        parts = urlsplit(self.path)
        try:
            body = self._body()
        except ApiError as exc:
            # The unread rest of the body cannot be left for a next request to trip on.
            self.close_connection = True
            self._send(exc.reply())
            return
        reply = self.server.answer(
            self.command,
            unquote(parts.path),
            parse_qs(parts.query, keep_blank_values=True),
            body,
            self.headers.get("Authorization"),
        )
        self._send(reply)

    def __getattr__(self, name: str) -> Any:
        # Every method reaches the core, which answers one that no route takes with a JSON 405
        # and Allow (for TRACE or a made-up method the base class would send an HTML 501).
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def _body(self) -> bytes:
        raw_length = self.headers.get("Content-Length") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            length = -1
        if length < 0:
            raise ApiError(400, "invalid_body", f"Content-Length is not a length: {raw_length!r}")
        if length > max_body_bytes():
            raise ApiError(
                413,
                "payload_too_large",
                f"the body is {length} bytes, over the limit of {max_body_bytes()}",
            )
        return self.rfile.read(length) if length else b""

    def _send(self, reply: Reply) -> None:
        data = json.dumps(reply.body, separators=(",", ":")).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

"""The admission API's routes on Powertools' resolver: POST /jobs, GET /jobs/{id}, GET /jobs,
GET and PUT /jobs/{id}/result, and GET /openapi.json.

:func:`build_resolver` is the one place the API is put together, for both carriers: the Lambda
behind API Gateway (functions/admit.py) and the local server (fairqueue.api.ApiServer).
Either way the caller arrives as an HTTP API event whose JWT authorizer has verified the token
and passed its claims on; the tenant and the lane come only from those claims, the cost only
from the stage, and only a stage marked ``clients_may_admit`` can be admitted. Bodies, ids and
query values are validated by the resolver against the models; every refusal, and every
fault, is answered with the documented JSON error (docs/api.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Annotated, Any, Final
from urllib.parse import parse_qs
from uuid import UUID

import psycopg
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from ..cancelling import cancel_job
from ..db import Connection
from ..errors import (
    DatabaseUnavailable,
    DuplicateJob,
    FairqueueError,
    InsufficientCredit,
    InvalidPayload,
    JobNotCancellable,
    JobNotFinished,
    PayloadTooLarge,
    UnknownJob,
    UpstreamRejected,
    UpstreamUnavailable,
)
from ..lanes import admit
from ..queries import query
from ..results import read_result, save_result
from ..stage import known_stage
from ..tenancy import tenant_transaction
from ..validation import problem
from ..waiting import tenant_job_waiting
from . import document
from .auth import ClaimNames, identity_from_claims
from .models import (
    OPENAPI_PATH,
    AdmitRequest,
    Admitted,
    ApiError,
    Identity,
    JobView,
    LaneJobs,
    ResultView,
)
from .resolver import ApiEvent, ApiResolver

log = logging.getLogger("fairqueue.api")

# Where a request gets its connection: an autocommit connection with no transaction open, held
# for the block (the Lambda's kept one, or one of the local server's pool).
Connections = Callable[[], AbstractContextManager[Connection]]

# Every route and the methods it takes; any other method is 405 with these in Allow.
ROUTES: Final[Mapping[str, tuple[str, ...]]] = {
    "/jobs": ("GET", "POST"),
    "/jobs/{id}": ("GET", "DELETE"),
    "/jobs/{id}/result": ("GET", "PUT"),
    OPENAPI_PATH: ("GET",),
}
# The only route without a token (on AWS, the only one without the authorizer).
PUBLIC_ROUTES: Final = frozenset({OPENAPI_PATH})
# The query parameters each route takes; any other is 400 invalid_query.
QUERY_PARAMETERS: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {("GET", "/jobs"): ("lane",)}

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
    # A job that passed the lane check is missing here only if it was pruned since, or its
    # result row is another tenant's (one made before the database refused such rows).
    (UnknownJob, 404, "job_not_found"),
    (JobNotFinished, 409, "job_not_finished"),
)
# What cancel_job refuses, as the API answers it.
CANCEL_ERRORS: Final[ErrorTable] = (
    (UnknownJob, 404, "job_not_found"),
    (JobNotCancellable, 409, "job_not_cancellable"),
)
# Fields a client might hope to set, and where each really comes from.
SET_ELSEWHERE: Final[Mapping[str, str]] = {
    "tenant_id": "the tenant comes from your token",
    "lane": "the lane comes from your token",
    "cost": "the cost is the job type's own",
}

JobId = Annotated[UUID, Path(description="A job of your lane.")]


def build_resolver(connections: Connections, names: ClaimNames | None = None) -> ApiResolver:
    """The admission API: its routes, its validation and its error answers. ``names`` says
    which claims name the tenant and the lane (by default FAIRQUEUE_TENANT_CLAIM and
    FAIRQUEUE_LANE_CLAIM)."""
    app = ApiResolver()
    claims = names or ClaimNames.from_env()

    def caller() -> Identity:
        return identity_from_claims(app.current_event.request_context.authorizer.jwt_claim, claims)

    @app.post("/jobs", **document.operation("admitJob"))
    def admit_job(request: Annotated[AdmitRequest, Body()]) -> Response[Admitted]:
        identity = caller()
        _admittable(request.type)
        with connections() as conn, _refusals(ADMIT_ERRORS):
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
                fair_cost=request.fair_cost,
            )
        answer = Admitted(
            id=admission.job_id, status=admission.status, place=admission.place, lane=identity.lane
        )
        headers = {"Location": f"/jobs/{admission.job_id}"}
        return Response(202, content_types.APPLICATION_JSON, answer, headers)

    @app.get("/jobs", **document.operation("listLaneJobs"))
    def list_lane_jobs(
        lane: Annotated[
            str | None,
            Query(min_length=1, description="Your lane (the default); any other is 404."),
        ] = None,
    ) -> LaneJobs:
        identity = caller()
        if lane is not None and lane != identity.lane:
            raise ApiError(404, "lane_not_found", f"no lane {lane!r} of yours")
        with connections() as conn, tenant_transaction(conn, identity.tenant_id):
            rows = conn.execute(
                query("lane_jobs"), {"tenant_id": identity.tenant_id, "lane": identity.lane}
            ).fetchall()
        return LaneJobs(lane=identity.lane, jobs=[JobView.model_validate(row) for row in rows])

    @app.get("/jobs/<id>", **document.operation("getJob"))
    def get_job(id: JobId) -> JobView:
        identity = caller()
        with connections() as conn:
            row = _lane_job(id, identity, conn)
            if row["status"] in ("queued", "pending"):
                row = row | {"waiting": tenant_job_waiting(conn, id, identity.tenant_id)}
            return JobView.model_validate(row)

    @app.delete("/jobs/<id>", **document.operation("cancelJob"))
    def cancel_lane_job(id: JobId) -> JobView:
        identity = caller()
        with connections() as conn:
            _lane_job(id, identity, conn)
            with _refusals(CANCEL_ERRORS):
                cancel_job(conn, id, tenant_id=identity.tenant_id)
            return JobView.model_validate(_lane_job(id, identity, conn))

    @app.put("/jobs/<id>/result", **document.operation("saveJobResult"))
    def save_job_result(
        id: JobId,
        body: Annotated[dict[str, Any], Body(description=document.RESULT_BODY)],
    ) -> ResultView:
        identity = caller()
        with connections() as conn:
            # The lane never changes, so the check holds for the save that follows. The save
            # runs in a transaction of its own: its after_result hook fires once that commits.
            _lane_job(id, identity, conn)
            with _refusals(SAVE_RESULT_ERRORS):
                result = save_result(conn, id, body, tenant_id=identity.tenant_id)
        return ResultView.of(result)

    @app.get("/jobs/<id>/result", **document.operation("getJobResult"))
    def get_job_result(id: JobId) -> ResultView:
        identity = caller()
        with connections() as conn:
            _lane_job(id, identity, conn)
            result = read_result(conn, id, tenant_id=identity.tenant_id)
        if result is None:
            raise ApiError(404, "result_not_found", f"job {id} has no result yet")
        return ResultView.of(result)

    @app.get(OPENAPI_PATH, **document.operation("getOpenApi"))
    def get_openapi() -> dict[str, Any]:
        return document.openapi_document(app)

    def refuse_unknown_query(app: ApiResolver, next_middleware: NextMiddleware) -> Response[Any]:
        # API Gateway joins a repeated parameter's values with commas: the raw query string
        # says what the caller sent.
        route, method = app.request.route, app.request.method
        if method not in ROUTES.get(route, ()) or route in PUBLIC_ROUTES:
            # No route for the method (404 or 405 whatever the query; the not-found route's
            # path is the request's own), or the document, which takes any query.
            return next_middleware(app)
        sent = parse_qs(app.current_event.raw_query_string, keep_blank_values=True)
        allowed = QUERY_PARAMETERS.get((method, route), ())
        unknown = sorted(set(sent) - set(allowed))
        if unknown:
            raise ApiError(
                400,
                "invalid_query",
                f"unknown query parameter(s) {', '.join(unknown)}; "
                f"accepted: {', '.join(allowed) or 'none'}",
            )
        repeated = sorted(name for name, values in sent.items() if len(values) > 1)
        if repeated:
            raise ApiError(400, "invalid_query", f"{', '.join(repeated)} must be given once")
        return next_middleware(app)

    app.use([refuse_unknown_query])

    @app.not_found
    def no_route(exc: NotFoundError) -> Response[Any]:
        path = app.current_event.path
        route = route_of(path)
        if route is None:
            raise route_not_found(path)
        if route not in PUBLIC_ROUTES:
            caller()  # who asks comes first, as the gateway's authorizer would have it
        method, allowed = app.current_event.http_method.upper(), ROUTES[route]
        if method in allowed:
            # The route takes the method, but the id held what no job id can hold.
            raw_id = path.split("/")[2]
            raise ApiError(400, "invalid_id", f"{raw_id!r} is not a job id (a UUID)")
        raise method_not_allowed(method, route)

    _answer_errors(app)
    return app


def route_not_found(path: str) -> ApiError:
    return ApiError(404, "not_found", f"no route {path}; see {OPENAPI_PATH}")


def method_not_allowed(method: str, route: str) -> ApiError:
    """The 405 of a method ``route`` does not take, with the methods it does in ``Allow``."""
    allowed = ROUTES[route]
    return ApiError(
        405,
        "method_not_allowed",
        f"{method} is not allowed on {route}; use {' or '.join(allowed)}",
        {"Allow": ", ".join(allowed)},
    )


def route_of(path: str) -> str | None:
    """The route a path is of, whatever the method, or None."""
    parts = path.split("/")
    for route in ROUTES:
        pattern = route.split("/")
        if len(pattern) == len(parts) and all(
            part != "" if want.startswith("{") else part == want
            for want, part in zip(pattern, parts, strict=True)
        ):
            return route
    return None


def _answer_errors(app: ApiResolver) -> None:
    """What each refusal and fault is answered with: always the documented JSON error."""

    def refused(exc: ApiError) -> Response[Any]:
        return error_response(exc)

    def invalid(exc: RequestValidationError) -> Response[Any]:
        event = app.current_event
        body_refusal = event.body_refusal if isinstance(event, ApiEvent) else None
        return error_response(validation_refusal(exc.errors(), body_refusal))

    def not_json(exc: RequestUnsupportedContentType) -> Response[Any]:
        return error_response(ApiError(400, "invalid_body", "send the body as application/json"))

    def unavailable(exc: Exception) -> Response[Any]:
        return error_response(database_unavailable(exc))

    def fault(exc: Exception) -> Response[Any]:
        event = app.current_event
        log.error("%s %s failed", event.http_method, event.path, exc_info=exc)
        return error_response(internal_error())

    app.exception_handler(ApiError)(refused)
    app.exception_handler(RequestValidationError)(invalid)
    app.exception_handler(RequestUnsupportedContentType)(not_json)
    app.exception_handler([DatabaseUnavailable, psycopg.OperationalError])(unavailable)
    app.exception_handler(Exception)(fault)


def error_response(error: ApiError) -> Response[Any]:
    reply = error.reply()
    return Response(reply.status, content_types.APPLICATION_JSON, reply.body, dict(reply.headers))


def database_unavailable(exc: Exception) -> ApiError:
    """The 503 for a database that cannot be reached; what went wrong stays in the log."""
    log.warning("the database is unavailable: %s", exc)
    return ApiError(503, "database_unavailable", "the database cannot be reached; retry")


def internal_error() -> ApiError:
    return ApiError(500, "internal_error", "the request failed on the server's side")


def validation_refusal(errors: Sequence[Any], body_refusal: ApiError | None = None) -> ApiError:
    """A refusal of the resolver's validation, worded for the caller: the id, a query value,
    a body that could not be read (``body_refusal``), or the body's fields (each problem
    named by its place in it)."""
    located = [(tuple(error.get("loc") or ("body",)), error) for error in errors]
    for loc, error in located:
        if loc[0] == "path":
            return ApiError(400, "invalid_id", f"{error.get('input')!r} is not a job id (a UUID)")
    if body_refusal is not None:
        return body_refusal
    for loc, error in located:
        if loc[0] == "query":
            name = ".".join(str(part) for part in loc[1:])
            return ApiError(400, "invalid_query", problem(error, name))
    problems = []
    for loc, error in located:
        where = ".".join(str(part) for part in loc[1:]) or "the body"
        if error.get("type") == "extra_forbidden":
            why = SET_ELSEWHERE.get(
                where, f"accepted fields: {', '.join(AdmitRequest.model_fields)}"
            )
            problems.append(f"{where} is not accepted: {why}")
        else:
            problems.append(problem(error, where))
    return ApiError(400, "invalid_body", "; ".join(problems))


@contextmanager
def _refusals(table: ErrorTable) -> Iterator[None]:
    """Turns the refusals a table lists into their API answers; anything else goes on."""
    try:
        yield
    except FairqueueError as exc:
        for error, status, code in table:
            if isinstance(exc, error):
                raise ApiError(status, code, str(exc)) from exc
        raise


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

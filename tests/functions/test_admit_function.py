"""The admission Lambda (functions/admit.py) loaded and invoked as the Lambda runtime does.

The handler gets API Gateway HTTP API payload 2.0 events, with the claims its JWT authorizer
passes on, and a context whose remaining time really counts down; the database is real. Every
answer is checked against the OpenAPI document.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fairqueue import connect
from fairqueue.api import openapi_document
from fairqueue.db import Connection
from fairqueue.dev import pooler as local_pooler
from fairqueue.dev.lambda_loop import Handler, LocalContext, load_handler
from fairqueue.lanes import add_credits
from support import api_support
from support.api_support import DOC, assert_documented
from support.databases import ROOT

HANDLER_SPEC = f"{ROOT / 'functions' / 'admit.py'}:handler"
API_ID = "a1b2c3d4e5"
DOMAIN = f"{API_ID}.execute-api.eu-west-1.amazonaws.com"
ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab12Cd34E"

LoadAdmit = Callable[..., Handler]


@pytest.fixture
def load_admit(dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoadAdmit]:
    """Loads admit.py afresh (module-level connection cache and stages) under a Lambda-like env."""
    loaded: list[Handler] = []

    def load(database_url: str = dsn, **env: str) -> Handler:
        monkeypatch.setenv("DATABASE_URL", database_url)
        monkeypatch.setenv("FAIRQUEUE_STAGES", "support.api_support:STAGES")
        monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "fairqueue-admit")
        for name in ("FAIRQUEUE_TENANT_CLAIM", "FAIRQUEUE_LANE_CLAIM", "FAIRQUEUE_ENV"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        handler = load_handler(HANDLER_SPEC)
        loaded.append(handler)
        # powertools binds its log handler to the sys.stdout of the first Logger() of the
        # process; point it at this test's stdout, or it writes to an earlier test's closed one.
        for log_handler in logging.getLogger("fairqueue-admit").handlers:
            if isinstance(log_handler, logging.StreamHandler):
                log_handler.stream = sys.stdout  # not setStream: it flushes the closed one
        return handler

    api_support.reset()
    yield load
    # Lambda keeps the cached connection for the next invocation; a test must close it.
    for handler in loaded:
        inspect.unwrap(handler).__globals__["CONNECTION"].close()


def claims(tenant: str = "acme", user: str = "alice", **extra: str) -> dict[str, str]:
    """A Cognito access token's claims as the HTTP API JWT authorizer passes them: strings."""
    now = int(time.time())
    return {
        "sub": user,
        "tenant_id": tenant,
        "iss": ISSUER,
        "client_id": "3n4b5urk1ft4fl3mg5e62d9ado",
        "origin_jti": str(uuid.uuid4()),
        "event_id": str(uuid.uuid4()),
        "token_use": "access",
        "scope": "aws.cognito.signin.user.admin",
        "auth_time": str(now - 60),
        "exp": str(now + 3540),
        "iat": str(now - 60),
        "jti": str(uuid.uuid4()),
        "username": user,
        **extra,
    }


def http_api_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    claims: dict[str, str] | None = None,
    query: str = "",
    stage: str = "$default",
    base64_body: bool = False,
) -> dict[str, Any]:
    """An HTTP API payload 2.0 event as API Gateway sends it for the template's routes
    (ANY /jobs, ANY /jobs/{id} and ANY /jobs/{id}/result behind the JWT authorizer,
    GET /openapi.json without)."""
    if path == "/openapi.json":
        route_key, path_parameters = "GET /openapi.json", None
    elif path == "/jobs":
        route_key, path_parameters = "ANY /jobs", None
    elif path.endswith("/result"):
        route_key, path_parameters = "ANY /jobs/{id}/result", {"id": path.split("/")[2]}
    else:
        route_key, path_parameters = "ANY /jobs/{id}", {"id": path.rsplit("/", 1)[1]}
    raw_path = path if stage == "$default" else f"/{stage}{path}"
    text = None if body is None else body if isinstance(body, str) else json.dumps(body)
    if text is not None and base64_body:
        text = base64.b64encode(text.encode()).decode()
    now = datetime.now(UTC)
    headers = {
        "accept": "application/json",
        "content-length": str(len(text or "")),
        "host": DOMAIN,
        "user-agent": "curl/8.5.0",
        "x-amzn-trace-id": f"Root=1-{int(now.timestamp()):08x}-{uuid.uuid4().hex[:24]}",
        "x-forwarded-for": "203.0.113.7",
        "x-forwarded-port": "443",
        "x-forwarded-proto": "https",
    }
    if claims is not None:
        headers["authorization"] = "Bearer eyJraWQiOiJ0ZXN0IiwiYWxnIjoiUlMyNTYifQ.e30.c2ln"
    if text is not None:
        headers["content-type"] = "application/json"
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": API_ID,
        "domainName": DOMAIN,
        "domainPrefix": API_ID,
        "http": {
            "method": method,
            "path": raw_path,
            "protocol": "HTTP/1.1",
            "sourceIp": "203.0.113.7",
            "userAgent": "curl/8.5.0",
        },
        "requestId": base64.b64encode(uuid.uuid4().bytes).decode()[:16],
        "routeKey": route_key,
        "stage": stage,
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }
    if claims is not None:
        request_context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": request_context,
        "isBase64Encoded": base64_body,
    }
    if query:
        event["queryStringParameters"] = dict(pair.split("=", 1) for pair in query.split("&"))
    if path_parameters:
        event["pathParameters"] = path_parameters
    if text is not None:
        event["body"] = text
    return event


def invoke(handler: Handler, event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """Invoke as Lambda does; the status, headers and decoded body, checked against the doc."""
    response = handler(event, LocalContext(timeout_s=29, function_name="fairqueue-admit"))
    assert set(response) == {"statusCode", "headers", "body"}
    assert response["headers"]["Content-Type"] == "application/json"
    body = json.loads(response["body"])
    method = event["requestContext"]["http"]["method"]
    path = event["rawPath"].removeprefix(f"/{event['requestContext']['stage']}")
    query = f"?{event['rawQueryString']}" if event["rawQueryString"] else ""
    assert_documented(method, path + query, response["statusCode"], body)
    return response["statusCode"], response["headers"], body


def jobs(conn: Connection) -> list[dict[str, Any]]:
    return conn.execute("select * from fairqueue.jobs order by created_at, id").fetchall()


def test_a_job_is_admitted_into_the_lane_the_claims_name(
    load_admit: LoadAdmit, conn: Connection
) -> None:
    handler = load_admit()
    body = {"type": "api_analyze", "payload": {"doc": "a"}}
    status, headers, admitted = invoke(
        handler, http_api_event("POST", "/jobs", body, claims=claims())
    )
    assert status == 202
    assert admitted == {"id": admitted["id"], "status": "pending", "place": 1, "lane": "alice"}
    assert headers["Location"] == f"/jobs/{admitted['id']}"
    (row,) = jobs(conn)
    assert (str(row["id"]), row["tenant_id"], row["lane"]) == (admitted["id"], "acme", "alice")

    second = invoke(handler, http_api_event("POST", "/jobs", body, claims=claims()))[2]
    assert (second["status"], second["place"]) == ("queued", 2)
    status, _, shown = invoke(
        handler, http_api_event("GET", f"/jobs/{admitted['id']}", claims=claims())
    )
    assert (status, shown["id"], shown["place"]) == (200, admitted["id"], 1)
    status, _, listing = invoke(
        handler, http_api_event("GET", "/jobs", query="lane=alice", claims=claims())
    )
    assert status == 200
    assert [j["id"] for j in listing["jobs"]] == [admitted["id"], second["id"]]


def test_another_tenants_claims_do_not_find_the_job(load_admit: LoadAdmit) -> None:
    handler = load_admit()
    body = {"type": "api_analyze", "payload": {"doc": "a"}}
    job_id = invoke(handler, http_api_event("POST", "/jobs", body, claims=claims()))[2]["id"]
    for stranger in (claims(tenant="evil"), claims(user="bob")):
        status, _, answer = invoke(
            handler, http_api_event("GET", f"/jobs/{job_id}", claims=stranger)
        )
        assert (status, answer["error"]["code"]) == (404, "job_not_found")


def test_a_client_saves_and_reads_the_result_of_its_done_job(
    load_admit: LoadAdmit, dsn: str, conn: Connection
) -> None:
    handler = load_admit()
    body = {"type": "api_rendered", "payload": {"doc": "a"}}
    job_id = invoke(handler, http_api_event("POST", "/jobs", body, claims=claims()))[2]["id"]
    early = invoke(handler, http_api_event("PUT", f"/jobs/{job_id}/result", {}, claims=claims()))
    assert (early[0], early[2]["error"]["code"]) == (409, "job_not_finished")
    api_support.finish_rendered(dsn)

    result = {"summary": "é", "score": 0.5}
    put = http_api_event("PUT", f"/jobs/{job_id}/result", result, claims=claims())
    assert (put["routeKey"], put["pathParameters"]) == ("ANY /jobs/{id}/result", {"id": job_id})
    status, _, saved = invoke(handler, put)
    assert status == 200
    assert (saved["job_id"], saved["saved_by"], saved["body"]) == (job_id, "client", result)
    rows = conn.execute("select job_id, tenant_id, saved_by, body from fairqueue.results")
    assert [(str(r["job_id"]), r["tenant_id"], r["saved_by"], r["body"]) for r in rows] == [
        (job_id, "acme", "client", result)
    ]
    status, _, shown = invoke(
        handler, http_api_event("GET", f"/jobs/{job_id}/result", claims=claims())
    )
    assert (status, shown) == (200, saved)
    stranger = claims(tenant="evil")
    for method in ("GET", "PUT"):
        event = http_api_event(method, f"/jobs/{job_id}/result", result, claims=stranger)
        answered, _, answer = invoke(handler, event)
        assert (answered, answer["error"]["code"]) == (404, "job_not_found")
    assert conn.execute("select count(*) as n from fairqueue.results").fetchone() == {"n": 1}


def test_a_body_naming_a_tenant_is_refused_and_admits_nothing(
    load_admit: LoadAdmit, conn: Connection
) -> None:
    handler = load_admit()
    body = {"type": "api_analyze", "payload": {"doc": "a"}, "tenant_id": "evil"}
    status, _, answer = invoke(handler, http_api_event("POST", "/jobs", body, claims=claims()))
    assert (status, answer["error"]["code"]) == (400, "invalid_body")
    assert "tenant_id is not accepted" in answer["error"]["message"]
    assert jobs(conn) == []


def test_a_base64_body_is_decoded_and_a_broken_one_refused(
    load_admit: LoadAdmit, conn: Connection
) -> None:
    handler = load_admit()
    body = {"type": "api_analyze", "payload": {"doc": "é"}}
    event = http_api_event("POST", "/jobs", body, claims=claims(), base64_body=True)
    assert invoke(handler, event)[0] == 202
    assert jobs(conn)[0]["payload"] == {"doc": "é"}
    event["body"] = "not base64!"
    status, _, answer = invoke(handler, event)
    assert (status, answer["error"]["code"]) == (400, "malformed_json")
    assert len(jobs(conn)) == 1


def test_a_named_stage_prefix_is_not_part_of_the_route(load_admit: LoadAdmit) -> None:
    handler = load_admit()
    event = http_api_event("GET", "/jobs", claims=claims(), stage="prod")
    assert event["rawPath"] == "/prod/jobs"
    assert invoke(handler, event)[:1] == (200,)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"type": "api_nothing", "payload": {}}, 422, "unknown_job_type"),
        ({"type": "api_internal", "payload": {}}, 422, "unknown_job_type"),
        ({"type": "api_paid", "payload": {}}, 402, "insufficient_credit"),
        ("{not json", 400, "malformed_json"),
    ],
)
def test_a_refused_admission_answers_its_code_and_changes_nothing(
    load_admit: LoadAdmit, dsn: str, conn: Connection, body: Any, status: int, code: str
) -> None:
    with connect(dsn, autocommit=True) as app:
        add_credits(app, "acme", 1)
    handler = load_admit()
    answered, _, answer = invoke(handler, http_api_event("POST", "/jobs", body, claims=claims()))
    assert (answered, answer["error"]["code"]) == (status, code)
    assert jobs(conn) == []
    assert [r["kind"] for r in conn.execute("select kind from fairqueue.credits")] == ["grant"]


def test_an_unavailable_upstream_is_503(load_admit: LoadAdmit, conn: Connection) -> None:
    handler = load_admit()
    api_support.UPSTREAM.available = False
    body = {"type": "api_upstream", "payload": {"doc": "a"}}
    status, _, answer = invoke(handler, http_api_event("POST", "/jobs", body, claims=claims()))
    assert (status, answer["error"]["code"]) == (503, "upstream_unavailable")
    assert jobs(conn) == []


@pytest.mark.parametrize(
    ("event_claims", "message"),
    [
        (None, "no tenant_id claim"),
        ({k: v for k, v in claims().items() if k != "tenant_id"}, "no tenant_id claim"),
        (claims(user=""), "no sub claim"),
    ],
)
def test_claims_without_a_tenant_or_lane_are_unauthorized(
    load_admit: LoadAdmit, conn: Connection, event_claims: dict[str, str] | None, message: str
) -> None:
    handler = load_admit()
    body = {"type": "api_analyze", "payload": {"doc": "a"}}
    status, headers, answer = invoke(
        handler, http_api_event("POST", "/jobs", body, claims=event_claims)
    )
    assert (status, answer["error"]["code"]) == (401, "missing_claim")
    assert message in answer["error"]["message"]
    assert headers["WWW-Authenticate"] == 'Bearer error="missing_claim"'
    assert jobs(conn) == []


def test_the_claim_names_come_from_the_function_environment(
    load_admit: LoadAdmit, conn: Connection
) -> None:
    handler = load_admit(FAIRQUEUE_TENANT_CLAIM="custom:tenant_id", FAIRQUEUE_LANE_CLAIM="username")
    event_claims = claims(user="carol", **{"custom:tenant_id": "globex"})
    del event_claims["tenant_id"]
    body = {"type": "api_analyze", "payload": {"doc": "a"}}
    status, _, admitted = invoke(
        handler, http_api_event("POST", "/jobs", body, claims=event_claims)
    )
    assert (status, admitted["lane"]) == (202, "carol")
    (row,) = jobs(conn)
    assert (row["tenant_id"], row["lane"]) == ("globex", "carol")


def test_the_openapi_document_needs_no_authorizer(load_admit: LoadAdmit) -> None:
    handler = load_admit()
    status, _, document = invoke(handler, http_api_event("GET", "/openapi.json"))
    assert (status, document) == (200, openapi_document())
    assert document["paths"] == DOC["paths"]


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("DELETE", "/jobs", 405, "method_not_allowed"),
        ("GET", "/jobs/42", 400, "invalid_id"),
        ("DELETE", "/jobs/0190b3d2-0000-7000-8000-000000000000/result", 405, "method_not_allowed"),
        ("PUT", "/jobs/42/result", 400, "invalid_id"),
    ],
)
def test_a_bad_request_line_is_refused(
    load_admit: LoadAdmit, method: str, path: str, status: int, code: str
) -> None:
    handler = load_admit()
    answered, _, answer = invoke(handler, http_api_event(method, path, claims=claims()))
    assert (answered, answer["error"]["code"]) == (status, code)


def test_an_unreachable_database_is_503(load_admit: LoadAdmit) -> None:
    closed_port = local_pooler.free_port()
    handler = load_admit(f"postgresql://fairqueue@127.0.0.1:{closed_port}/x?connect_timeout=2")
    body = {"type": "api_analyze", "payload": {"doc": "a"}}
    status, _, answer = invoke(handler, http_api_event("POST", "/jobs", body, claims=claims()))
    assert (status, answer["error"]["code"]) == (503, "database_unavailable")

"""The admission API: the core, and the local server over real HTTP with real signed tokens.

Every answer the server gives in these tests is checked against the OpenAPI document the
resolver generates from its routes and models (the one it serves).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import jwt
import pytest
from openapi_spec_validator import validate as validate_spec

from fairqueue import api, connect
from fairqueue.cli import main
from fairqueue.db import Connection
from fairqueue.dev import pooler as local_pooler
from fairqueue.errors import ConfigurationError, InvalidPayload
from fairqueue.lanes import add_credits, balance, lane_jobs
from fairqueue.roles.serve import roles_of
from fairqueue.stage import known_types
from support import api_support
from support.api_support import DOC, assert_documented, running

TESTS = Path(__file__).resolve().parents[1]
SECRET = "test-secret-of-the-local-api-0123456789"
OTHER_SECRET = "another-secret-nobody-gave-the-api-0123"
ALICE = api.mint_token(SECRET, tenant_id="acme", lane="alice")
BOB = api.mint_token(SECRET, tenant_id="acme", lane="bob")
MALLORY = api.mint_token(SECRET, tenant_id="evil", lane="alice")

# A job id nobody has; fixed, so that every test process collects the same test ids.
NO_SUCH_JOB = "0190b3d2-0000-7000-8000-000000000000"


@pytest.fixture(autouse=True)
def _api_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(api.SIGNING_KEY_ENV, SECRET)
    for name in (
        "FAIRQUEUE_TENANT_CLAIM",
        "FAIRQUEUE_LANE_CLAIM",
        "FAIRQUEUE_MAX_PAYLOAD_BYTES",
        "FAIRQUEUE_API_HOST",
        "FAIRQUEUE_API_PORT",
        "FAIRQUEUE_ENV",
    ):
        monkeypatch.delenv(name, raising=False)
    api_support.reset()


@pytest.fixture
def app(dsn: str) -> Iterator[Connection]:
    """An autocommit connection as the application role, held to the tenant policies."""
    with connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def server(dsn: str) -> Iterator[api.ApiServer]:
    with running(api.ApiServer(("127.0.0.1", 0), dsn, secret=SECRET)) as started:
        yield started


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


Address = tuple[str, int]


def call(
    to: api.ApiServer | Address,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = ALICE,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request over HTTP; the answer must be one the OpenAPI document describes."""
    host, port = to.server_address[:2] if isinstance(to, api.ApiServer) else to
    connection = http.client.HTTPConnection(str(host), port, timeout=10)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        raw = response.read()
        received = {name.lower(): value for name, value in response.getheaders()}
    finally:
        connection.close()
    assert received["content-type"] == "application/json"
    answer = Answer(response.status, received, json.loads(raw) if raw else None)
    assert_documented(method, path, answer.status, answer.body)
    return answer


def jobs(conn: Connection) -> list[dict[str, Any]]:
    return conn.execute("select * from fairqueue.jobs order by created_at, id").fetchall()


def credits(conn: Connection) -> list[dict[str, Any]]:
    return conn.execute("select kind, amount from fairqueue.credits order by id").fetchall()


def results(conn: Connection) -> list[dict[str, Any]]:
    return conn.execute("select * from fairqueue.results order by job_id").fetchall()


def error_code(answer: Answer) -> str:
    return str(answer.body["error"]["code"])


# The document.


def test_the_openapi_document_is_valid_and_served_without_a_token(server: api.ApiServer) -> None:
    validate_spec(DOC)
    answer = call(server, "GET", "/openapi.json", token=None)
    assert answer.status == 200
    validate_spec(answer.body)
    assert answer.body["paths"] == DOC["paths"]
    # The admission body names the job types clients may admit, each with its payload model.
    variants = answer.body["components"]["schemas"]["AdmitRequest"]["oneOf"]
    by_type = {v["properties"]["type"]["const"]: v["properties"]["payload"] for v in variants}
    admittable = sorted(s.name for s in known_types().values() if s.clients_may_admit)
    assert sorted(by_type) == admittable
    assert "api_internal" not in by_type
    assert by_type["api_analyze"]["required"] == ["doc"]
    # What the model allows, narrowed to what can be stored: no NUL in any text.
    assert by_type["api_analyze"]["properties"]["doc"]["pattern"] == "^[^\\u0000]*$"
    assert by_type["api_paid"]["allOf"] == [{"$ref": "#/components/schemas/StorableObject"}]
    assert call(server, "POST", "/openapi.json", {}, token=None).status == 405
    assert call(server, "GET", "/openapi.json?v=1", token=None).status == 200


def test_a_json_body_is_read_whatever_its_content_type(server: api.ApiServer) -> None:
    body = {"type": "api_analyze", "payload": {"doc": "a"}}
    for content_type in ("application/x-www-form-urlencoded", "text/plain", "multipart/form-data"):
        answer = call(server, "POST", "/jobs", body, headers={"Content-Type": content_type})
        assert answer.status == 202, (content_type, answer.body)


def test_the_error_tables_and_the_routes_agree_with_the_generated_document() -> None:
    """The document is generated from the routes and the models; what it cannot learn from
    them (each status's codes) must still cover every refusal the API answers with."""
    operations = {
        operation["operationId"]: operation
        for methods in DOC["paths"].values()
        for operation in methods.values()
    }

    def documented(operation_id: str, status: int) -> set[str]:
        reference = operations[operation_id]["responses"][str(status)]["$ref"]
        response = DOC["components"]["responses"][reference.rsplit("/", 1)[1]]
        schema = response["content"]["application/json"]["schema"]["allOf"][1]
        return set(schema["properties"]["error"]["properties"]["code"]["enum"])

    for _, status, code in api.ADMIT_ERRORS:
        assert code in documented("admitJob", status), code
    for _, status, code in api.SAVE_RESULT_ERRORS:
        assert code in documented("saveJobResult", status), code
    assert set(api.ROUTES) == set(DOC["paths"])
    for route, methods in api.ROUTES.items():
        assert {m.lower() for m in methods} == set(DOC["paths"][route]), route
    admit_body = DOC["components"]["schemas"]["AdmitRequest"]["oneOf"][0]
    assert admit_body["additionalProperties"] is False
    assert set(admit_body["properties"]) == set(api.AdmitRequest.model_fields)


# Admission and reading back.


def test_a_job_is_admitted_into_the_callers_lane_and_read_back(
    server: api.ApiServer, conn: Connection
) -> None:
    answer = call(server, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "a"}})
    assert answer.status == 202
    job_id = answer.body["id"]
    assert answer.body == {"id": job_id, "status": "pending", "place": 1, "lane": "alice"}
    assert answer.headers["location"] == f"/jobs/{job_id}"
    (row,) = jobs(conn)
    assert (str(row["id"]), row["tenant_id"], row["lane"], row["credit_cost"]) == (
        job_id,
        "acme",
        "alice",
        0,
    )

    shown = call(server, "GET", f"/jobs/{job_id}")
    assert shown.status == 200
    assert shown.body["id"] == job_id
    assert (shown.body["type"], shown.body["status"], shown.body["lane"]) == (
        "api_analyze",
        "pending",
        "alice",
    )
    assert (shown.body["place"], shown.body["attempts"], shown.body["delta_of"]) == (1, 0, None)
    assert datetime.fromisoformat(shown.body["created_at"]) == row["created_at"]
    assert shown.body["finished_at"] is None and shown.body["last_error"] is None


def test_a_finished_job_has_no_place_and_shows_its_error(
    server: api.ApiServer, conn: Connection
) -> None:
    job_id = call(server, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "a"}}).body[
        "id"
    ]
    conn.execute(
        "update fairqueue.jobs set status = 'failed', attempts = 3, finished_at = now(),"
        " last_error = 'boom' where id = %s",
        (job_id,),
    )
    # Out of the hot table, as the backstop moves finished jobs: the view still finds it.
    moved = conn.execute("select fairqueue.move_finished(10, interval '1 s') as n").fetchone()
    assert moved["n"] == 1
    shown = call(server, "GET", f"/jobs/{job_id}").body
    assert (shown["status"], shown["place"], shown["attempts"], shown["last_error"]) == (
        "failed",
        None,
        3,
        "boom",
    )
    assert shown["finished_at"] is not None
    assert call(server, "GET", "/jobs").body == {"lane": "alice", "jobs": []}


def test_a_busy_lane_queues_and_the_listing_is_in_lane_order(
    server: api.ApiServer, app: Connection
) -> None:
    admitted = [
        call(server, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": doc}}).body
        for doc in ("first", "second", "third")
    ]
    delta = call(
        server,
        "POST",
        "/jobs",
        {"type": "api_analyze", "payload": {"doc": "first again"}, "delta_of": admitted[0]["id"]},
    ).body
    assert [(a["status"], a["place"]) for a in admitted] == [
        ("pending", 1),
        ("queued", 2),
        ("queued", 3),
    ]
    assert (delta["status"], delta["place"]) == ("pending", 1)
    call(server, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "b"}}, token=BOB)

    listing = call(server, "GET", "/jobs")
    assert listing.status == 200
    assert listing.body["lane"] == "alice"
    listed = listing.body["jobs"]
    expected = [str(row["id"]) for row in lane_jobs(app, "acme", "alice")]
    assert [j["id"] for j in listed] == expected
    assert expected == [*(a["id"] for a in admitted), delta["id"]]
    assert [(j["status"], j["place"]) for j in listed] == [
        ("pending", 1),
        ("queued", 2),
        ("queued", 3),
        ("pending", 1),
    ]
    assert listed[3]["delta_of"] == admitted[0]["id"]
    for job in listed:
        shown = call(server, "GET", f"/jobs/{job['id']}").body
        # Only the one job's answer says why it waits; the list leaves that out.
        assert job["waiting"] is None
        assert {**shown, "waiting": None} == job
    third = call(server, "GET", f"/jobs/{admitted[2]['id']}").body
    assert third["waiting"] == [
        f"it waits in lane 'alice' behind 2 job(s); job {admitted[0]['id']} holds it"
    ]
    first = call(server, "GET", f"/jobs/{admitted[0]['id']}").body
    assert first["waiting"] == ["it is next: the next claim of type 'api_analyze' takes it"]
    assert call(server, "GET", "/jobs?lane=alice").body == listing.body


def test_another_tenants_job_and_another_lanes_are_not_found(server: api.ApiServer) -> None:
    job_id = call(server, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "a"}}).body[
        "id"
    ]
    nobody = uuid4()
    other_tenant = call(server, "GET", f"/jobs/{job_id}", token=MALLORY)
    other_lane = call(server, "GET", f"/jobs/{job_id}", token=BOB)
    missing = call(server, "GET", f"/jobs/{nobody}")
    for answer in (other_tenant, other_lane, missing):
        assert (answer.status, error_code(answer)) == (404, "job_not_found")
    # "Not yours" and "not there" read the same, the id aside.
    assert other_tenant.body == other_lane.body
    assert missing.body["error"]["message"] == other_tenant.body["error"]["message"].replace(
        job_id, str(nobody)
    )
    assert call(server, "GET", "/jobs", token=MALLORY).body == {"lane": "alice", "jobs": []}
    elsewhere = call(server, "GET", "/jobs?lane=bob")
    assert (elsewhere.status, error_code(elsewhere)) == (404, "lane_not_found")


def test_a_paid_job_costs_its_stages_price(
    server: api.ApiServer, app: Connection, conn: Connection
) -> None:
    add_credits(app, "acme", 12)
    answer = call(server, "POST", "/jobs", {"type": "api_paid", "payload": {}})
    assert answer.status == 202
    assert balance(app, "acme") == 12 - api_support.COST
    assert [(r["kind"], r["amount"]) for r in credits(conn)] == [
        ("grant", 12),
        ("debit", -api_support.COST),
    ]


def test_delete_cancels_a_job_that_has_not_started_refunds_it_and_moves_the_lane(
    server: api.ApiServer, app: Connection, conn: Connection
) -> None:
    add_credits(app, "acme", 12)
    first, second = (
        call(server, "POST", "/jobs", {"type": "api_paid", "payload": {"n": n}}).body["id"]
        for n in range(2)
    )
    other = call(
        server, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "b"}}, token=BOB
    )
    # Another lane's job, another tenant's and none at all: the same 404, nothing changed.
    for token, job_id in ((ALICE, other.body["id"]), (MALLORY, first), (ALICE, str(uuid4()))):
        refused = call(server, "DELETE", f"/jobs/{job_id}", token=token)
        assert (refused.status, error_code(refused)) == (404, "job_not_found")
    assert balance(app, "acme") == 12 - 2 * api_support.COST

    cancelled = call(server, "DELETE", f"/jobs/{first}")
    assert cancelled.status == 200
    assert (cancelled.body["id"], cancelled.body["status"], cancelled.body["place"]) == (
        first,
        "cancelled",
        None,
    )
    assert balance(app, "acme") == 12 - api_support.COST
    # The queued job now holds the lane.
    assert call(server, "GET", f"/jobs/{second}").body["status"] == "pending"

    again = call(server, "DELETE", f"/jobs/{first}")
    assert (again.status, error_code(again)) == (409, "job_not_cancellable")
    assert "is cancelled" in again.body["error"]["message"]
    assert balance(app, "acme") == 12 - api_support.COST
    assert [r["kind"] for r in credits(conn)] == ["grant", "debit", "debit", "refund"]


def test_each_answered_request_is_one_log_line_with_its_status(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The line is written after the answer is sent: closing the server joins the request
    # threads, so every line is in before the records are read.
    with (
        caplog.at_level(logging.INFO, logger="fairqueue.api"),
        running(api.ApiServer(("127.0.0.1", 0), dsn, secret=SECRET)) as server,
    ):
        call(server, "GET", "/jobs?lane=alice")
        call(server, "GET", f"/jobs/{uuid4()}")
    requests = [r for r in caplog.records if r.getMessage() == "request"]
    assert [(r.method, r.path, r.status) for r in requests] == [  # type: ignore[attr-defined]
        ("GET", "/jobs", 200),
        ("GET", requests[1].path, 404),  # type: ignore[attr-defined]
    ]


def test_a_second_open_job_with_the_same_dedupe_key_is_a_conflict(
    server: api.ApiServer, conn: Connection
) -> None:
    body = {"type": "api_analyze", "payload": {"doc": "a"}, "dedupe_key": "k1", "group_id": "g"}
    assert call(server, "POST", "/jobs", body).status == 202
    again = call(server, "POST", "/jobs", body)
    assert (again.status, error_code(again)) == (409, "duplicate_job")
    assert "dedupe key" in again.body["error"]["message"]
    assert len(jobs(conn)) == 1


def test_work_the_upstream_accepts_is_held_for_the_job(
    server: api.ApiServer, conn: Connection
) -> None:
    answer = call(server, "POST", "/jobs", {"type": "api_upstream", "payload": {"doc": "ok"}})
    assert answer.status == 202
    assert list(api_support.UPSTREAM.work) == [answer.body["id"]]
    assert jobs(conn)[0]["upstream_id"] == answer.body["id"]


# Refusals: each one answers its code and changes nothing.

BAD_ADMISSIONS = [
    pytest.param(b"{", 400, "malformed_json", "not valid JSON", id="malformed"),
    pytest.param(b"", 400, "malformed_json", "empty", id="empty"),
    pytest.param(b'{"type": NaN}', 400, "malformed_json", "NaN", id="nan"),
    pytest.param(b"\xff\xfe\xfa", 400, "malformed_json", "not valid JSON", id="not-utf8"),
    pytest.param(b"[" * 10_000, 400, "malformed_json", "nested too deeply", id="deep"),
    pytest.param([], 400, "invalid_body", "must be a JSON object, got an array", id="array"),
    pytest.param({"payload": {}}, 400, "invalid_body", "type is missing", id="no-type"),
    pytest.param(
        {"type": "api_analyze", "payload": ["doc"]},
        400,
        "invalid_body",
        "payload: Input should be a valid dictionary",
        id="payload-array",
    ),
    pytest.param(
        {"type": 7, "payload": {}}, 400, "invalid_body", "type: Input should be", id="type-int"
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "tenant_id": "other"},
        400,
        "invalid_body",
        "tenant_id is not accepted: the tenant comes from your token",
        id="tenant_id",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "lane": "bob"},
        400,
        "invalid_body",
        "lane is not accepted: the lane comes from your token",
        id="lane",
    ),
    pytest.param(
        {"type": "api_paid", "payload": {}, "cost": 0},
        400,
        "invalid_body",
        "cost is not accepted: the cost is the job type's own",
        id="cost",
    ),
    *(
        pytest.param(
            {"type": "api_analyze", "payload": {"doc": "a"}, "fair_cost": bad},
            400,
            "invalid_body",
            "fair_cost: ",
            id=f"fair-cost-{bad!r}",
        )
        for bad in (0, -1, 1.5, True, "3", None, 1_000_000_001)
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "priority": 1},
        400,
        "invalid_body",
        "priority is not accepted: accepted fields: type, payload",
        id="unknown-field",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "delta_of": "yesterday"},
        400,
        "invalid_body",
        "delta_of: Input should be a valid UUID",
        id="delta-not-uuid",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "dedupe_key": ""},
        400,
        "invalid_body",
        "dedupe_key: String should have at least 1 character",
        id="empty-dedupe-key",
    ),
    pytest.param(
        {"type": "api_nothing", "payload": {}},
        422,
        "unknown_job_type",
        "unknown job type 'api_nothing'",
        id="unknown-type",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"text": "a"}},
        422,
        "invalid_payload",
        "does not fit the stage's model",
        id="payload-misfit",
    ),
    pytest.param(
        b'{"type": "api_analyze", "payload": {"doc": "a\\u0000b"}}',
        422,
        "invalid_payload",
        "NUL character",
        id="payload-nul",
    ),
    pytest.param(
        b'{"type": "api_analyze", "payload": {"doc": "a", "note": "\\ud800"}}',
        422,
        "invalid_payload",
        "note is not valid Unicode",
        id="payload-lone-surrogate",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "dedupe_key": "a\x00b"},
        422,
        "invalid_payload",
        "dedupe_key holds a NUL",
        id="dedupe-key-nul",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "group_id": "g\x00"},
        422,
        "invalid_payload",
        "group_id holds a NUL",
        id="group-id-nul",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "group_id": "g" * 201},
        400,
        "invalid_body",
        "group_id: String should have at most 200 characters",
        id="group-id-too-long",
    ),
    pytest.param(
        {"type": "api_upstream", "payload": {"doc": "forbidden"}},
        422,
        "upstream_rejected",
        "the document 'forbidden' cannot be analysed",
        id="upstream-rejected",
    ),
    pytest.param(
        {"type": "api_analyze", "payload": {"doc": "a"}, "delta_of": str(uuid4())},
        404,
        "delta_of_not_found",
        "to re-check",
        id="delta-of-unknown",
    ),
    pytest.param(
        {"type": "api_paid", "payload": {"big": "x" * 100}},
        413,
        "payload_too_large",
        "over the limit of 64",
        id="payload-too-large",
    ),
    pytest.param(
        json.dumps({"type": "api_paid", "payload": {"big": "x" * 20_000}}).encode(),
        413,
        "payload_too_large",
        "the body is",
        id="body-too-large",
    ),
    pytest.param(
        {"type": "api_paid", "payload": {}, "group_id": "g"},
        402,
        "insufficient_credit",
        f"costs {api_support.COST} credits; the balance is 3",
        id="insufficient-credit",
    ),
]


@pytest.mark.parametrize(("body", "status", "code", "message"), BAD_ADMISSIONS)
def test_a_refused_admission_answers_its_code_and_changes_nothing(
    server: api.ApiServer,
    app: Connection,
    conn: Connection,
    monkeypatch: pytest.MonkeyPatch,
    body: Any,
    status: int,
    code: str,
    message: str,
) -> None:
    monkeypatch.setenv("FAIRQUEUE_MAX_PAYLOAD_BYTES", "64")
    add_credits(app, "acme", 3)
    answer = call(server, "POST", "/jobs", body)
    assert (answer.status, error_code(answer)) == (status, code), answer.body
    assert message in answer.body["error"]["message"]
    assert jobs(conn) == []
    assert [(r["kind"], r["amount"]) for r in credits(conn)] == [("grant", 3)]
    assert api_support.UPSTREAM.work == {}


@pytest.mark.parametrize("depth", [70, 340, 950])
def test_a_payload_nested_past_the_limit_is_refused_and_changes_nothing(
    server: api.ApiServer, conn: Connection, depth: int
) -> None:
    body = b'{"type": "api_analyze", "payload": {"doc": "a", "x": ' + b'{"x": ' * depth
    body += b"1" + b"}" * depth + b"}}"
    answer = call(server, "POST", "/jobs", body)
    assert (answer.status, error_code(answer)) == (422, "invalid_payload"), answer.body
    assert "nests deeper than 64 levels" in answer.body["error"]["message"]
    assert jobs(conn) == []


def test_a_result_nested_past_the_limit_is_refused_and_saves_nothing(
    server: api.ApiServer, dsn: str, conn: Connection
) -> None:
    job_id = done_job(server, dsn, {"doc": "a"})
    depth = 300
    body = b'{"x": ' * depth + b"1" + b"}" * depth
    answer = call(server, "PUT", f"/jobs/{job_id}/result", body)
    assert (answer.status, error_code(answer)) == (422, "invalid_result"), answer.body
    assert "nests deeper than 64 levels" in answer.body["error"]["message"]
    assert results(conn) == []
    assert call(server, "GET", f"/jobs/{job_id}/result").status == 404


def test_an_internal_job_type_is_refused_as_if_no_stage_had_its_name(
    server: api.ApiServer, app: Connection, conn: Connection
) -> None:
    add_credits(app, "acme", 10)
    internal = call(server, "POST", "/jobs", {"type": "api_internal", "payload": {}})
    unknown = call(server, "POST", "/jobs", {"type": "api_nothing", "payload": {}})
    for answer in (internal, unknown):
        assert (answer.status, error_code(answer)) == (422, "unknown_job_type")
    # The same words, the name aside: nothing tells that an internal api_internal exists.
    assert internal.body["error"]["message"] == unknown.body["error"]["message"].replace(
        "api_nothing", "api_internal"
    )
    assert "api_internal" not in unknown.body["error"]["message"]
    assert jobs(conn) == []
    assert [(r["kind"], r["amount"]) for r in credits(conn)] == [("grant", 10)]


def test_an_unreachable_upstream_is_unavailable_and_admits_nothing(
    server: api.ApiServer, conn: Connection
) -> None:
    api_support.UPSTREAM.available = False
    answer = call(server, "POST", "/jobs", {"type": "api_upstream", "payload": {"doc": "ok"}})
    assert (answer.status, error_code(answer)) == (503, "upstream_unavailable")
    assert "unavailable" in answer.body["error"]["message"]
    assert jobs(conn) == []


def test_an_unreachable_database_is_unavailable(dsn: str) -> None:
    closed_port = local_pooler.free_port()
    nowhere = f"postgresql://fairqueue@127.0.0.1:{closed_port}/fairqueue?connect_timeout=2"
    with running(api.ApiServer(("127.0.0.1", 0), nowhere, secret=SECRET)) as server:
        requests = [
            ("POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "a"}}),
            ("GET", "/jobs", None),
            ("GET", f"/jobs/{uuid4()}", None),
            ("GET", f"/jobs/{uuid4()}/result", None),
            ("PUT", f"/jobs/{uuid4()}/result", {"summary": "s"}),
        ]
        for method, path, body in requests:
            answer = call(server, method, path, body)
            assert (answer.status, error_code(answer)) == (503, "database_unavailable")


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(
    server: api.ApiServer,
) -> None:
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), port), timeout=10) as raw:
        raw.sendall(
            b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + ALICE.encode() + b"\r\n"
            b"Content-Length: 1000000000\r\n\r\n"
        )
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"413"
    assert json.loads(body)["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/jobs/not-a-uuid", 400, "invalid_id"),
        ("GET", "/jobs?page=2", 400, "invalid_query"),
        ("GET", "/jobs?lane=", 400, "invalid_query"),
        ("GET", "/jobs?lane=alice&lane=bob", 400, "invalid_query"),
        ("GET", f"/jobs/{NO_SUCH_JOB}?verbose=1", 400, "invalid_query"),
        ("DELETE", "/jobs", 405, "method_not_allowed"),
        ("PUT", f"/jobs/{NO_SUCH_JOB}", 405, "method_not_allowed"),
        ("GET", "/queues", 404, "not_found"),
        ("GET", "/jobs/", 404, "not_found"),
        ("GET", "/jobs/not-a-uuid/result", 400, "invalid_id"),
        ("PUT", "/jobs/not-a-uuid/result", 400, "invalid_id"),
        ("GET", f"/jobs/{NO_SUCH_JOB}/result?verbose=1", 400, "invalid_query"),
        ("POST", f"/jobs/{NO_SUCH_JOB}/result", 405, "method_not_allowed"),
        ("GET", f"/jobs/{NO_SUCH_JOB}/result/body", 404, "not_found"),
        # What no route's id pattern takes is still the route's: not a job id.
        ("GET", "/jobs/%00", 400, "invalid_id"),
        ("PUT", "/jobs/%00/result", 400, "invalid_id"),
        ("GET", "/jobs/%ff", 400, "invalid_id"),
        ("GET", "/jobs?%00=1", 400, "invalid_query"),
        ("GET", "/jobs?lane=%00", 404, "lane_not_found"),
        ("OPTIONS", "/jobs", 405, "method_not_allowed"),
    ],
)
def test_a_bad_request_line_is_refused(
    server: api.ApiServer, method: str, path: str, status: int, code: str
) -> None:
    answer = call(server, method, path)
    assert (answer.status, error_code(answer)) == (status, code), answer.body


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "BREW"])
@pytest.mark.parametrize("query", ["", "?lane=0", "?page=2"])
def test_a_method_no_route_knows_gets_the_json_405(
    server: api.ApiServer, method: str, query: str
) -> None:
    answer = call(server, method, f"/jobs{query}")
    assert (answer.status, error_code(answer)) == (405, "method_not_allowed"), answer.body
    assert answer.headers["allow"] == "GET, POST"


@pytest.mark.parametrize("claim", ["tenant_id", "lane"])
def test_a_signed_token_whose_claim_holds_a_nul_is_unauthorized(
    server: api.ApiServer, conn: Connection, claim: str
) -> None:
    identity = {"tenant_id": "acme", "lane": "alice", claim: "ac\x00me"}
    # mint_token refuses such a claim; a token signed elsewhere can still carry one.
    with pytest.raises(InvalidPayload, match="holds a NUL"):
        api.mint_token(SECRET, tenant_id=identity["tenant_id"], lane=identity["lane"])
    names = api.ClaimNames()
    token = jwt.encode(
        {
            names.tenant: identity["tenant_id"],
            names.lane: identity["lane"],
            "exp": datetime.now(UTC) + timedelta(minutes=5),
        },
        SECRET,
        algorithm=api.SIGNING_ALGORITHM,
    )
    for method, path in (("GET", "/jobs"), ("POST", "/jobs"), ("GET", f"/jobs/{uuid4()}")):
        body = {"type": "api_analyze", "payload": {"doc": "a"}} if method == "POST" else None
        answer = call(server, method, path, body, token=token)
        assert (answer.status, error_code(answer)) == (401, "invalid_token"), answer.body
        assert "holds a NUL" in answer.body["error"]["message"]
    assert jobs(conn) == []


def test_a_wrong_method_names_the_methods_allowed(server: api.ApiServer) -> None:
    answer = call(server, "PATCH", "/jobs")
    assert answer.headers["allow"] == "GET, POST"
    assert answer.body["error"]["message"] == "PATCH is not allowed on /jobs; use GET or POST"
    on_result = call(server, "DELETE", f"/jobs/{uuid4()}/result")
    assert on_result.headers["allow"] == "GET, PUT"
    assert on_result.body["error"]["message"] == (
        "DELETE is not allowed on /jobs/{id}/result; use GET or PUT"
    )


# Results.


def done_job(server: api.ApiServer, dsn: str, payload: dict[str, Any]) -> str:
    """A job of alice's lane, run to done with its output; its id."""
    admitted = call(server, "POST", "/jobs", {"type": "api_rendered", "payload": payload})
    assert admitted.status == 202
    api_support.finish_rendered(dsn)
    return str(admitted.body["id"])


def test_a_client_saves_the_result_of_its_done_job_and_reads_it_back(
    server: api.ApiServer, dsn: str, conn: Connection
) -> None:
    job_id = done_job(server, dsn, {"doc": "q3"})
    shown = call(server, "GET", f"/jobs/{job_id}").body
    assert (shown["status"], shown["place"], shown["output"]) == (
        "done",
        None,
        {"echo": {"doc": "q3"}},
    )
    before = call(server, "GET", f"/jobs/{job_id}/result")
    assert (before.status, error_code(before)) == (404, "result_not_found")

    saved = call(server, "PUT", f"/jobs/{job_id}/result", {"summary": "3 pages", "pages": [1]})
    assert saved.status == 200
    assert saved.body["job_id"] == saved.body["source_job_id"] == job_id
    assert (saved.body["saved_by"], saved.body["body"]) == (
        "client",
        {"summary": "3 pages", "pages": [1]},
    )
    (row,) = results(conn)
    assert (str(row["job_id"]), row["tenant_id"], row["saved_by"], row["body"]) == (
        job_id,
        "acme",
        "client",
        {"summary": "3 pages", "pages": [1]},
    )
    assert datetime.fromisoformat(saved.body["saved_at"]) == row["saved_at"]
    after = call(server, "GET", f"/jobs/{job_id}/result")
    assert (after.status, after.body) == (200, saved.body)

    # Saving again replaces the body: still one row.
    again = call(server, "PUT", f"/jobs/{job_id}/result", {"summary": "4 pages"})
    assert (again.status, again.body["body"]) == (200, {"summary": "4 pages"})
    assert [r["body"] for r in results(conn)] == [{"summary": "4 pages"}]


def test_an_open_job_has_no_output_and_its_result_cannot_be_saved(
    server: api.ApiServer, conn: Connection
) -> None:
    job_id = call(server, "POST", "/jobs", {"type": "api_rendered", "payload": {}}).body["id"]
    assert call(server, "GET", "/jobs").body["jobs"][0]["output"] is None
    refused = call(server, "PUT", f"/jobs/{job_id}/result", {"summary": "early"})
    assert (refused.status, error_code(refused)) == (409, "job_not_finished")
    assert refused.body["error"]["message"] == f"job {job_id} is pending, not done"
    missing = call(server, "GET", f"/jobs/{job_id}/result")
    assert (missing.status, error_code(missing)) == (404, "result_not_found")
    assert results(conn) == []


def test_a_result_of_another_tenants_or_lanes_job_is_not_found_and_not_saved(
    server: api.ApiServer, dsn: str, conn: Connection
) -> None:
    job_id = done_job(server, dsn, {"doc": "a"})
    for token in (MALLORY, BOB):
        saved = call(server, "PUT", f"/jobs/{job_id}/result", {"summary": "x"}, token=token)
        read = call(server, "GET", f"/jobs/{job_id}/result", token=token)
        for answer in (saved, read):
            assert (answer.status, error_code(answer)) == (404, "job_not_found")
            assert answer.body["error"]["message"] == f"no job {job_id} in your lane"
    nobody = call(server, "PUT", f"/jobs/{uuid4()}/result", {"summary": "x"})
    assert (nobody.status, error_code(nobody)) == (404, "job_not_found")
    assert results(conn) == []
    # Once alice has saved it, it is still not theirs to read.
    assert call(server, "PUT", f"/jobs/{job_id}/result", {"summary": "mine"}).status == 200
    for token in (MALLORY, BOB):
        assert call(server, "GET", f"/jobs/{job_id}/result", token=token).status == 404


def test_a_result_row_another_tenant_made_first_is_a_404_and_nothing_changes(
    server: api.ApiServer, dsn: str, conn: Connection
) -> None:
    job_id = done_job(server, dsn, {"doc": "a"})
    # A row under alice's job made by another tenant before the database refused such rows
    # (the trigger results_job): her save meets a row she may not see.
    conn.execute("alter table fairqueue.results disable trigger results_job")
    conn.execute(
        "insert into fairqueue.results (job_id, tenant_id, type, body, saved_by, source_job_id,"
        " source_created_at) values (%s, 'initech', 'api_rendered', '{}', 'client', %s, now())",
        (job_id, job_id),
    )
    conn.execute("alter table fairqueue.results enable trigger results_job")
    before = results(conn)
    saved = call(server, "PUT", f"/jobs/{job_id}/result", {"summary": "mine"})
    assert (saved.status, error_code(saved)) == (404, "job_not_found"), saved.body
    read = call(server, "GET", f"/jobs/{job_id}/result")
    assert (read.status, error_code(read)) == (404, "result_not_found")
    assert results(conn) == before


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        pytest.param([], 400, "invalid_body", "must be a JSON object, got an array", id="array"),
        pytest.param("done", 400, "invalid_body", "got a string", id="string"),
        pytest.param(b"", 400, "malformed_json", "empty", id="empty"),
        pytest.param(b'{"summary": ', 400, "malformed_json", "not valid JSON", id="malformed"),
        pytest.param(b'{"score": NaN}', 400, "malformed_json", "NaN", id="nan"),
        pytest.param(
            b'{"score": 1e400}', 422, "invalid_result", "not JSON-serializable", id="infinite"
        ),
        pytest.param(b'{"summary": "a\\u0000b"}', 422, "invalid_result", "NUL character", id="nul"),
        pytest.param(
            json.dumps({"summary": "x" * 20_000}).encode(),
            413,
            "payload_too_large",
            "the body is",
            id="too-large",
        ),
    ],
)
def test_a_refused_result_answers_its_code_and_saves_nothing(
    server: api.ApiServer,
    dsn: str,
    conn: Connection,
    monkeypatch: pytest.MonkeyPatch,
    body: Any,
    status: int,
    code: str,
    message: str,
) -> None:
    job_id = done_job(server, dsn, {"doc": "a"})
    monkeypatch.setenv("FAIRQUEUE_MAX_PAYLOAD_BYTES", "64")
    answer = call(server, "PUT", f"/jobs/{job_id}/result", body)
    assert (answer.status, error_code(answer)) == (status, code), answer.body
    assert message in answer.body["error"]["message"]
    assert results(conn) == []


def test_a_recheck_shares_its_originals_result(
    server: api.ApiServer, dsn: str, conn: Connection
) -> None:
    original = call(server, "POST", "/jobs", {"type": "api_rendered", "payload": {"v": 1}})
    recheck = call(
        server,
        "POST",
        "/jobs",
        {"type": "api_rendered", "payload": {"v": 2}, "delta_of": original.body["id"]},
    )
    api_support.finish_rendered(dsn)
    saved = call(server, "PUT", f"/jobs/{recheck.body['id']}/result", {"summary": "v2"})
    assert saved.status == 200
    assert (saved.body["job_id"], saved.body["source_job_id"]) == (
        original.body["id"],
        recheck.body["id"],
    )
    assert call(server, "GET", f"/jobs/{original.body['id']}/result").body == saved.body
    assert call(server, "GET", f"/jobs/{recheck.body['id']}/result").body == saved.body
    assert len(results(conn)) == 1


# Tokens.


def signed(claims: dict[str, Any], secret: str = SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, secret, algorithm=algorithm)


def soon() -> datetime:
    return datetime.now(UTC) + timedelta(minutes=5)


@pytest.mark.parametrize(
    ("authorization", "code", "message"),
    [
        (None, "missing_token", "send Authorization: Bearer <token>"),
        ("Basic YWxpY2U6c2VjcmV0", "invalid_token", "must be 'Bearer <token>'"),
        ("Bearer", "invalid_token", "must be 'Bearer <token>'"),
        ("Bearer not.a.token", "invalid_token", "the token was refused"),
        (
            "Bearer " + signed({"tenant_id": "acme", "sub": "alice", "exp": soon()}, OTHER_SECRET),
            "invalid_token",
            "Signature verification failed",
        ),
        (
            "Bearer " + signed({"tenant_id": "acme", "sub": "alice"}),
            "invalid_token",
            'missing the "exp" claim',
        ),
        (
            "Bearer "
            + signed({"tenant_id": "acme", "sub": "alice", "exp": soon()}, SECRET * 2, "HS512"),
            "invalid_token",
            "alg value is not allowed",
        ),
        (
            "Bearer " + signed({"tenant_id": "acme", "sub": "alice", "exp": soon()}, "", "none"),
            "invalid_token",
            "alg value is not allowed",
        ),
        (
            "Bearer "
            + signed(
                {"tenant_id": "acme", "sub": "alice", "exp": datetime.now(UTC) - timedelta(1)}
            ),
            "expired_token",
            "has expired",
        ),
        (
            "Bearer " + signed({"sub": "alice", "exp": soon()}),
            "missing_claim",
            "no tenant_id claim",
        ),
        (
            "Bearer " + signed({"tenant_id": "acme", "sub": "", "exp": soon()}),
            "missing_claim",
            "no sub claim",
        ),
    ],
)
def test_a_request_without_a_valid_token_is_unauthorized_and_changes_nothing(
    server: api.ApiServer, conn: Connection, authorization: str | None, code: str, message: str
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    answer = call(
        server,
        "POST",
        "/jobs",
        {"type": "api_analyze", "payload": {"doc": "a"}},
        token=None,
        headers=headers,
    )
    assert (answer.status, error_code(answer)) == (401, code)
    assert message in answer.body["error"]["message"]
    assert answer.headers["www-authenticate"] == f'Bearer error="{code}"'
    assert jobs(conn) == []
    assert call(server, "GET", "/jobs", token=None, headers=headers).status == 401


def test_the_claim_names_come_from_the_environment(
    dsn: str, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUEUE_TENANT_CLAIM", "custom:org")
    monkeypatch.setenv("FAIRQUEUE_LANE_CLAIM", "username")
    token = signed({"custom:org": "acme", "username": "carol", "sub": "ignored", "exp": soon()})
    with running(api.ApiServer(("127.0.0.1", 0), dsn, secret=SECRET)) as server:
        answer = call(
            server, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "a"}}, token=token
        )
        assert (answer.status, answer.body["lane"]) == (202, "carol")
        refused = call(server, "GET", "/jobs", token=ALICE)
        assert (refused.status, error_code(refused)) == (401, "missing_claim")
    (row,) = jobs(conn)
    assert (row["tenant_id"], row["lane"]) == ("acme", "carol")


def test_token_prints_a_token_the_api_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "--tenant", "acme", "--lane", "alice", "--ttl", "60"]) == 0
    token = capsys.readouterr().out.strip()
    identity = api.authenticate(f"Bearer {token}", SECRET, api.ClaimNames())
    assert identity == api.Identity(tenant_id="acme", lane="alice")
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert 55 <= claims["exp"] - time.time() <= 60


@pytest.mark.parametrize(
    ("secret", "ttl", "message"),
    [
        (None, "60", "FAIRQUEUE_API_SECRET is not set"),
        ("short", "60", "FAIRQUEUE_API_SECRET is 5 bytes; it must be at least 32"),
    ],
)
def test_token_refuses_without_a_usable_secret_or_lifetime(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    secret: str | None,
    ttl: str,
    message: str,
) -> None:
    if secret is None:
        monkeypatch.delenv(api.SIGNING_KEY_ENV)
    else:
        monkeypatch.setenv(api.SIGNING_KEY_ENV, secret)
    assert main(["token", "--tenant", "acme", "--lane", "alice", "--ttl", ttl]) == 2
    assert message in capsys.readouterr().err


# The core without HTTP.


def test_the_core_takes_the_tenant_and_lane_from_the_identity_only(
    app: Connection, conn: Connection
) -> None:
    alice = api.Identity(tenant_id="acme", lane="alice")
    body = json.dumps({"type": "api_analyze", "payload": {"doc": "a"}}).encode()
    admitted = api.handle("POST", "/jobs", {}, body, alice, app)
    assert admitted.status == 202
    job_id = admitted.body["id"]
    shown = api.handle("GET", f"/jobs/{job_id}", {}, b"", alice, app)
    assert (shown.status, shown.body["id"]) == (200, job_id)
    stranger = api.Identity(tenant_id="other", lane="alice")
    assert api.handle("GET", f"/jobs/{job_id}", {}, b"", stranger, app).status == 404
    assert api.handle("GET", "/jobs", {"lane": ["alice"]}, b"", stranger, app).body == {
        "lane": "alice",
        "jobs": [],
    }
    (row,) = jobs(conn)
    assert (row["tenant_id"], row["lane"]) == ("acme", "alice")


def test_the_core_on_a_connection_that_bypasses_rls_still_sees_one_tenants_lane(
    conn: Connection,
) -> None:
    """As in local development on the embedded Postgres: a superuser is not held by the
    policies, so the queries' own tenant condition is what keeps two lanes named alike apart."""
    setting = conn.execute("select current_setting('is_superuser') as superuser").fetchone()
    assert setting == {"superuser": "on"}
    acme = api.Identity(tenant_id="acme", lane="alice")
    globex = api.Identity(tenant_id="globex", lane="alice")

    def core(method: str, path: str, identity: api.Identity, body: Any = None) -> api.Reply:
        raw = b"" if body is None else json.dumps(body).encode()
        reply = api.handle(method, path, {}, raw, identity, conn)
        assert_documented(method, path, reply.status, reply.body)
        return reply

    def admit_as(identity: api.Identity, doc: str) -> str:
        reply = core("POST", "/jobs", identity, {"type": "api_analyze", "payload": {"doc": doc}})
        assert reply.status == 202
        return str(reply.body["id"])

    own = {
        acme: [admit_as(acme, "a1"), admit_as(acme, "a2")],
        globex: [admit_as(globex, "g1"), admit_as(globex, "g2"), admit_as(globex, "g3")],
    }
    for identity, other in ((acme, globex), (globex, acme)):
        listed = core("GET", "/jobs", identity).body["jobs"]
        assert [j["id"] for j in listed] == own[identity]
        assert [j["place"] for j in listed] == list(range(1, len(own[identity]) + 1))
        for place, job in enumerate(listed):
            shown = core("GET", f"/jobs/{job['id']}", identity).body
            assert {**shown, "waiting": None} == job
            # Its lane's count is its own tenant's, though another's lane has the same name.
            assert bool(place) == any(f"behind {place} job(s)" in w for w in shown["waiting"])
        for job_id in own[other]:
            for method, path in (("GET", f"/jobs/{job_id}"), ("PUT", f"/jobs/{job_id}/result")):
                refused = core(
                    method, path, identity, {"summary": "x"} if method == "PUT" else None
                )
                assert (refused.status, refused.body["error"]["code"]) == (404, "job_not_found")
    assert results(conn) == []


def test_the_core_answers_a_lost_connection_with_503(dsn: str) -> None:
    lost = connect(dsn, autocommit=True)
    lost.close()
    reply = api.handle("GET", "/jobs", {}, b"", api.Identity("acme", "alice"), lost)
    assert (reply.status, reply.body["error"]["code"]) == (503, "database_unavailable")


# The local server's connections.

POOL_SIZE = 4
SLOW_REQUESTS = 24


def api_connections(conn: Connection) -> int:
    """The local server's connections to this test's database, as the server counts them."""
    row = conn.execute(
        "select count(*) as n from pg_stat_activity"
        " where datname = current_database() and application_name = 'fairqueue-api'"
    ).fetchone()
    return int(row["n"])


def test_concurrent_slow_requests_share_a_bounded_pool_and_are_all_answered(
    dsn: str, conn: Connection
) -> None:
    """Before the pool, each of 40 concurrent slow requests opened a connection of its own.
    Now at most the pool's size are open, whatever the number of requests: while every pooled
    connection is held by a request stuck in its upstream call, the others wait for one."""
    api_support.GATE.shut()
    answers: dict[int, Answer] = {}
    peak = [0]
    done = threading.Event()

    def admit_one(n: int) -> None:
        token = api.mint_token(SECRET, tenant_id=f"tenant-{n}", lane=f"user-{n}")
        answers[n] = call(
            server, "POST", "/jobs", {"type": "api_gated", "payload": {}}, token=token
        )

    def watch() -> None:
        with connect(dsn, autocommit=True) as watcher:
            while not done.is_set():
                peak[0] = max(peak[0], api_connections(watcher))

    server = api.ApiServer(("127.0.0.1", 0), dsn, secret=SECRET, pool_size=POOL_SIZE)
    with running(server):
        watcher = threading.Thread(target=watch)
        watcher.start()
        clients = [threading.Thread(target=admit_one, args=(n,)) for n in range(SLOW_REQUESTS)]
        for client in clients:
            client.start()
        deadline = time.monotonic() + 30
        while api_support.GATE.inside < POOL_SIZE:
            assert time.monotonic() < deadline, "the requests never filled the pool"
            time.sleep(0.05)
        # Every connection is held; the other requests are waiting for one, not opening more.
        for _ in range(20):
            assert api_connections(conn) == POOL_SIZE
            assert api_support.GATE.inside == POOL_SIZE
            time.sleep(0.02)
        api_support.GATE.opened.set()
        for client in clients:
            client.join(timeout=60)
        done.set()
        watcher.join(timeout=10)
    assert peak[0] <= POOL_SIZE
    assert api_support.GATE.most == POOL_SIZE
    assert sorted(answers) == list(range(SLOW_REQUESTS))
    for n, answer in answers.items():
        # Each thread resolved its own request: its own token's lane, its own job.
        assert (answer.status, answer.body["lane"]) == (202, f"user-{n}")
    assert len({answer.body["id"] for answer in answers.values()}) == SLOW_REQUESTS
    assert len(jobs(conn)) == SLOW_REQUESTS


def test_the_pools_connections_work_as_the_application_role(dsn: str, conn: Connection) -> None:
    assert conn.execute("select current_user as role").fetchone() == {"role": "postgres"}
    connections = api.ApiConnections(dsn, 2)
    try:
        with connections.connection() as pooled:
            row = pooled.execute("select current_user as role, 1 as one").fetchone()
            assert row == {"role": "fairqueue_app", "one": 1}
            assert pooled.autocommit
    finally:
        connections.close()


def test_the_pool_size_comes_from_the_environment() -> None:
    assert api.api_pool_size({}) == 10
    assert api.api_pool_size({"FAIRQUEUE_API_POOL_SIZE": "3"}) == 3
    for bad in ("0", "-1", "many", "1001"):
        with pytest.raises(ConfigurationError, match="FAIRQUEUE_API_POOL_SIZE must be"):
            api.api_pool_size({"FAIRQUEUE_API_POOL_SIZE": bad})


# `fairqueue serve --role api`.


def serve_api(dsn: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fairqueue", "--database-url", dsn, "serve", "--role", "api"],
        env={
            **os.environ,
            "PYTHONPATH": str(TESTS),
            "FAIRQUEUE_STAGES": "support.api_support:STAGES",
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_serve_role_api_answers_over_http_and_stops_on_sigterm_after_the_request_in_flight(
    dsn: str, conn: Connection
) -> None:
    port = local_pooler.free_port()
    target = ("127.0.0.1", port)
    process = serve_api(dsn, FAIRQUEUE_API_PORT=str(port))
    in_flight: list[Answer] = []
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(target, timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline, "the API did not start listening"
                time.sleep(0.1)
        answer = call(target, "POST", "/jobs", {"type": "api_analyze", "payload": {"doc": "a"}})
        assert answer.status == 202
        assert call(target, "GET", f"/jobs/{answer.body['id']}").body["status"] == "pending"

        # The slow stage's upstream takes a second to validate: SIGTERM arrives meanwhile.
        slow = threading.Thread(
            target=lambda: in_flight.append(
                call(target, "POST", "/jobs", {"type": "api_slow", "payload": {}}, token=BOB)
            )
        )
        slow.start()
        time.sleep(0.4)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
        slow.join(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    assert process.returncode == 0, output
    assert f"the API listens on http://127.0.0.1:{port}" in output
    assert [a.status for a in in_flight] == [202]
    assert sorted(row["type"] for row in jobs(conn)) == ["api_analyze", "api_slow"]


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("", "FAIRQUEUE_API_SECRET is not set"),
        ("too-short", "FAIRQUEUE_API_SECRET is 9 bytes; it must be at least 32"),
    ],
)
def test_serve_role_api_refuses_to_start_without_a_usable_secret(
    dsn: str, secret: str, message: str
) -> None:
    process = serve_api(dsn, FAIRQUEUE_API_SECRET=secret)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 2
    assert message in output


def test_role_all_includes_the_api_only_with_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    assert roles_of("all") == ["cron", "worker", "sweeper", "backstop", "api"]
    assert roles_of("api") == ["api"]
    monkeypatch.delenv(api.SIGNING_KEY_ENV)
    assert roles_of("all") == ["cron", "worker", "sweeper", "backstop"]
    with pytest.raises(ConfigurationError, match="FAIRQUEUE_API_SECRET is not set"):
        roles_of("api")


def test_the_api_address_comes_from_the_environment() -> None:
    assert api.api_address({}) == ("127.0.0.1", 8080)
    assert api.api_address({"FAIRQUEUE_API_HOST": "0.0.0.0", "FAIRQUEUE_API_PORT": "9000"}) == (
        "0.0.0.0",
        9000,
    )
    with pytest.raises(ConfigurationError, match="FAIRQUEUE_API_PORT must be"):
        api.api_address({"FAIRQUEUE_API_PORT": "http"})

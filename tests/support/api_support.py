"""The admission API's tests share these: their stages (FAIRQUEUE_STAGES=api_support:STAGES),
a local server serving for a block, and a check that an answer is one the OpenAPI document
describes (the document the resolver generates for these stages, as the API serves it).

Stage names start with ``api_``: stage names are one registry per process.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from fairqueue import Stage, api, run_pipeline
from fairqueue.upstream import InProcessUpstream

COST = 5


class Document(BaseModel):
    doc: str


def refuse_forbidden(job_type: str, payload: dict[str, Any]) -> None:
    if payload.get("doc") == "forbidden":
        raise ValueError("the document 'forbidden' cannot be analysed")


UPSTREAM = InProcessUpstream(validate=refuse_forbidden)
# Holds a request in flight for a second, for the test of a stop mid-request.
SLOW_UPSTREAM = InProcessUpstream(validate=lambda job_type, payload: time.sleep(1.0))


class Gate:
    """Holds the api_gated stage's admissions inside their upstream call while shut, and
    counts how many are in there at once: each of them holds a database connection."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.opened.set()
        self.inside = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, job_type: str, payload: dict[str, Any]) -> None:
        with self._lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            self.opened.wait(timeout=60)
        finally:
            with self._lock:
                self.inside -= 1

    def shut(self) -> None:
        self.opened.clear()
        self.most = 0


GATE = Gate()
GATED_UPSTREAM = InProcessUpstream(validate=GATE)


def reset() -> None:
    UPSTREAM.available = True
    UPSTREAM.work.clear()
    UPSTREAM.released_order.clear()
    GATE.opened.set()


# Its jobs finish with an output (the payload echoed), for the result routes' tests.
RENDERED = Stage("api_rendered", handler=lambda job: {"echo": job.payload}, clients_may_admit=True)

STAGES = [
    # Free, so most tests need no credits.
    Stage("api_analyze", handler=lambda job: None, payload_model=Document, clients_may_admit=True),
    Stage("api_paid", handler=lambda job: None, credit_cost=COST, clients_may_admit=True),
    Stage("api_upstream", handler=lambda job: None, upstream=UPSTREAM, clients_may_admit=True),
    Stage("api_slow", handler=lambda job: None, upstream=SLOW_UPSTREAM, clients_may_admit=True),
    Stage("api_gated", handler=lambda job: None, upstream=GATED_UPSTREAM, clients_may_admit=True),
    RENDERED,
    # Internal: the pipeline runs it, clients may not admit it. Paid, so an admission that
    # slipped through would show as a debit.
    Stage("api_internal", handler=lambda job: None, credit_cost=COST),
]


def finish_rendered(dsn: str) -> None:
    """Run the admitted api_rendered jobs to done, each with its output."""
    result = run_pipeline(dsn, [RENDERED])
    assert (result.stop_reason, result.jobs_failed) == ("no_work", 0), result


DOC = api.openapi_document()
DOC_URI = "urn:fairqueue:openapi"
REGISTRY: Registry[Any] = Registry().with_resource(
    DOC_URI, Resource.from_contents(DOC, default_specification=DRAFT202012)
)
JOB_PATH = re.compile(r"^/jobs/[^/?]+$")
RESULT_PATH = re.compile(r"^/jobs/[^/?]+/result$")


def assert_documented(method: str, path: str, status: int, body: Any) -> None:
    """The status is documented for the route and the body fits the document's schema: an
    unknown path is the NotFound response, a method the route lacks MethodNotAllowed."""
    route = path.partition("?")[0]
    if JOB_PATH.match(route):
        route = "/jobs/{id}"
    elif RESULT_PATH.match(route):
        route = "/jobs/{id}/result"
    operation = DOC["paths"].get(route, {}).get(method.lower())
    if route not in DOC["paths"]:
        response_pointer = "/components/responses/NotFound"
    elif operation is None:
        response_pointer = "/components/responses/MethodNotAllowed"
    else:
        responses = operation["responses"]
        assert str(status) in responses, f"{method} {route} does not document {status}"
        escaped = route.replace("~", "~0").replace("/", "~1")
        response_pointer = responses[str(status)].get("$ref", "#").removeprefix("#") or (
            f"/paths/{escaped}/{method.lower()}/responses/{status}"
        )
    validator = Draft202012Validator(
        {"$ref": f"{DOC_URI}#{response_pointer}/content/application~1json/schema"},
        registry=REGISTRY,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    problems = [error.message for error in validator.iter_errors(body)]
    assert not problems, f"{method} {path} -> {status} {body}: {problems}"


@contextmanager
def running(server: api.ApiServer) -> Iterator[api.ApiServer]:
    """Serves in a thread for the block; closing waits for the requests in flight."""
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield server
    finally:
        server.server_close()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server did not stop"

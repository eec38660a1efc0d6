"""The admission API's edge: what a request may carry and what an answer says.

The request and answer models are what the resolver (fairqueue.api.routes) validates bodies
with and serializes answers through; the OpenAPI document is generated from them. An
``ApiError`` is a refusal with its status and stable code, the one shape every error answer
has (``{"error": {"code", "message"}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Final, Literal
from uuid import UUID

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..inputs import MAX_COST
from ..results import Result

OPENAPI_PATH: Final = "/openapi.json"
# Text fairqueue can store: no NUL character. Written into the document only: a NUL in a label
# is refused by admit as 422 invalid_payload, which names the field.
NO_NUL: Final = "^[^\\u0000]*$"
STORABLE_OBJECT_REF: Final = "#/components/schemas/StorableObject"


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


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


def error_reply(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> Reply:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return Reply(status, body.model_dump(mode="json"), dict(headers or {}))


def _storable_object(description: str) -> dict[str, Any]:
    return {"allOf": [{"$ref": STORABLE_OBJECT_REF}], "description": description}


def _whole_number(value: object) -> object:
    """A whole number as JSON Schema has one (2.0 is an integer), never a boolean or a text."""
    if isinstance(value, bool | str):
        raise ValueError("must be a whole number")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class AdmitRequest(BaseModel):
    """No other field is accepted: not tenant_id, lane or cost."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=200, description="The job type (a stage's name).")
    payload: dict[str, Any] = Field(
        json_schema_extra=_storable_object(
            "What the job works on; checked against the stage's model."
        )
    )
    dedupe_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="While an open job of yours has this key, admitting another is 409.",
        json_schema_extra={"pattern": NO_NUL},
    )
    delta_of: UUID | None = Field(
        default=None,
        description="The job of your lane this one re-checks; a delta never waits in the lane.",
    )
    group_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The fairness group the job is counted in.",
        json_schema_extra={"pattern": NO_NUL},
    )
    fair_cost: Annotated[int, BeforeValidator(_whole_number)] = Field(
        default=1,
        ge=1,
        le=MAX_COST,
        strict=True,
        description=(
            "What the job counts as served in the fair order of a stage fair by cost (its"
            " units of work, such as tokens); not its credits, which are the type's own."
        ),
    )


class Admitted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: UUID
    status: Literal["pending", "queued"]
    place: int = Field(ge=1, description="1 holds the lane (a delta is always 1).")
    lane: str


class JobView(BaseModel):
    # Read from a row: a column the query gains is left out of the answer, not a 500.
    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    id: UUID
    type: str
    status: Literal["queued", "pending", "running", "done", "failed", "cancelled"]
    lane: str
    delta_of: UUID | None
    attempts: int = Field(ge=0)
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None
    output: dict[str, Any] | None = Field(
        description="What the handler returned, once the job is done; null before, when it "
        "returned nothing, and after the output's retention (FAIRQUEUE_OUTPUT_RETENTION_S)."
    )
    place: int | None = Field(
        ge=1,
        description="The job's place in its lane while it is open (1 holds it); null once "
        "finished.",
    )
    waiting: list[str] | None = Field(
        default=None,
        description="Only from GET /jobs/{id}, while the job is queued or pending: why it has "
        "not run yet, one sentence per reason (its lane, not due yet, a paused group, its "
        "stage's quota, how many groups stand ahead of its group in the fair order). Empty "
        "when nothing holds it back; null in lists and once it has started.",
    )


class LaneJobs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lane: str
    jobs: list[JobView]


class ResultView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: UUID = Field(description="The job the result belongs to: for a re-check, its original.")
    saved_by: Literal["client", "worker"] = Field(
        description="Who saved it: `client` through PUT /jobs/{id}/result, `worker` the backstop "
        "that renders results clients did not save in time."
    )
    saved_at: datetime
    source_job_id: UUID = Field(
        description="The job whose output the body was rendered from (the original or one of "
        "its re-checks)."
    )
    body: dict[str, Any] = Field(description="The result itself.")

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

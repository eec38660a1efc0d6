"""The doorbell message: one job and its tenant, and the protocol every adapter keeps.

The wire form is compact UTF-8 JSON with exactly two snake_case keys, in this order::

    {"job_id":"6f1c0d3e-2d1a-4c1e-9f5e-1a2b3c4d5e6f","tenant_id":"t1"}

``job_id`` is the job's UUID in canonical lower-case hyphenated form; ``tenant_id`` is the
job's tenant, or ``null`` for a job without one. Both keys are required and no other key is
accepted, so a sender that forgets the tenant is refused rather than read as "no tenant" (which
the worker's claim would then drop as a mismatch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from ..errors import InvalidDoorbell


class Doorbell(BaseModel):
    """``{job_id, tenant_id}`` and nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: UUID
    tenant_id: str | None = Field(min_length=1)

    @classmethod
    def parse(cls, body: str | bytes) -> Doorbell:
        """Read a doorbell off the wire; anything else raises :class:`InvalidDoorbell`."""
        try:
            return cls.model_validate_json(body)
        except ValidationError as exc:
            problems = "; ".join(_describe(error) for error in exc.errors())
            raise InvalidDoorbell(f"not a doorbell ({problems}): {_excerpt(body)}") from None

    def to_json(self) -> str:
        """The wire form: ``{"job_id":"<uuid>","tenant_id":"<tenant>"|null}``, compact."""
        return self.model_dump_json()


def _describe(error: ErrorDetails) -> str:
    """One pydantic error as a short phrase that names the field."""
    kind = str(error["type"])
    field = ".".join(str(part) for part in error["loc"])
    if kind == "json_invalid":
        return f"not valid JSON: {error['msg'].removeprefix('Invalid JSON: ')}"
    if kind == "model_type":
        return "not a JSON object"
    if kind == "extra_forbidden":
        return f"unexpected field {field!r}: a doorbell carries only job_id and tenant_id"
    if kind == "missing":
        return f"missing field {field!r}"
    if field == "job_id":
        return "job_id is not a UUID"
    if field == "tenant_id":
        return "tenant_id must be a non-empty string or null"
    return f"{field or 'body'}: {error['msg']}"


def _excerpt(body: str | bytes, limit: int = 120) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return repr(text if len(text) <= limit else text[:limit] + "...")


class DoorbellAdapter(Protocol):
    """Where doorbells go. ``publish`` hands back the ones it could not send, and never raises
    for a transport failure: it logs it, and the sweep republishes from the job rows."""

    @property
    def name(self) -> str:
        """``sqs``, ``postgres`` or ``memory``: for logs and run summaries."""
        ...

    def publish(self, doorbells: Sequence[Doorbell]) -> list[Doorbell]:
        """Send the doorbells; return those that failed (empty when all went)."""
        ...

    def close(self) -> None:
        """Release what the adapter opened itself (never a connection or client it was given)."""
        ...

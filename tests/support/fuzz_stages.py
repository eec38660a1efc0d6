"""The stages the admission API is fuzzed with: each one's whole contract is in its payload
model (no upstream whose own rules a schema cannot state), so a request the served document
allows must be admitted and one it forbids must be refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from fairqueue import Job, Stage


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=500)
    copies: int = Field(default=1, ge=1, le=10)


def noop(job: Job) -> None:
    return None


STAGES = [
    Stage("fuzz_note", handler=noop, payload_model=Note, clients_may_admit=True),
    Stage(
        "fuzz_paid_note", handler=noop, payload_model=Note, credit_cost=1, clients_may_admit=True
    ),
    Stage("fuzz_free_form", handler=noop, clients_may_admit=True),
    Stage("fuzz_internal", handler=noop),
]

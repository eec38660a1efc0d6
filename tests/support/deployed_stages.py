"""The stage lists a deployer of the functions-as-deployed tests names (the template's
StagesSpec), as their own code beside the handlers, since the example's stages are development
code that the layer leaves out:

- ``support.deployed_stages:STAGES``: a doorbell stage whose jobs each take a while, needing no
  upstream;
- ``support.deployed_stages:PIPELINE``: every kind of stage a deployment runs, shaped like the
  example's (an admitted stage with held upstream work, a stage whose results a client or the
  backstop saves and whose give-up is refunded, the refunds on doorbells).
"""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from fairqueue import Job, Stage
from fairqueue.upstream import upstream_from_env

SLOW_JOB_S = 1.0
STARTED: list[UUID] = []
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        STARTED.clear()


def slow(job: Job) -> None:
    with _lock:
        STARTED.append(job.id)
    time.sleep(SLOW_JOB_S)


STAGES = [Stage("slow_bell", handler=slow, delivery="doorbell")]


class RefundPayload(BaseModel):
    job_id: str
    credits: int = Field(ge=1)
    reason: str


class AnalysisPayload(BaseModel):
    doc: str = Field(min_length=1)
    pages: int = Field(ge=1, le=1000)


class SummarizePayload(BaseModel):
    doc: str = Field(min_length=1)
    result: int = Field(ge=0)
    credits: int = Field(ge=1)


class DeployedUpstream:
    """The upstream ``FAIRQUEUE_UPSTREAM_URL`` names, looked up at first use: a function has
    the variable, and the tests' own process declares these stages without it."""

    name = "the deployment's upstream (FAIRQUEUE_UPSTREAM_URL)"

    def create(self, job_type: str, payload: dict[str, Any], *, key: str, held: bool = True) -> str:
        return upstream_from_env().create(job_type, payload, key=key, held=held)

    def release(self, upstream_id: str) -> None:
        upstream_from_env().release(upstream_id)


def refund(job: Job) -> None:
    RefundPayload.model_validate(job.payload)


def analyze(job: Job) -> None:
    AnalysisPayload.model_validate(job.payload)


def summarize(job: Job) -> dict[str, Any]:
    payload = SummarizePayload.model_validate(job.payload)
    return {"doc": payload.doc, "result": payload.result}


def render_summary(output: dict[str, Any]) -> dict[str, Any]:
    return {"title": f"Summary of {output['doc']}, result {output['result']}"}


def refund_summary(job: Job, error: str) -> None:
    job.enqueue(
        "refund",
        {"job_id": str(job.id), "credits": job.payload["credits"], "reason": error[:200]},
        dedupe_key=f"refund:{job.id}",
    )


PIPELINE = [
    Stage("refund", batch=50, handler=refund, payload_model=RefundPayload, delivery="doorbell"),
    Stage(
        "analyze",
        batch=10,
        handler=analyze,
        payload_model=AnalysisPayload,
        credit_cost=2,
        upstream=DeployedUpstream(),
        clients_may_admit=True,
        delivery="doorbell",
    ),
    Stage(
        "summarize",
        batch=10,
        handler=summarize,
        payload_model=SummarizePayload,
        max_attempts=2,
        on_give_up=refund_summary,
        render_result=render_summary,
    ),
]

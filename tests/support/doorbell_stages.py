"""Stages for the doorbell worker and sweeper tests (FAIRQUEUE_STAGES=doorbell_stages:STAGES)."""

from __future__ import annotations

import threading
from uuid import UUID

from fairqueue import Job, Stage

RAN: list[tuple[UUID, int]] = []
GIVEN_UP: list[UUID] = []
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        RAN.clear()
        GIVEN_UP.clear()


def ring_handler(job: Job) -> None:
    with _lock:
        RAN.append((job.id, job.attempts))


def given_up(job: Job, error: str) -> None:
    with _lock:
        GIVEN_UP.append(job.id)


STAGES = [
    Stage("bell", handler=ring_handler, delivery="doorbell", on_give_up=given_up),
    Stage("plain_cron", handler=ring_handler),
    Stage("rendered", handler=ring_handler, render_result=lambda output: {"shown": output}),
]

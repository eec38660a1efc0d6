"""What the bench needs from a peer queue: its own installer, a bulk enqueue, a way to empty it,
a question that says whether work is left, and a worker process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier, Event
from typing import Any

from ..arrivals import Arrival

# A worker process: (dsn, worker name, start barrier, stop event, results queue, record) -> None.
# It connects, waits at the barrier, runs the peer's own worker until the stop event is set,
# then puts one WorkerReport on the queue; with `record` the report lists the group of every
# job it ran, in the order it ran them.
WorkerTarget = Callable[[str, str, Barrier, Event, Any, bool], None]


@dataclass(frozen=True)
class Peer:
    name: str
    # How its workers run, for the report: driver, batch, concurrency.
    settings: str
    install: Callable[[str], None]
    enqueue: Callable[[str, Sequence[Arrival]], None]
    # Empties its job tables (and their logs), so each run starts from the same state.
    reset: Callable[[str], None]
    # SQL returning one boolean column, `left`: whether any job is still queued or running.
    work_left: str
    # The tables a job's life writes to, its job table first: vacuumed before a timed drain,
    # and read for health after churn.
    tables: tuple[str, ...]
    worker: WorkerTarget

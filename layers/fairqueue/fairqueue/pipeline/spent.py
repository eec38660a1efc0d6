"""The quota units each running job of a stage fair by cost spent (``job.spend``), kept until its
completion settles them: a job that finishes having spent units counts those as served instead
of its declared cost (``Stage(fair_by="cost")``, docs/guide/fairness.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from uuid import UUID

from ..db import Connection
from ..queries import query


class SpentUnits:
    """Units spent per job, by the handlers of a run (several threads at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spent: dict[UUID, int] = {}

    def add(self, job_id: UUID, units: int) -> None:
        with self._lock:
            self._spent[job_id] = self._spent.get(job_id, 0) + units

    def peek(self, job_ids: Iterable[UUID]) -> dict[UUID, int]:
        """What each of these jobs that spent any has spent, still kept: a completion that
        meets a lost connection is recorded again, its settlement with it."""
        with self._lock:
            if not self._spent:
                return {}
            return {job_id: self._spent[job_id] for job_id in job_ids if job_id in self._spent}

    def take(self, job_ids: Iterable[UUID]) -> dict[UUID, int]:
        """What each of these jobs that spent any has spent, no longer kept."""
        with self._lock:
            if not self._spent:
                return {}
            return {job_id: self._spent.pop(job_id) for job_id in job_ids if job_id in self._spent}


def settle(
    conn: Connection,
    owned: list[tuple[str | None, UUID]],
    spent: dict[UUID, int],
    locked_by: str,
) -> None:
    """Make what each of these jobs (tenant, id) spent the units it counts as served, for those
    this claimer still holds, through the door that names each job's tenant and claimer
    (settle_spent, sql/functions/claimed_batch.sql); one statement, before their completion."""
    settled = [(tenant_id, job_id) for tenant_id, job_id in owned if job_id in spent]
    if not settled:
        return
    conn.execute(
        query("settle_spent"),
        {
            "tenant_ids": [tenant_id for tenant_id, _ in settled],
            "ids": [job_id for _, job_id in settled],
            "units": [spent[job_id] for _, job_id in settled],
            "locked_by": locked_by,
        },
    )

"""The runs table: one row per invocation, opened first and always closed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg.types.json import Jsonb

from .db import Connection
from .doors import door_refusals
from .queries import query

StopReason = Literal["no_work", "time_budget", "quota_reserve", "quota_exhausted", "error"]
STOP_REASONS: tuple[StopReason, ...] = (
    "no_work",
    "time_budget",
    "quota_reserve",
    "quota_exhausted",
    "error",
)


@dataclass
class StageTally:
    batches: int = 0
    claimed: int = 0
    done: int = 0
    failed: int = 0
    retried: int = 0
    deferred: int = 0
    lost: int = 0
    given_back: int = 0  # claimed, never started, handed back with the attempt undone
    release_retries: int = 0
    units: int = 0
    seconds: float = 0.0
    # The last time its quota held this stage back: why, which quota, and until when.
    held: dict[str, str] | None = None

    def hold(self, reason: StopReason, quota: str, until: datetime) -> None:
        self.held = {"reason": reason, "quota": quota, "until": until.isoformat()}

    def as_json(self) -> dict[str, Any]:
        out = {**self.__dict__, "seconds": round(self.seconds, 3)}
        if self.held is None:
            del out["held"]
        return out


@dataclass
class RunTally:
    """What a run did, kept as it goes and written when it closes."""

    stages: dict[str, StageTally] = field(default_factory=dict)
    abandoned_failed: int = 0
    hook_errors: list[str] = field(default_factory=list)
    interrupted: str | None = None
    # What workers and sweeps count beside the stages: doorbells rung, dropped, republished.
    counters: dict[str, int] = field(default_factory=dict)
    # The worker's failed queue messages: id and reason, the first few of a run.
    failed_messages: list[dict[str, str]] = field(default_factory=list)

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def stage(self, name: str) -> StageTally:
        # Looked up for every job a run hands out: a StageTally is made only for a new stage.
        tally = self.stages.get(name)
        if tally is None:
            tally = self.stages[name] = StageTally()
        return tally

    @property
    def done(self) -> int:
        return sum(t.done for t in self.stages.values())

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.stages.values()) + self.abandoned_failed

    @property
    def deferred(self) -> int:
        return sum(t.deferred for t in self.stages.values())

    @property
    def units(self) -> int:
        return sum(t.units for t in self.stages.values())

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stages": {k: v.as_json() for k, v in self.stages.items()}}
        if self.abandoned_failed:
            out["abandoned_failed"] = self.abandoned_failed
        if self.hook_errors:
            out["hook_errors"] = self.hook_errors[:20]
        if self.interrupted:
            out["interrupted"] = self.interrupted
        if self.failed_messages:
            out["failed_messages"] = self.failed_messages
        out.update(self.counters)
        return out


def open_run(conn: Connection, trigger: str, summary: dict[str, Any] | None = None) -> UUID:
    row = conn.execute(
        query("open_run"), {"trigger": trigger, "summary": Jsonb(summary or {})}
    ).fetchone()
    assert row is not None
    run_id = row["id"]
    assert isinstance(run_id, UUID)
    return run_id


def close_run(
    conn: Connection,
    run_id: UUID,
    stop_reason: StopReason,
    tally: RunTally,
    *,
    error: str | None = None,
    extra: dict[str, Any] | None = None,
) -> bool:
    """Close the run once; False when it was already closed."""
    row = conn.execute(
        query("close_run"),
        {
            "id": run_id,
            "stop_reason": stop_reason,
            "jobs_done": tally.done,
            "jobs_failed": tally.failed,
            "jobs_deferred": tally.deferred,
            "quota_units": tally.units,
            "summary": Jsonb({**tally.summary(), **(extra or {})}),
            "error": error,
        },
    ).fetchone()
    return row is not None


@dataclass(frozen=True)
class RunRow:
    id: UUID
    trigger: str
    stop_reason: str | None
    jobs_done: int
    jobs_failed: int
    jobs_deferred: int
    quota_units: int
    error: str | None
    started_at: datetime
    finished_at: datetime | None
    summary: dict[str, Any]


def recent_runs(conn: Connection, limit: int = 20) -> list[RunRow]:
    rows = conn.execute(query("recent_runs"), {"limit": limit}).fetchall()
    return [RunRow(**row) for row in rows]


def get_run(conn: Connection, run_id: UUID | str) -> RunRow | None:
    row = conn.execute(query("get_run"), {"id": run_id}).fetchone()
    return RunRow(**row) if row else None


def close_abandoned_runs(conn: Connection, after_s: float) -> int:
    """Close as ``error`` every run still open ``after_s`` seconds after it started: its
    process died before it could close it. Returns how many. ArgumentOutOfBounds unless
    ``after_s`` is a minute to seven days."""
    with door_refusals():
        row = conn.execute(query("close_abandoned_runs"), {"after_s": after_s}).fetchone()
    assert row is not None
    return int(row["closed"])

"""What the queue holds right now, per job type."""

from dataclasses import dataclass
from datetime import timedelta

from .db import Connection
from .doors import door_refusals
from .queries import query


@dataclass(frozen=True)
class TypeStatus:
    type: str
    queued: int
    backlog: int
    scheduled: int
    running: int
    stuck: int
    failed: int
    done: int


def queue_status(conn: Connection) -> list[TypeStatus]:
    """Queued waits in a lane; backlog is pending and due; stuck is running past its lease."""
    return [TypeStatus(**row) for row in conn.execute(query("status_by_type")).fetchall()]


def open_jobs(conn: Connection, *, due_within: timedelta | None = None) -> int:
    """Queued, pending and running jobs; with ``due_within``, pending ones only if due by then
    (ArgumentOutOfBounds unless it is 0 to 3,660 days)."""
    with door_refusals():
        row = conn.execute(query("open_jobs"), {"due_within": due_within}).fetchone()
    assert row is not None
    return int(row["open"])


@dataclass(frozen=True)
class MissingResults:
    """Done jobs holding an output with no result yet, by how long they have waited."""

    within_grace: int
    under_an_hour: int
    under_a_day: int
    older: int


def missing_results(conn: Connection, *, grace_s: float) -> MissingResults:
    """ArgumentOutOfBounds unless ``grace_s`` is a millisecond to an hour."""
    with door_refusals():
        row = conn.execute(query("missing_results"), {"grace_s": grace_s}).fetchone()
    assert row is not None
    return MissingResults(**{k: int(v) for k, v in row.items()})

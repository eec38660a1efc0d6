"""Job ids are version 7 UUIDs drawn in time order, by every way a job comes in."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from fairqueue import NewJob, Stage, connect, enqueue, enqueue_many
from fairqueue.db import Connection
from fairqueue.lanes import admit

PLAIN = Stage("ids_plain", handler=lambda job: None)


def by_enqueue(app: Connection) -> UUID:
    job_id = enqueue(app, "ids_plain", {}, tenant_id="t")
    assert job_id is not None
    return job_id


def by_enqueue_many(app: Connection) -> UUID:
    [first, second] = enqueue_many(app, "ids_plain", [NewJob({}), NewJob({})], tenant_id="t")
    assert first.job_id is not None and second.job_id is not None
    return first.job_id


def by_lane(app: Connection) -> UUID:
    # Each admission in its own lane, so none waits behind another.
    return admit(app, f"lane-{time.monotonic_ns()}", "ids_plain", {}, tenant_id="t").job_id


def drawn_at(job_id: UUID) -> datetime:
    """The millisecond a version 7 id carries in its first six bytes."""
    return datetime.fromtimestamp(int.from_bytes(job_id.bytes[:6], "big") / 1000, UTC)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("draw", [by_enqueue, by_enqueue_many, by_lane])
def test_each_job_id_is_version_7_and_ids_sort_in_the_order_they_were_drawn(
    dsn: str, conn: Connection, draw: Callable[[Connection], UUID]
) -> None:
    drawn: list[UUID] = []
    with connect(dsn, autocommit=True) as app:
        for _ in range(8):
            before = conn.execute("select clock_timestamp() as at").fetchone()["at"]
            job_id = draw(app)
            after = conn.execute("select clock_timestamp() as at").fetchone()["at"]
            assert job_id.version == 7
            assert job_id.variant == "specified in RFC 4122"
            # The id's millisecond is the server's clock while the job came in.
            assert before - timedelta(milliseconds=1) <= drawn_at(job_id) <= after
            drawn.append(job_id)
            # The next id falls in a later millisecond, so its order is its time's.
            time.sleep(0.002)
    assert drawn == sorted(drawn)
    stored = [
        r["id"]
        for r in conn.execute(
            "select id from fairqueue.jobs where id = any(%s) order by id", (drawn,)
        )
    ]
    assert stored == drawn

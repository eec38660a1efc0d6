"""The long-running doorbell worker (fairqueue.roles.dispatcher) in this process: a job starts as
soon as its doorbell is heard, a burst runs each job once, a doorbell that should claim nothing
claims nothing, and a span of work is one run row."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from uuid import UUID

import pytest

from fairqueue import Job, NewJob, Stage, connect, enqueue, enqueue_many
from fairqueue.doorbells import (
    Doorbell,
    MemoryDoorbells,
    PostgresDoorbells,
    PostgresListener,
    ringing,
)
from fairqueue.doorbells.receiving import DoorbellSource, MemorySource, PostgresSource
from fairqueue.roles.dispatcher import DoorbellWorker
from support.rows import job

_lock = threading.Lock()
RAN: list[UUID] = []
# Set by a handler: the job whose handler is running now, and what lets it return.
HELD = threading.Event()
RELEASE = threading.Event()


def record(job: Job) -> None:
    with _lock:
        RAN.append(job.id)


def held(job: Job) -> None:
    record(job)
    HELD.set()
    assert RELEASE.wait(30), "the test never let the handler return"


BELL = Stage("dispatch_bell", handler=record, delivery="doorbell", concurrency=4)
HELD_BELL = Stage("dispatch_held", handler=held, delivery="doorbell")
PAIR_BELL = Stage("dispatch_pair", handler=held, delivery="doorbell", concurrency=2)
STAGES = [BELL, HELD_BELL, PAIR_BELL, Stage("dispatch_cron", handler=record)]


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    RAN.clear()
    HELD.clear()
    RELEASE.clear()
    yield
    RELEASE.set()
    ringing.use_doorbells(None)


@pytest.fixture
def memory() -> MemoryDoorbells:
    bells = MemoryDoorbells()
    ringing.use_doorbells(bells)
    return bells


@contextmanager
def working(
    dsn: str, source: DoorbellSource, **spans: float
) -> Iterator[tuple[DoorbellWorker, threading.Event]]:
    """A worker on its own thread until the block ends; its error, if any, is raised then."""
    stop = threading.Event()
    worker = DoorbellWorker(dsn, STAGES, stop, source, **spans)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield worker, stop
    finally:
        stop.set()
        RELEASE.set()
        thread.join(timeout=60)
        assert not thread.is_alive()
        if failed:
            raise failed[0]


def wait_for(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def ran() -> list[UUID]:
    with _lock:
        return list(RAN)


class OneThenSilence:
    """A source that hears one doorbell, then nothing until the test lets it go on: a worker
    that waited for a second doorbell (or a batch to fill) would start nothing meanwhile."""

    def __init__(self, first: Doorbell) -> None:
        self.first: Doorbell | None = first
        self.silent = threading.Event()
        self.go_on = threading.Event()

    def take(self, timeout_s: float) -> list[Doorbell]:
        if self.first is not None:
            first, self.first = self.first, None
            return [first]
        self.silent.set()
        self.go_on.wait(timeout_s)
        return []

    def close(self) -> None:
        self.go_on.set()


def test_a_job_starts_before_a_second_doorbell_arrives(dsn, conn, memory) -> None:
    job_id = enqueue(conn, "dispatch_bell", {}, tenant_id="a")
    [bell] = memory.drain()
    source = OneThenSilence(bell)
    with working(dsn, source):
        wait_for(lambda: ran() == [job_id])
        # Started while the source still had nothing more to say.
        assert not source.go_on.is_set()
    assert job(conn, job_id)["status"] == "done"


def test_jobs_run_side_by_side_up_to_the_stages_concurrency(dsn, conn, memory) -> None:
    first = enqueue(conn, "dispatch_pair", {}, tenant_id="a")
    with working(dsn, MemorySource(memory)):
        wait_for(HELD.is_set)
        # The first handler is still running: the second job starts beside it.
        second = enqueue(conn, "dispatch_pair", {}, tenant_id="a")
        wait_for(lambda: sorted(ran()) == sorted([first, second]))
        # Both slots are taken: a third waits for one of them.
        third = enqueue(conn, "dispatch_pair", {}, tenant_id="a")
        time.sleep(0.3)
        assert third not in ran()
        assert job(conn, third)["status"] == "pending"
        RELEASE.set()
        wait_for(lambda: third in ran())
        wait_for(lambda: job(conn, third)["status"] == "done")


def test_a_busy_stage_leaves_its_doorbells_for_later_and_others_go_on(dsn, conn, memory) -> None:
    held_first = enqueue(conn, "dispatch_held", {}, tenant_id="a")
    with working(dsn, MemorySource(memory)):
        wait_for(HELD.is_set)
        # dispatch_held runs one at a time and is busy: its second job waits, heard but not
        # dropped, while another stage's job runs at once.
        held_second = enqueue(conn, "dispatch_held", {}, tenant_id="a")
        other = enqueue(conn, "dispatch_bell", {}, tenant_id="b")
        wait_for(lambda: other in ran())
        assert held_second not in ran()
        RELEASE.set()
        wait_for(lambda: held_second in ran())
    assert sorted(ran()) == sorted([held_first, held_second, other])
    runs = conn.execute("select summary from fairqueue.runs").fetchall()
    assert sum(r["summary"].get("doorbells_dropped", 0) for r in runs) == 0


def test_a_burst_of_a_thousand_doorbells_heard_by_two_workers_runs_each_job_once(dsn, conn) -> None:
    with (
        PostgresListener(dsn) as one,
        PostgresListener(dsn) as other,
        working(dsn, one),
        working(dsn, other),
        connect(dsn, autocommit=True) as writer,
    ):
        ringing.use_doorbells(PostgresDoorbells(writer))
        enqueued = enqueue_many(writer, "dispatch_bell", [NewJob({"n": n}) for n in range(1000)])
        ids = [e.job_id for e in enqueued]
        # And every doorbell once more: each worker hears all 2,000.
        ringing.ring(writer, [Doorbell(job_id=i, tenant_id=None) for i in ids])
        wait_for(lambda: len(ran()) >= 1000, timeout_s=90)
        wait_for(
            lambda: (
                conn.execute(
                    "select count(*) as n from fairqueue.all_jobs where status = 'done'"
                ).fetchone()["n"]
                == 1000
            ),
            timeout_s=60,
        )
    assert sorted(ran()) == sorted(ids)
    attempts = conn.execute("select distinct attempts from fairqueue.all_jobs").fetchall()
    assert attempts == [{"attempts": 1}]


def test_a_duplicate_late_or_foreign_doorbell_claims_nothing(dsn, conn, memory) -> None:
    mine = enqueue(conn, "dispatch_bell", {}, tenant_id="a")
    cron = enqueue(conn, "dispatch_cron", {}, tenant_id="a")
    memory.drain()
    with working(dsn, MemorySource(memory), idle_s=0.2):
        bell = Doorbell(job_id=mine, tenant_id="a")
        memory.publish([bell, bell, Doorbell(job_id=mine, tenant_id="b")])
        wait_for(lambda: job(conn, mine)["status"] == "done")
        # Late (the job is done), foreign (another tenant, no tenant) and a cron stage's job.
        memory.publish(
            [
                bell,
                Doorbell(job_id=mine, tenant_id=None),
                Doorbell(job_id=cron, tenant_id="a"),
            ]
        )
        # The rows say what they dropped when they close: an idle span closes at once.
        wait_for(lambda: _dropped(conn) == 5)
    assert ran() == [mine]
    assert job(conn, mine)["attempts"] == 1
    row = job(conn, cron)
    assert (row["status"], row["attempts"], row["locked_by"]) == ("pending", 0, None)
    assert _dropped(conn) == 5


def _dropped(conn) -> int:
    runs = conn.execute("select summary from fairqueue.runs").fetchall()
    return sum(r["summary"].get("doorbells_dropped", 0) for r in runs)


def test_a_span_of_work_is_one_run_row_not_one_per_doorbell(dsn, conn, memory) -> None:
    ids = []
    with working(dsn, MemorySource(memory), span_s=0.5, idle_s=0.3):
        began = time.monotonic()
        while time.monotonic() - began < 2.0:
            ids.append(enqueue(conn, "dispatch_bell", {}, tenant_id="a"))
            time.sleep(0.02)
        wait_for(lambda: len(ran()) == len(ids))
        # Idle: the open row closes while the worker goes on listening.
        wait_for(
            lambda: (
                conn.execute(
                    "select count(*) as n from fairqueue.runs where finished_at is null"
                ).fetchone()["n"]
                == 0
            )
        )
    runs = conn.execute("select trigger, jobs_done, finished_at from fairqueue.runs").fetchall()
    # About one row per half-second span: nowhere near one per doorbell.
    assert 2 <= len(runs) <= 8 < len(ids) / 5
    assert {r["trigger"] for r in runs} == {"doorbell"}
    assert sum(r["jobs_done"] for r in runs) == len(ids)
    assert sorted(ran()) == sorted(ids)


@pytest.mark.direct_only(
    "the pooler keeps the client's connection when its backend is killed and gives the next"
    " transaction another one, so the worker never sees the fault"
)
def test_a_worker_whose_connections_were_cut_reconnects_and_runs_the_next_job(
    dsn, conn, memory
) -> None:
    first = enqueue(conn, "dispatch_bell", {}, tenant_id="a")
    with working(dsn, MemorySource(memory)):
        wait_for(lambda: job(conn, first)["status"] == "done")
        # What a restart of the server does to the connections the worker keeps between jobs:
        # the one it claims on and its open run row's.
        cut = conn.execute(
            "select count(pg_terminate_backend(pid)) as n from pg_stat_activity"
            " where datname = current_database() and pid <> pg_backend_pid()"
        ).fetchone()
        assert cut["n"] >= 2
        second = enqueue(conn, "dispatch_bell", {}, tenant_id="a")
        wait_for(lambda: second in ran())
        wait_for(lambda: job(conn, second)["status"] == "done")
    assert ran() == [first, second]


@pytest.mark.direct_only(
    "the pooler keeps the client's connection when its backend is killed and gives the next"
    " transaction another one, so the worker never sees the fault"
)
def test_a_batch_whose_connection_is_cut_records_its_outcomes_and_the_worker_goes_on(
    dsn, conn, memory
) -> None:
    first = enqueue(conn, "dispatch_held", {}, tenant_id="a")
    with working(dsn, MemorySource(memory)):
        wait_for(HELD.is_set)
        # Mid-handler: the worker's connections are cut, the handler returns, its outcome is
        # recorded on a new connection, and its row closes with the fault.
        conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity"
            " where datname = current_database() and pid <> pg_backend_pid()"
        )
        RELEASE.set()
        wait_for(lambda: job(conn, first)["status"] == "done")
        second = enqueue(conn, "dispatch_bell", {}, tenant_id="a")
        wait_for(lambda: job(conn, second)["status"] == "done")
    assert sorted(ran()) == sorted([first, second])
    errors = conn.execute("select error from fairqueue.runs where error is not null").fetchall()
    assert len(errors) == 1 and "connection was lost" in errors[0]["error"]


def listeners(conn) -> set[int]:
    rows = conn.execute(
        "select pid from pg_stat_activity"
        " where datname = current_database() and query ilike 'listen%%'"
    ).fetchall()
    return {row["pid"] for row in rows}


def test_a_worker_whose_listen_connection_was_cut_listens_again(dsn, conn) -> None:
    source = PostgresSource(dsn)
    with working(dsn, source), connect(dsn, autocommit=True) as writer:
        ringing.use_doorbells(PostgresDoorbells(writer))
        first = enqueue(writer, "dispatch_bell", {}, tenant_id="a")
        wait_for(lambda: job(conn, first)["status"] == "done")
        [cut] = listeners(conn)
        conn.execute("select pg_terminate_backend(%s)", (cut,))
        # Listening again on a new connection; a doorbell rung in the gap would be the sweep's.
        wait_for(lambda: len(listeners(conn) - {cut}) == 1)
        second = enqueue(writer, "dispatch_bell", {}, tenant_id="a")
        wait_for(lambda: job(conn, second)["status"] == "done")
    source.close()
    assert ran() == [first, second]

"""Held upstream work: created at admission, released by the claim that first runs the job,
release retried with backoff inside a window and refunded past it. Real Postgres, and a real
HTTP server for the HTTP adapter."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest

from fairqueue import ConfigurationError, InvalidPayload, Job, Stage, connect, run_pipeline
from fairqueue.doorbells import MemoryDoorbells
from fairqueue.doorbells.ringing import use_doorbells
from fairqueue.errors import DuplicateJob, UnknownJob, UpstreamRejected, UpstreamUnavailable
from fairqueue.lanes import InsufficientCredit, add_credits, admit, balance, promote_next
from fairqueue.upstream import HttpUpstream, InProcessUpstream, release_delay, upstream_from_env
from support.upstream_service import FakeService


def refuse_short_docs(job_type: str, payload: dict[str, Any]) -> None:
    if len(payload.get("doc", "")) < 2:
        raise UpstreamRejected(f"{job_type}: doc must be at least 2 characters")


UPSTREAM = InProcessUpstream(validate=refuse_short_docs)


class SeenReleased:
    """A handler that records, for each job it runs, whether its upstream work had started."""

    def __init__(self, upstream: InProcessUpstream) -> None:
        self.upstream = upstream
        self.ran: list[tuple[str, bool]] = []

    def __call__(self, job: Job) -> None:
        self.ran.append((job.payload["doc"], self.upstream.work[str(job.id)].released))


HANDLER = SeenReleased(UPSTREAM)
HELD = Stage(
    "held_analysis",
    handler=HANDLER,
    credit_cost=3,
    upstream=UPSTREAM,
    release_window_s=0.6,
    release_backoff_s=0.05,
    release_backoff_cap_s=0.1,
)
HELD_BELL = Stage("held_bell", handler=lambda job: None, upstream=UPSTREAM, delivery="doorbell")


@pytest.fixture(autouse=True)
def fresh_upstream() -> Iterator[None]:
    UPSTREAM.available = True
    UPSTREAM.work.clear()
    UPSTREAM.released_order.clear()
    HANDLER.ran.clear()
    yield
    UPSTREAM.available = True


@pytest.fixture
def app(dsn: str):
    with connect(dsn, autocommit=True) as c:
        yield c


def job_row(conn, job_id) -> dict[str, Any]:
    row = conn.execute(
        "select status, attempts, release_tries, released_at, upstream_id, run_after"
        " from fairqueue.all_jobs where id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None
    return row


def credit_kinds(conn) -> list[str]:
    return [r["kind"] for r in conn.execute("select kind from fairqueue.credits order by id")]


@pytest.mark.parametrize(
    ("available", "doc", "error", "message"),
    [
        (True, "x", UpstreamRejected, "doc must be at least 2 characters"),
        (False, "fine", UpstreamUnavailable, "in-process upstream is unavailable"),
    ],
)
def test_an_upstream_error_at_create_is_an_admission_error_and_nothing_lands(
    app, conn, available, doc, error, message
) -> None:
    add_credits(app, "t", 10)
    UPSTREAM.available = available
    with pytest.raises(error, match=message):
        admit(app, "u1", "held_analysis", {"doc": doc}, tenant_id="t")
    assert conn.execute("select count(*) as n from fairqueue.jobs").fetchone()["n"] == 0
    assert credit_kinds(conn) == ["grant"]
    assert balance(app, "t") == 10


def test_held_work_starts_only_when_its_job_runs_in_lane_order(dsn, app, conn) -> None:
    add_credits(app, "t", 30)
    docs = ["first", "second", "third"]
    admitted = [admit(app, "u1", "held_analysis", {"doc": d}, tenant_id="t") for d in docs]
    assert [a.status for a in admitted] == ["pending", "queued", "queued"]
    assert balance(app, "t") == 21  # the stage's own credit cost, three times
    # Created held at admission, keyed by the job's id, none started.
    assert sorted(UPSTREAM.work) == sorted(str(a.job_id) for a in admitted)
    assert UPSTREAM.released_order == []

    result = run_pipeline(dsn, [HELD])

    assert result.jobs_done == 3
    assert HANDLER.ran == [(d, True) for d in docs]
    assert UPSTREAM.released_order == [str(a.job_id) for a in admitted]
    for a in admitted:
        row = job_row(conn, a.job_id)
        assert (row["status"], row["attempts"], row["release_tries"]) == ("done", 1, 0)
        assert row["released_at"] is not None


def test_a_release_that_fails_is_retried_without_spending_an_attempt(dsn, app, conn) -> None:
    add_credits(app, "t", 3)
    first = admit(app, "u1", "held_analysis", {"doc": "first"}, tenant_id="t")
    UPSTREAM.available = False

    result = run_pipeline(dsn, [HELD])

    assert result.summary["stages"]["held_analysis"]["release_retries"] == 1
    assert HANDLER.ran == []
    row = job_row(conn, first.job_id)
    assert (row["status"], row["attempts"], row["release_tries"]) == ("pending", 0, 1)
    assert row["released_at"] is None
    UPSTREAM.available = True
    deadline = time.monotonic() + 10
    while HANDLER.ran == [] and time.monotonic() < deadline:
        run_pipeline(dsn, [HELD])  # nothing is due until the backoff has passed
        time.sleep(0.02)
    row = job_row(conn, first.job_id)
    assert (row["status"], row["attempts"], row["release_tries"]) == ("done", 1, 1)
    assert HANDLER.ran == [("first", True)]


def test_past_the_window_the_job_fails_is_refunded_and_frees_its_lane(dsn, app, conn) -> None:
    add_credits(app, "t", 10)
    first = admit(app, "u1", "held_analysis", {"doc": "first"}, tenant_id="t")
    second = admit(app, "u1", "held_analysis", {"doc": "second"}, tenant_id="t")
    assert balance(app, "t") == 4
    UPSTREAM.available = False

    deadline = time.monotonic() + 20
    while job_row(conn, first.job_id)["status"] != "failed":
        assert time.monotonic() < deadline, "the release window never closed"
        run_pipeline(dsn, [HELD])
        time.sleep(0.02)

    row = job_row(conn, first.job_id)
    assert row["attempts"] == 0  # release tries are not attempts
    assert row["release_tries"] >= 2
    assert HANDLER.ran == []
    assert balance(app, "t") == 7  # the failed job's 3 credits came back, once
    assert credit_kinds(conn) == ["grant", "debit", "debit", "refund"]
    # The lane moved on: the next job holds it now, its work still held.
    assert job_row(conn, second.job_id)["status"] == "pending"
    assert UPSTREAM.work[str(second.job_id)].released is False


def test_promotion_rings_a_doorbell_stage_and_admission_rings_a_free_lane(app, conn) -> None:
    bells = MemoryDoorbells()
    use_doorbells(bells)
    try:
        first = admit(app, "u1", "held_bell", {"doc": "aa"}, tenant_id="t")
        second = admit(app, "u1", "held_bell", {"doc": "bb"}, tenant_id="t")
        assert [b.job_id for b in bells.drain()] == [first.job_id]  # queued: no ring
        conn.execute("update fairqueue.jobs set status = 'done' where id = %s", (first.job_id,))
        assert promote_next(app, "t", "u1") == second.job_id
        assert [(b.job_id, b.tenant_id) for b in bells.drain()] == [(second.job_id, "t")]
    finally:
        use_doorbells(None)


def test_a_delta_must_re_check_a_job_of_the_same_lane(app) -> None:
    add_credits(app, "t", 3)
    first = admit(app, "u1", "held_analysis", {"doc": "first"}, tenant_id="t")
    with pytest.raises(UnknownJob, match="no job"):
        admit(app, "u2", "held_analysis", {"doc": "again"}, tenant_id="t", delta_of=first.job_id)
    with pytest.raises(UnknownJob):
        admit(app, "u1", "held_analysis", {"doc": "again"}, tenant_id="s", delta_of=first.job_id)
    with pytest.raises(UnknownJob):
        admit(app, "u1", "held_analysis", {"doc": "again"}, tenant_id="t", delta_of=uuid4())


def test_a_second_click_with_the_same_dedupe_key_is_a_duplicate(app, conn) -> None:
    add_credits(app, "t", 10)
    admit(app, "u1", "held_analysis", {"doc": "first"}, tenant_id="t", dedupe_key="k")
    with pytest.raises(DuplicateJob, match="dedupe key"):
        admit(app, "u1", "held_analysis", {"doc": "first"}, tenant_id="t", dedupe_key="k")
    assert conn.execute("select count(*) as n from fairqueue.jobs").fetchone()["n"] == 1
    assert balance(app, "t") == 7


def test_release_delay_grows_is_capped_and_jittered() -> None:
    for tries, ceiling in [(1, 5.0), (2, 10.0), (3, 20.0), (10, 300.0), (10_000, 300.0)]:
        delays = [release_delay(tries, base_s=5.0, cap_s=300.0) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def test_the_in_process_upstream_is_refused_in_production(monkeypatch) -> None:
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    with pytest.raises(ConfigurationError, match="refused when FAIRQUEUE_ENV=production"):
        InProcessUpstream()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "FAIRQUEUE_UPSTREAM_URL is not set"),
        ({"FAIRQUEUE_UPSTREAM_URL": "ftp://x"}, "must start with http"),
        (
            {"FAIRQUEUE_UPSTREAM_URL": "http://x", "FAIRQUEUE_UPSTREAM_TIMEOUT_S": "soon"},
            "FAIRQUEUE_UPSTREAM_TIMEOUT_S must be a number",
        ),
    ],
)
def test_upstream_settings_are_checked(env, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        upstream_from_env(env)


@pytest.fixture
def service() -> Iterator[FakeService]:
    running = FakeService()
    yield running
    running.stop()


def test_the_http_adapter_speaks_the_protocol(service) -> None:
    upstream = HttpUpstream(service.url, timeout_s=2, token="s3cret")
    work_id = upstream.create("analysis", {"doc": "fine"}, key="job-1")
    assert service.held[work_id] == {
        "key": "job-1",
        "type": "analysis",
        "payload": {"doc": "fine"},
        "held": True,
        "released": False,
    }
    upstream.release(work_id)
    upstream.release(work_id)  # the 409 of a second release is not an error
    assert service.held[work_id]["released"] is True
    assert set(service.headers) == {"Bearer s3cret"}
    with pytest.raises(UpstreamRejected, match="doc 'bad' is not a document"):
        upstream.create("analysis", {"doc": "bad"}, key="job-2")
    with pytest.raises(UpstreamUnavailable, match="answered 500: database on fire"):
        upstream.create("analysis", {"doc": "boom"}, key="job-3")
    service.release_status = 503
    with pytest.raises(UpstreamUnavailable, match="did not release"):
        upstream.release(work_id)


def test_an_unreachable_http_upstream_is_retried_then_refunded(dsn, app, conn, service) -> None:
    upstream = HttpUpstream(service.url, timeout_s=2)
    stage = Stage(
        "held_over_http",
        handler=lambda job: None,
        credit_cost=2,
        upstream=upstream,
        release_window_s=0.5,
        release_backoff_s=0.05,
        release_backoff_cap_s=0.1,
    )
    add_credits(app, "t", 5)
    admitted = admit(app, "u1", "held_over_http", {"doc": "fine"}, tenant_id="t")
    assert balance(app, "t") == 3
    service.stop()  # the service goes away between admission and release

    deadline = time.monotonic() + 20
    tries_seen = set()
    while (row := job_row(conn, admitted.job_id))["status"] != "failed":
        assert time.monotonic() < deadline, "the release window never closed"
        tries_seen.add(row["release_tries"])
        run_pipeline(dsn, [stage])
        time.sleep(0.02)
    assert row["attempts"] == 0
    assert {1, 2} <= tries_seen
    assert balance(app, "t") == 5
    failure = conn.execute(
        "select last_error from fairqueue.all_jobs where id = %s", (admitted.job_id,)
    ).fetchone()
    assert "cannot be reached" in failure["last_error"]


def test_a_refused_admission_leaves_no_held_work_in_the_upstream(app, conn) -> None:
    held = InProcessUpstream()
    Stage("held_refusals", handler=lambda job: None, credit_cost=2, upstream=held)
    add_credits(app, "t", 2)
    first = admit(app, "u1", "held_refusals", {"doc": "a"}, tenant_id="t", dedupe_key="k")
    assert len(held.work) == 1
    add_credits(app, "t", 10)
    with pytest.raises(DuplicateJob):
        admit(app, "u2", "held_refusals", {"doc": "a"}, tenant_id="t", dedupe_key="k")
    assert len(held.work) == 1
    with pytest.raises(InvalidPayload):
        admit(app, "u2", "held_refusals", {"doc": "a\x00"}, tenant_id="t")
    assert len(held.work) == 1
    with pytest.raises(InsufficientCredit):
        admit(app, "u3", "held_refusals", {"doc": "b"}, tenant_id="poor")
    assert len(held.work) == 1
    ids = [row["id"] for row in conn.execute("select id from fairqueue.jobs").fetchall()]
    assert ids == [first.job_id]

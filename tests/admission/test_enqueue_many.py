"""enqueue_many: the jobs of one type and tenant checked together and inserted by one statement,
with enqueue's checks, dedupe, tenant clamp and doorbells."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel, Field

from fairqueue import (
    Enqueued,
    InvalidPayload,
    NewJob,
    PayloadTooLarge,
    Stage,
    TenantMismatch,
    UnknownJobType,
    bulk,
    connect,
    enqueue,
    enqueue_many,
)
from fairqueue.db import Connection
from fairqueue.doorbells import Doorbell, MemoryDoorbells, ringing
from fairqueue.inputs import MAX_ENQUEUE_MANY
from support.rows import count, job, race


class Page(BaseModel):
    url: str = Field(min_length=1)
    title: str = "untitled"


def noop(_job: object) -> None:
    pass


PAGES = Stage("many_page", handler=noop, payload_model=Page, max_attempts=4)
PLAIN = Stage("many_plain", handler=noop)
BELL = Stage("many_bell", handler=noop, delivery="doorbell")


@pytest.fixture
def memory() -> Iterator[MemoryDoorbells]:
    bells = MemoryDoorbells()
    ringing.use_doorbells(bells)
    yield bells
    ringing.use_doorbells(None)


def ids(results: list[Enqueued]) -> list[Any]:
    return [r.job_id for r in results]


def statements(monkeypatch: pytest.MonkeyPatch, conn: Connection) -> list[str]:
    """The statements sent through ``conn.execute`` from now on (every statement the library
    sends for an enqueue goes through it)."""
    sent: list[str] = []
    execute: Callable[..., Any] = conn.execute

    def counted(query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(query, *args, **kwargs)

    monkeypatch.setattr(conn, "execute", counted)
    return sent


def test_each_job_gets_its_row_and_the_ids_come_back_in_the_order_given(conn) -> None:
    at = datetime(2031, 5, 1, 12, tzinfo=UTC)
    given = [
        NewJob({"url": "https://a"}, group_id="g1"),
        NewJob({"url": "https://b"}, max_attempts=9, run_after=at),
        NewJob({"url": "https://c", "extra": "dropped"}, run_after=timedelta(minutes=5)),
        NewJob({"url": "https://d"}, group_id="g2", dedupe_key="d"),
    ]
    results = enqueue_many(conn, "many_page", given, tenant_id="t1")

    assert [r.index for r in results] == [0, 1, 2, 3]
    assert all(r.inserted and r.refused is None for r in results)
    assert len(set(ids(results))) == 4
    rows = [job(conn, r.job_id) for r in results]
    assert [r["payload"]["url"] for r in rows] == [
        "https://a",
        "https://b",
        "https://c",
        "https://d",
    ]
    # What the model checked is what is stored, as with enqueue.
    assert rows[2]["payload"] == {"url": "https://c", "title": "untitled"}
    assert [r["tenant_id"] for r in rows] == ["t1"] * 4
    assert [r["group_id"] for r in rows] == ["g1", None, None, "g2"]
    assert [r["dedupe_key"] for r in rows] == [None, None, None, "d"]
    assert [r["max_attempts"] for r in rows] == [4, 9, 4, 4]
    assert [r["status"] for r in rows] == ["pending"] * 4
    assert rows[1]["run_after"] == at
    delay = conn.execute(
        "select run_after - now() as d from fairqueue.jobs where id = %s", (results[2].job_id,)
    ).fetchone()["d"]
    assert timedelta(minutes=4) < delay <= timedelta(minutes=5)
    assert count(conn) == 4


def test_payloads_and_labels_are_stored_as_given_whatever_they_hold(conn) -> None:
    odd = ['quote " backslash \\ brace { comma , ', "中文 ✓", "NULL", "", "\t\n"]
    given = [NewJob({"text": text, "list": [text, None]}, group_id=f"g {text}!") for text in odd]
    results = enqueue_many(conn, "many_plain", given, tenant_id="t1")
    rows = [job(conn, r.job_id) for r in results]
    assert [r["payload"] for r in rows] == [{"text": t, "list": [t, None]} for t in odd]
    assert [r["group_id"] for r in rows] == [f"g {t}!" for t in odd]


def test_a_dedupe_key_repeated_within_the_call_is_inserted_once_the_first_time(conn) -> None:
    given = [
        NewJob({"n": 0}, dedupe_key="k1"),
        NewJob({"n": 1}, dedupe_key="k2"),
        NewJob({"n": 2}, dedupe_key="k1"),
        NewJob({"n": 3}),
        NewJob({"n": 4}, dedupe_key="k2"),
        NewJob({"n": 5}),
    ]
    results = enqueue_many(conn, "many_plain", given, tenant_id="t1")

    assert [r.refused for r in results] == [None, None, "repeated", None, "repeated", None]
    assert [r.inserted for r in results] == [True, True, False, True, False, True]
    assert [job(conn, r.job_id)["payload"]["n"] for r in results if r.inserted] == [0, 1, 3, 5]
    assert count(conn) == 4


def test_a_key_an_open_job_holds_is_refused_and_a_finished_one_is_asked_again(conn) -> None:
    held = enqueue(conn, "many_plain", {}, tenant_id="t1", dedupe_key="open")
    finished = enqueue(conn, "many_plain", {}, tenant_id="t1", dedupe_key="finished")
    conn.execute("update fairqueue.jobs set status = 'done' where id = %s", (finished,))
    given = [
        NewJob({}, dedupe_key="finished"),
        NewJob({}, dedupe_key="open"),
        NewJob({}, dedupe_key="new"),
        NewJob({}, dedupe_key="open"),
    ]
    results = enqueue_many(conn, "many_plain", given, tenant_id="t1")

    assert [r.refused for r in results] == [None, "open", None, "repeated"]
    assert results[0].job_id not in (held, finished)
    assert count(conn) == 4
    # Another tenant's open job with the same key refuses nothing: dedupe is per tenant.
    other = enqueue_many(conn, "many_plain", [NewJob({}, dedupe_key="open")], tenant_id="t2")
    assert other[0].inserted
    system = enqueue_many(conn, "many_plain", [NewJob({}, dedupe_key="open")])
    assert system[0].inserted


def test_a_call_of_one_job_answers_as_enqueue_does(conn) -> None:
    [first] = enqueue_many(conn, "many_plain", [NewJob({}, dedupe_key="k")], tenant_id="t1")
    [again] = enqueue_many(conn, "many_plain", [NewJob({}, dedupe_key="k")], tenant_id="t1")
    assert first == Enqueued(index=0, job_id=first.job_id, refused=None)
    assert again == Enqueued(index=0, job_id=None, refused="open")
    assert enqueue(conn, "many_plain", {}, tenant_id="t1", dedupe_key="k") is None


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (NewJob({"url": ""}), InvalidPayload, r"jobs\[1\]: many_page: payload does not fit"),
        (NewJob({}), InvalidPayload, r"(?s)jobs\[1\]: .*url"),
        (NewJob(["not", "a", "dict"]), InvalidPayload, r"jobs\[1\]: .*must be a JSON object"),
        (NewJob({"url": "u", "x": {1, 2}}), InvalidPayload, r"jobs\[1\]: .*not JSON-serial"),
        (NewJob({"url": "a\x00b"}), InvalidPayload, r"jobs\[1\]: .*NUL character"),
        (NewJob({"url": "u"}, group_id=""), InvalidPayload, r"jobs\[1\]: .*group_id"),
        (NewJob({"url": "u"}, dedupe_key="k" * 201), InvalidPayload, r"jobs\[1\]: .*dedupe_key"),
        (NewJob({"url": "u"}, max_attempts=0), InvalidPayload, r"jobs\[1\]: .*from 1 to 1000"),
        (
            NewJob({"url": "u"}, run_after=datetime(2030, 1, 1)),
            InvalidPayload,
            r"jobs\[1\]: .*timezone-aware",
        ),
        (
            NewJob({"url": "u"}, run_after=timedelta(days=4000)),
            InvalidPayload,
            r"jobs\[1\]: .*at most 3650 days",
        ),
        (
            {"url": "u"},
            InvalidPayload,
            r"jobs\[1\]: many_page: each job must be a NewJob, got dict",
        ),
    ],
)
def test_one_bad_job_in_the_middle_refuses_the_call_and_nothing_is_inserted(
    conn, bad: object, error: type[Exception], message: str
) -> None:
    given = [NewJob({"url": "https://a"}), bad, NewJob({"url": "https://c"})]
    with pytest.raises(error, match=message):
        enqueue_many(conn, "many_page", given, tenant_id="t1")
    assert count(conn) == 0


def test_the_first_bad_job_is_named_whichever_check_finds_it(conn) -> None:
    # A payload only the encoding refuses, before a job whose group id is wrong: the call's
    # payloads are encoded together after the other checks, and that order must not show.
    given = [NewJob({"n": 0}), NewJob({"n": float("nan")}), NewJob({"n": 2}, group_id="")]
    with pytest.raises(InvalidPayload, match=r"jobs\[1\]: many_plain: .*nan"):
        enqueue_many(conn, "many_plain", given)
    given = [NewJob({"n": 0}), NewJob({"n": 1}, group_id=""), NewJob({"n": float("nan")})]
    with pytest.raises(InvalidPayload, match=r"jobs\[1\]: many_plain: group_id"):
        enqueue_many(conn, "many_plain", given)
    assert count(conn) == 0


def test_payloads_under_the_limit_each_are_stored_when_together_they_are_over_it(
    conn, monkeypatch
) -> None:
    monkeypatch.setenv("FAIRQUEUE_MAX_PAYLOAD_BYTES", "100")
    given = [NewJob({"n": n, "text": "x" * 60}) for n in range(5)]
    results = enqueue_many(conn, "many_plain", given)
    assert [job(conn, r.job_id)["payload"] for r in results] == [j.payload for j in given]


def test_a_payload_that_spells_an_escaped_nul_is_stored_as_given(conn) -> None:
    given = [NewJob({"text": "\\u0000"}), NewJob({"text": "plain"})]
    results = enqueue_many(conn, "many_plain", given)
    assert [job(conn, r.job_id)["payload"] for r in results] == [j.payload for j in given]


def test_a_payload_over_the_size_limit_names_its_job(conn, monkeypatch) -> None:
    monkeypatch.setenv("FAIRQUEUE_MAX_PAYLOAD_BYTES", "100")
    given = [NewJob({}), NewJob({}), NewJob({"blob": "x" * 1000})]
    with pytest.raises(PayloadTooLarge, match=r"jobs\[2\]: many_plain: payload is \d+ bytes"):
        enqueue_many(conn, "many_plain", given)
    assert count(conn) == 0


def test_the_payloads_of_one_call_have_a_limit_together(conn, monkeypatch) -> None:
    monkeypatch.setattr(bulk, "MAX_ENQUEUE_MANY_BYTES", 150)
    given = [NewJob({"blob": "x" * 40}) for _ in range(3)]
    with pytest.raises(PayloadTooLarge, match=r"jobs\[0\] to jobs\[2\] are 153 bytes together"):
        enqueue_many(conn, "many_plain", given)
    assert count(conn) == 0
    assert len(enqueue_many(conn, "many_plain", given[:2])) == 2


@pytest.mark.parametrize(
    ("job_type", "tenant_id", "error", "message"),
    [
        ("nope", None, UnknownJobType, "unknown job type 'nope'"),
        ("many_plain", "", InvalidPayload, "many_plain: tenant_id must be"),
        ("many_plain", "t\x00", InvalidPayload, "many_plain: tenant_id holds a NUL"),
    ],
)
def test_a_bad_type_or_tenant_is_refused_before_any_job_even_with_none(
    conn, job_type: str, tenant_id: str | None, error: type[Exception], message: str
) -> None:
    for given in ([NewJob({})], []):
        with pytest.raises(error, match=message):
            enqueue_many(conn, job_type, given, tenant_id=tenant_id)
    assert count(conn) == 0


def test_at_most_ten_thousand_jobs_per_call(conn, monkeypatch) -> None:
    sent = statements(monkeypatch, conn)
    with pytest.raises(InvalidPayload, match="at most 10000 jobs per call, got 10001"):
        enqueue_many(conn, "many_plain", [NewJob({})] * (MAX_ENQUEUE_MANY + 1))
    assert sent == []
    results = enqueue_many(conn, "many_plain", [NewJob({"n": n}) for n in range(MAX_ENQUEUE_MANY)])
    assert len(results) == MAX_ENQUEUE_MANY and all(r.inserted for r in results)
    assert count(conn) == MAX_ENQUEUE_MANY


def test_the_jobs_go_in_one_statement_whatever_their_number(dsn, conn, monkeypatch) -> None:
    sent: dict[tuple[int, bool], list[str]] = {}
    for n in (1, 500):
        for autocommit in (False, True):
            with connect(dsn, autocommit=autocommit) as c:
                sent[n, autocommit] = statements(monkeypatch, c)
                jobs = [NewJob({"n": k}) for k in range(n)]
                enqueue_many(c, "many_plain", jobs, tenant_id="t1")
                if not autocommit:
                    c.commit()
    # One call clamps its transaction and inserts: one for five hundred jobs as for one, in the
    # caller's transaction as in one of its own.
    assert all(len(found) == 1 for found in sent.values())
    assert all("fairqueue.enqueue_jobs(" in found[0] for found in sent.values())
    assert count(conn) == 1002


def test_an_empty_list_returns_nothing_and_sends_nothing(dsn, conn, monkeypatch) -> None:
    with connect(dsn) as c:
        enqueue(c, "many_plain", {}, tenant_id="a")
        sent = statements(monkeypatch, c)
        # Not sent, so not clamped either: a transaction of another tenant is not refused.
        assert enqueue_many(c, "many_plain", [], tenant_id="b") == []
        assert sent == []
    assert count(conn) == 1


def test_a_transaction_clamped_to_another_tenant_is_refused(dsn, conn) -> None:
    with connect(dsn) as c:
        enqueue(c, "many_plain", {}, tenant_id="a")
        with pytest.raises(TenantMismatch, match="works for tenant 'a'"):
            enqueue_many(c, "many_plain", [NewJob({}), NewJob({})], tenant_id="b")
        c.rollback()
    with connect(dsn) as c:
        enqueue_many(c, "many_plain", [NewJob({})], tenant_id="a")
        with pytest.raises(TenantMismatch, match="works for tenant 'a'"):
            enqueue_many(c, "many_plain", [NewJob({})])  # the system jobs are another clamp
        c.rollback()
    assert count(conn) == 0


def test_as_the_application_role_the_rows_are_the_tenants_and_commit_with_the_caller(
    dsn, conn
) -> None:
    with connect(dsn) as c:
        assert c.execute("select current_user as u").fetchone()["u"] == "fairqueue_app"
        first = enqueue_many(c, "many_plain", [NewJob({"n": 1}), NewJob({"n": 2})], tenant_id="a")
        # In the caller's transaction, under its clamp: its own rows, and only those.
        seen = c.execute("select id from fairqueue.jobs order by id").fetchall()
        assert sorted(r["id"] for r in seen) == sorted(ids(first))
    with connect(dsn) as c:
        enqueue_many(c, "many_plain", [NewJob({"n": 3})], tenant_id="b")
        c.rollback()
    with connect(dsn) as c:
        enqueue_many(c, "many_plain", [NewJob({"n": 4}, dedupe_key="k")], tenant_id="b")
    with connect(dsn) as c:
        # The key is held by tenant b's open job, which tenant a's clamp cannot see or hit.
        [mine] = enqueue_many(c, "many_plain", [NewJob({}, dedupe_key="k")], tenant_id="a")
        assert mine.inserted
        visible = c.execute("select tenant_id from fairqueue.jobs").fetchall()
        assert {r["tenant_id"] for r in visible} == {"a"}
    owners = conn.execute(
        "select tenant_id, count(*) as n from fairqueue.jobs group by 1"
    ).fetchall()
    assert {r["tenant_id"]: r["n"] for r in owners} == {"a": 3, "b": 1}


def test_doorbells_ring_once_per_inserted_job_after_commit_and_never_on_rollback(
    dsn, memory: MemoryDoorbells
) -> None:
    with connect(dsn, autocommit=True) as c:
        enqueue(c, "many_bell", {}, tenant_id="a", dedupe_key="held")
    memory.drain()
    given = [
        NewJob({}, dedupe_key="held"),  # an open job holds it: no row, no doorbell
        NewJob({}),
        NewJob({}, dedupe_key="x"),
        NewJob({}, dedupe_key="x"),  # repeated: no row, no doorbell
        NewJob({}),
    ]
    with connect(dsn) as c:
        results = enqueue_many(c, "many_bell", given, tenant_id="a")
        assert memory.drain() == []  # not before the commit
    rung = [Doorbell(job_id=r.job_id, tenant_id="a") for r in results if r.inserted]
    assert len(rung) == 3
    assert memory.drain() == rung
    with connect(dsn) as c:
        enqueue_many(c, "many_bell", [NewJob({}), NewJob({})], tenant_id="a")
        c.rollback()
    assert memory.drain() == []
    with connect(dsn, autocommit=True) as c:  # its own transaction: rung at once
        alone = enqueue_many(c, "many_bell", [NewJob({}), NewJob({})], tenant_id="b")
        enqueue_many(c, "many_plain", [NewJob({})], tenant_id="b")  # a cron stage rings nothing
    assert memory.drain() == [Doorbell(job_id=r.job_id, tenant_id="b") for r in alone]


def test_calls_that_share_keys_in_opposite_orders_never_deadlock(dsn, conn) -> None:
    keys = [f"k{n:03d}" for n in range(300)]
    rounds = 15
    barrier = threading.Barrier(2, timeout=30)

    def caller(order: list[str]) -> Callable[[], list[list[Enqueued]]]:
        def run() -> list[list[Enqueued]]:
            answers = []
            with connect(dsn, autocommit=True) as c:
                for r in range(rounds):
                    barrier.wait()
                    given = [NewJob({}, dedupe_key=f"{r}-{k}") for k in order]
                    answers.append(enqueue_many(c, "many_plain", given, tenant_id="t"))
            return answers

        return run

    outcomes = race([caller(keys), caller(keys[::-1])])
    for outcome in outcomes:
        assert not isinstance(outcome, BaseException), outcome
        assert not isinstance(outcome, psycopg.errors.DeadlockDetected)
    forwards, backwards = outcomes
    for r in range(rounds):
        inserted = [a.inserted for a in forwards[r]] + [a.inserted for a in backwards[r]]
        # Every key went in exactly once, whichever call got it.
        assert sum(inserted) == len(keys)
    assert count(conn) == rounds * len(keys)

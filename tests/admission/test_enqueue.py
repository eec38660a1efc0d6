from datetime import datetime, timedelta

import pytest
from pydantic import BaseModel, Field

from fairqueue import InvalidPayload, PayloadTooLarge, Stage, UnknownJobType, connect, enqueue
from support.rows import count, job


class Page(BaseModel):
    url: str = Field(min_length=1)


def noop(_job: object) -> None:
    pass


PAGES = Stage("page", handler=noop, payload_model=Page, max_attempts=4)
PLAIN = Stage("plain", handler=noop)


class Counted(BaseModel):
    pages: int = Field(ge=1)
    title: str = "untitled"


COUNTED = Stage("counted", handler=noop, payload_model=Counted)


def test_enqueue_inserts_a_pending_job_with_the_stage_defaults(conn) -> None:
    job_id = enqueue(conn, "page", {"url": "https://a"}, tenant_id="t1", group_id="g1")
    row = job(conn, job_id)
    assert row["status"] == "pending"
    assert row["payload"] == {"url": "https://a"}
    assert (row["tenant_id"], row["group_id"]) == ("t1", "g1")
    assert row["attempts"] == 0
    assert row["max_attempts"] == 4


def test_enqueue_commits_with_the_callers_transaction(dsn: str, conn) -> None:
    with connect(dsn) as c:
        enqueue(c, "plain", {})
        c.rollback()
    with connect(dsn) as c:
        enqueue(c, "plain", {"kept": True})
    assert count(conn) == 1
    assert count(conn, "payload = %s::jsonb", ('{"kept": true}',)) == 1


def test_open_duplicate_disappears_and_finished_one_may_be_asked_again(conn) -> None:
    first = enqueue(conn, "plain", {}, tenant_id="t1", dedupe_key="k")
    assert first is not None
    assert enqueue(conn, "plain", {}, tenant_id="t1", dedupe_key="k") is None
    conn.execute("update fairqueue.jobs set status = 'done' where id = %s", (first,))
    again = enqueue(conn, "plain", {}, tenant_id="t1", dedupe_key="k")
    assert again is not None and again != first
    assert count(conn) == 2


def test_dedupe_is_per_tenant(conn) -> None:
    assert enqueue(conn, "plain", {}, tenant_id="a", dedupe_key="k") is not None
    assert enqueue(conn, "plain", {}, tenant_id="b", dedupe_key="k") is not None
    assert enqueue(conn, "plain", {}, dedupe_key="k") is not None
    assert enqueue(conn, "plain", {}, dedupe_key="k") is None
    assert count(conn) == 3


def nested(depth: int) -> dict[str, object]:
    """A document of ``depth`` objects inside one another."""
    document: dict[str, object] = {}
    for _ in range(depth - 1):
        document = {"x": document}
    return document


@pytest.mark.parametrize(
    ("job_type", "payload", "options", "error", "message"),
    [
        ("nope", {}, {}, UnknownJobType, "unknown job type 'nope'"),
        ("page", {"url": ""}, {}, InvalidPayload, "does not fit the stage's model"),
        ("page", {}, {}, InvalidPayload, "url"),
        ("plain", ["not", "a", "dict"], {}, InvalidPayload, "must be a JSON object"),
        ("plain", {"x": {1, 2}}, {}, InvalidPayload, "not JSON-serializable"),
        ("plain", {"x": float("nan")}, {}, InvalidPayload, "not JSON-serializable"),
        ("plain", {"x": ["ok", "a\x00b"]}, {}, InvalidPayload, "NUL character"),
        ("plain", {"a\x00": 1}, {}, InvalidPayload, "NUL character"),
        ("plain", {}, {"run_after": datetime(2030, 1, 1)}, InvalidPayload, "timezone-aware"),
        ("plain", {}, {"tenant_id": ""}, InvalidPayload, "tenant_id"),
        ("plain", {}, {"max_attempts": 0}, InvalidPayload, "max_attempts"),
        ("plain", {"x": "a\ud800b"}, {}, InvalidPayload, "x is not valid Unicode"),
        ("plain", {"\udfff": 1}, {}, InvalidPayload, "a key of the document is not valid"),
        ("plain", nested(1000), {}, InvalidPayload, "nests deeper than 64 levels"),
        ("plain", nested(65), {}, InvalidPayload, "nests deeper than 64 levels"),
        ("plain", {1: "a", "1": "b"}, {}, InvalidPayload, "the key 1, which is not a string"),
        ("plain", {"x": [{"y": {2: 0}}]}, {}, InvalidPayload, r"value at x\[0\]\.y has the key 2"),
        ("plain", {"x": float("inf")}, {}, InvalidPayload, "value at x is inf"),
        ("plain", {}, {"tenant_id": "a\x00b"}, InvalidPayload, "tenant_id holds a NUL"),
        ("plain", {}, {"tenant_id": "t\ud800"}, InvalidPayload, "tenant_id is not valid Unicode"),
        ("plain", {}, {"group_id": "g" * 2700}, InvalidPayload, "group_id is 2700 characters"),
        ("plain", {}, {"dedupe_key": "k" * 10_240}, InvalidPayload, "over the limit of 200"),
        ("plain", {}, {"max_attempts": 2**31}, InvalidPayload, "from 1 to 1000"),
        ("plain", {}, {"max_attempts": True}, InvalidPayload, "max_attempts"),
        (
            "plain",
            {},
            {"run_after": timedelta(days=999_999_999)},
            InvalidPayload,
            "at most 3650 days",
        ),
        ("plain", {}, {"run_after": timedelta(days=-4000)}, InvalidPayload, "at most 3650"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error_and_changes_nothing(
    conn, job_type, payload, options, error, message
) -> None:
    with pytest.raises(error, match=message):
        enqueue(conn, job_type, payload, **options)
    assert count(conn) == 0


def test_payload_over_the_size_limit_is_refused(conn, monkeypatch) -> None:
    assert enqueue(conn, "plain", {"blob": "x" * 1000}) is not None
    monkeypatch.setenv("FAIRQUEUE_MAX_PAYLOAD_BYTES", "100")
    with pytest.raises(PayloadTooLarge, match="over the limit of 100"):
        enqueue(conn, "plain", {"blob": "x" * 1000})
    assert count(conn) == 1


def test_the_size_limit_counts_the_utf8_bytes_stored(conn) -> None:
    # 200,000 CJK characters: 600,000 bytes of UTF-8, 1.2 MB if each were a \u escape.
    assert enqueue(conn, "plain", {"text": "中" * 200_000}) is not None
    with pytest.raises(PayloadTooLarge, match="1200011 bytes"):
        enqueue(conn, "plain", {"text": "中" * 400_000})
    assert count(conn) == 1


def test_64_levels_are_accepted_and_stored_as_given(conn) -> None:
    job_id = enqueue(conn, "plain", nested(64))
    assert job(conn, job_id)["payload"] == nested(64)


def test_text_that_spells_an_escape_is_stored_as_written(conn) -> None:
    # A backslash then "u0000" is six ordinary characters, not a NUL.
    payload = {"path": "C:\\u0000\\file", "items": ("a", ["b", {"c": None}])}
    job_id = enqueue(conn, "plain", payload)
    assert job(conn, job_id)["payload"] == {
        "path": "C:\\u0000\\file",
        "items": ["a", ["b", {"c": None}]],
    }


def test_a_document_that_holds_itself_is_refused(conn) -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(InvalidPayload, match="nests deeper than 64 levels"):
        enqueue(conn, "plain", {"x": looped})
    assert count(conn) == 0


def test_what_is_stored_is_what_the_model_checked(conn) -> None:
    job_id = enqueue(conn, "counted", {"pages": 5, "note": "kept out"})
    assert job(conn, job_id)["payload"] == {"pages": 5, "title": "untitled"}


def test_a_number_without_a_fraction_is_an_integer_as_json_schema_has_it(conn) -> None:
    job_id = enqueue(conn, "counted", {"pages": 2.0})
    assert job(conn, job_id)["payload"]["pages"] == 2


@pytest.mark.parametrize("pages", ["5", True, 5.5])
def test_a_model_checks_the_payload_as_json_strictly(conn, pages: object) -> None:
    with pytest.raises(InvalidPayload, match="pages"):
        enqueue(conn, "counted", {"pages": pages})
    assert count(conn) == 0


def test_default_size_limit_is_one_mebibyte(conn) -> None:
    with pytest.raises(PayloadTooLarge, match="over the limit of 1048576"):
        enqueue(conn, "plain", {"blob": "x" * (1024 * 1024)})


def test_run_after_delays_the_job(conn) -> None:
    later = enqueue(conn, "plain", {}, run_after=timedelta(minutes=5))
    row = conn.execute(
        "select run_after - now() as delay from fairqueue.jobs where id = %s", (later,)
    ).fetchone()
    assert timedelta(minutes=4) < row["delay"] <= timedelta(minutes=5)

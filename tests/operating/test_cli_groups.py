"""``fairqueue groups`` and ``fairqueue quotas``, run in-process against the test's database."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import psycopg
import pytest

from fairqueue import Stage, enqueue, run_pipeline
from fairqueue.cli import main
from fairqueue.cli.groups import NO_QUOTAS, QUOTA_COLUMNS
from fairqueue.db import Connection, connect
from fairqueue.errors import ConfigurationError
from fairqueue.quotas import define_quota
from support.rows import job

GROUPED = Stage("cli_groups_echo", handler=lambda job: None, batch=10)


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only --database-url says where the database is; FAIRQUEUE_* from the shell do not leak in."""
    for name in ("FAIRQUEUE_STAGES", "FAIRQUEUE_ENV"):
        monkeypatch.delenv(name, raising=False)


def groups(conn: Connection) -> list[tuple[str | None, str, str]]:
    rows = conn.execute(
        'select tenant_id, id, status from fairqueue.groups order by key collate "C"'
    ).fetchall()
    return [(r["tenant_id"], r["id"], r["status"]) for r in rows]


def quotas(conn: Connection) -> list[dict[str, Any]]:
    return conn.execute(
        "select name, capacity, remaining, reserve, extract(epoch from period) as period_s,"
        " resets_at from fairqueue.quotas order by name"
    ).fetchall()


def listed(capsys: pytest.CaptureFixture[str], dsn: str) -> dict[str, list[str]]:
    """`fairqueue quotas list`'s rows by name, each split into its columns."""
    assert main(["--database-url", dsn, "quotas", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(QUOTA_COLUMNS)
    assert set(lines[1]) == {"-", " "}
    rows = {}
    for line in lines[2:]:
        # name, capacity, remaining, reserve, date, time, state (which may be two words)
        name, capacity, remaining, reserve, day, clock, state = line.split(None, 6)
        rows[name] = [capacity, remaining, reserve, f"{day} {clock}", state]
    return rows


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("fairqueue: ")
    return lines[0]


# -- groups ----------------------------------------------------------------------------------


def test_a_paused_group_keeps_its_jobs_pending_until_it_is_resumed(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    inbox = [enqueue(conn, GROUPED.name, {}, tenant_id="acme", group_id="inbox") for _ in range(2)]
    other = enqueue(conn, GROUPED.name, {}, tenant_id="acme", group_id="other")
    # another tenant's group of the same name is not the one paused
    theirs = enqueue(conn, GROUPED.name, {}, tenant_id="zeta", group_id="inbox")

    assert main(["--database-url", dsn, "groups", "pause", "inbox", "--tenant", "acme"]) == 0
    assert capsys.readouterr().out == "paused group 'inbox' of tenant 'acme'\n"
    assert groups(conn) == [("acme", "inbox", "paused")]

    assert run_pipeline(dsn, [GROUPED]).jobs_done == 2
    assert [job(conn, i)["status"] for i in inbox] == ["pending", "pending"]
    assert (job(conn, other)["status"], job(conn, theirs)["status"]) == ("done", "done")

    assert main(["--database-url", dsn, "groups", "resume", "inbox", "--tenant", "acme"]) == 0
    assert capsys.readouterr().out == "resumed group 'inbox' of tenant 'acme'\n"
    assert groups(conn) == [("acme", "inbox", "active")]

    assert run_pipeline(dsn, [GROUPED]).jobs_done == 2
    assert [job(conn, i)["status"] for i in inbox] == ["done", "done"]


def test_without_a_tenant_the_group_of_the_jobs_with_no_tenant_is_paused(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    conn.execute("insert into fairqueue.groups (id, tenant_id) values ('inbox', 'acme')")
    enqueue(conn, GROUPED.name, {}, group_id="inbox")
    assert main(["--database-url", dsn, "groups", "pause", "inbox"]) == 0
    assert capsys.readouterr().out == "paused group 'inbox' (no tenant)\n"
    assert groups(conn) == [(None, "inbox", "paused"), ("acme", "inbox", "active")]


def test_pause_and_resume_twice_each_and_resume_a_group_never_paused(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    # A group that has jobs but was never paused is resumed quietly: it is active, as it was.
    enqueue(conn, GROUPED.name, {}, tenant_id="acme", group_id="never")
    enqueue(conn, GROUPED.name, {}, tenant_id="acme", group_id="g")
    assert main(["--database-url", dsn, "groups", "resume", "never", "--tenant", "acme"]) == 0
    assert capsys.readouterr().out == "resumed group 'never' of tenant 'acme'\n"
    assert groups(conn) == [("acme", "never", "active")]

    for verb, status in (("pause", "paused"), ("resume", "active")):
        for _ in range(2):
            assert main(["--database-url", dsn, "groups", verb, "g", "--tenant", "acme"]) == 0
            assert groups(conn) == [("acme", "g", status), ("acme", "never", "active")]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("verb", "group", "tenant"),
    [
        # the example's group is initech/busy: "busy" alone is no group of initech's
        ("pause", "busy", "initech"),
        ("pause", "typo-group", "acme"),
        # a group of the same id under another tenant, or with no tenant, is not this one
        ("pause", "inbox", "zeta"),
        ("pause", "inbox", None),
        ("resume", "nosuchgroup", "nobody"),
        ("resume", "inbox", "zeta"),
    ],
)
def test_a_group_no_job_has_had_is_refused_in_one_line_and_nothing_is_written(
    dsn: str,
    conn: Connection,
    capsys: pytest.CaptureFixture[str],
    verb: str,
    group: str,
    tenant: str | None,
) -> None:
    enqueue(conn, GROUPED.name, {}, tenant_id="initech", group_id="initech/busy")
    enqueue(conn, GROUPED.name, {}, tenant_id="acme", group_id="inbox")
    argv = ["--database-url", dsn, "groups", verb, group]
    assert main([*argv, *(["--tenant", tenant] if tenant else [])]) == 2
    owner = f"tenant {tenant!r}" if tenant else "no tenant"
    line = one_error_line(capsys)
    assert line.startswith(f"fairqueue: no job of {owner} has ever had group {group!r}: "), line
    assert groups(conn) == []


def test_a_group_whose_jobs_have_all_finished_is_still_known(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    enqueue(conn, GROUPED.name, {}, tenant_id="acme", group_id="quiet")
    assert run_pipeline(dsn, [GROUPED]).jobs_done == 1
    assert main(["--database-url", dsn, "groups", "pause", "quiet", "--tenant", "acme"]) == 0
    assert groups(conn) == [("acme", "quiet", "paused")]


def test_create_pauses_a_group_before_its_first_job_which_then_waits(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--database-url", dsn, "groups", "pause", "later", "--tenant", "acme", "--create"]
    assert main(argv) == 0
    assert capsys.readouterr().out == "paused group 'later' of tenant 'acme'\n"
    assert groups(conn) == [("acme", "later", "paused")]
    waiting = enqueue(conn, GROUPED.name, {}, tenant_id="acme", group_id="later")
    assert run_pipeline(dsn, [GROUPED]).jobs_done == 0
    assert job(conn, waiting)["status"] == "pending"
    # once it has a row, resume knows it
    assert main(["--database-url", dsn, "groups", "resume", "later", "--tenant", "acme"]) == 0
    assert run_pipeline(dsn, [GROUPED]).jobs_done == 1


def test_database_url_is_taken_after_the_nested_subcommand(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "pause", "g", "--create", "--database-url", dsn]) == 0
    assert main(["groups", "pause", "h", "--tenant", "t", "--database-url", dsn, "--create"]) == 0
    assert groups(conn) == [(None, "g", "paused"), ("t", "h", "paused")]
    assert main(["groups", "resume", "--database-url", dsn, "g"]) == 0
    assert groups(conn) == [(None, "g", "active"), ("t", "h", "paused")]

    assert (
        main(
            ["quotas", "define", "api", "--capacity", "3", "--period", "60", "--database-url", dsn]
        )
        == 0
    )
    assert [q["name"] for q in quotas(conn)] == ["api"]
    capsys.readouterr()
    assert main(["quotas", "list", "--database-url", dsn]) == 0
    assert main(["quotas", "--database-url", dsn]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    assert lines[:3] == lines[3:]
    assert lines[2].split()[:4] == ["api", "3", "3", "0"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["groups", "pause", ""], "group_id must be a non-empty string"),
        (["groups", "resume", ""], "group_id must be a non-empty string"),
        (["groups", "resume", "g", "--tenant", ""], "must be a non-empty string"),
        (["groups", "pause", "h", "--tenant", ""], "must be a non-empty string"),
    ],
)
def test_an_empty_group_or_tenant_exits_2_in_one_line_and_changes_nothing(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    conn.execute("insert into fairqueue.groups (id, status) values ('g', 'paused')")
    before = groups(conn)
    assert main(["--database-url", dsn, *argv]) == 2
    assert message in one_error_line(capsys)
    assert groups(conn) == before == [(None, "g", "paused")]


# -- quotas ----------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["quotas"], ["quotas", "list"]])
def test_no_quotas_lists_the_header_and_how_to_define_one(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(["--database-url", dsn, *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0].split() == list(QUOTA_COLUMNS)
    assert set(lines[1]) == {"-", " "}
    assert lines[2] == NO_QUOTAS


def test_define_writes_a_full_quota_and_list_shows_it(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--database-url", dsn, "quotas", "define", "api", "--capacity", "100"]
    assert main([*argv, "--period", "3600", "--reserve", "10"]) == 0
    out = capsys.readouterr().out
    (row,) = quotas(conn)
    assert (row["name"], row["capacity"], row["remaining"], row["reserve"]) == ("api", 100, 100, 10)
    assert row["period_s"] == 3600
    left = conn.execute(
        "select extract(epoch from resets_at - now()) as s from fairqueue.quotas"
    ).fetchone()
    assert left is not None and 3500 < left["s"] <= 3600
    resets = f"{row['resets_at'].astimezone(UTC):%Y-%m-%d %H:%M:%S}"
    assert out == (
        "defined quota 'api': capacity 100, reserve 10, period 3600 s; remaining 100,"
        f" resets {resets} UTC (ok)\n"
    )

    assert listed(capsys, dsn) == {"api": ["100", "100", "10", resets, "ok"]}


def test_define_again_changes_capacity_reserve_and_period_and_keeps_remaining(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    define_quota(conn, "api", capacity=100, period=timedelta(hours=1), reserve=10)
    conn.execute("update fairqueue.quotas set remaining = 40")
    argv = ["--database-url", dsn, "quotas", "define", "api", "--capacity", "200"]
    assert main([*argv, "--period", "60", "--reserve", "5"]) == 0
    assert "remaining 40" in capsys.readouterr().out
    (row,) = quotas(conn)
    assert (row["capacity"], row["remaining"], row["reserve"], row["period_s"]) == (200, 40, 5, 60)


def test_list_names_the_state_each_quota_is_in_in_name_order(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("c_spent", "a_plenty", "b_reserved", "d_below_reserve"):
        define_quota(conn, name, capacity=10, period=timedelta(hours=1), reserve=3)
    remaining = {"a_plenty": 4, "b_reserved": 3, "c_spent": 0, "d_below_reserve": 1}
    for name, left in remaining.items():
        conn.execute("update fairqueue.quotas set remaining = %s where name = %s", (left, name))

    assert main(["--database-url", dsn, "quotas"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == sorted(remaining)
    rows = listed(capsys, dsn)
    assert {name: (r[1], r[4]) for name, r in rows.items()} == {
        "a_plenty": ("4", "ok"),
        "b_reserved": ("3", "at reserve"),
        "c_spent": ("0", "exhausted"),
        "d_below_reserve": ("1", "at reserve"),
    }
    # Looking does not change them.
    assert {q["name"]: q["remaining"] for q in quotas(conn)} == remaining


def test_a_quota_past_its_reset_time_is_listed_and_stored_full(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    define_quota(conn, "due", capacity=10, period=timedelta(hours=1), reserve=2)
    define_quota(conn, "not_due", capacity=10, period=timedelta(hours=1), reserve=2)
    conn.execute(
        "update fairqueue.quotas set remaining = 0,"
        " resets_at = now() - interval '10 minutes' where name = 'due'"
    )
    conn.execute("update fairqueue.quotas set remaining = 1 where name = 'not_due'")

    rows = listed(capsys, dsn)

    stored = {q["name"]: q for q in quotas(conn)}
    assert (stored["due"]["remaining"], stored["not_due"]["remaining"]) == (10, 1)
    # the next reset is one period after the one that passed
    left = conn.execute(
        "select extract(epoch from resets_at - now()) as s from fairqueue.quotas where name = 'due'"
    ).fetchone()
    assert left is not None and 3000 - 60 < left["s"] <= 3000
    resets = f"{stored['due']['resets_at'].astimezone(UTC):%Y-%m-%d %H:%M:%S}"
    assert rows["due"] == ["10", "10", "2", resets, "ok"]
    assert rows["not_due"][1:] == [
        "1",
        "2",
        f"{stored['not_due']['resets_at'].astimezone(UTC):%Y-%m-%d %H:%M:%S}",
        "at reserve",
    ]


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("api", ["--capacity", "5", "--period", "60", "--reserve", "6"], "reserve <= capacity"),
        ("", ["--capacity", "5", "--period", "60"], "name must be a non-empty string"),
        ("x" * 201, ["--capacity", "5", "--period", "60"], "over the limit of 200"),
    ],
)
def test_a_quota_that_cannot_be_defined_exits_2_in_one_line_and_writes_nothing(
    dsn: str,
    conn: Connection,
    capsys: pytest.CaptureFixture[str],
    name: str,
    options: list[str],
    message: str,
) -> None:
    assert main(["--database-url", dsn, "quotas", "define", name, *options]) == 2
    assert message in one_error_line(capsys)
    assert quotas(conn) == []


def test_a_bad_redefinition_leaves_the_quota_as_it_was(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    define_quota(conn, "api", capacity=5, period=timedelta(hours=1), reserve=1)
    before = quotas(conn)
    argv = ["quotas", "define", "api", "--capacity", "2", "--period", "60", "--reserve", "3"]
    assert main(["--database-url", dsn, *argv]) == 2
    assert "reserve <= capacity" in one_error_line(capsys)
    assert quotas(conn) == before


@pytest.mark.parametrize(
    "options",
    [
        ["--capacity", "-1", "--period", "60"],
        ["--capacity", "5", "--period", "0"],
        ["--capacity", "5", "--period", "1.5"],
        ["--capacity", "5", "--period", "60", "--reserve", "-1"],
        ["--capacity", "five", "--period", "60"],
        ["--period", "60"],
        ["--capacity", "5", "--period", str(400 * 86400)],
        # past a bigint (the database had no function for a numeric) and past a timedelta
        ["--capacity", "99999999999999999999", "--period", "60"],
        ["--capacity", "10", "--period", "99999999999999999999"],
        ["--capacity", str(10**15 + 1), "--period", "60"],
        ["--capacity", "10", "--period", "60", "--reserve", "99999999999999999999"],
    ],
)
def test_define_refuses_numbers_out_of_range_before_connecting(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--database-url", dsn, "quotas", "define", "api", *options])
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("fairqueue quotas define: error:")
    assert quotas(conn) == []


def test_a_quota_of_capacity_zero_is_defined_exhausted(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    # As define_quota allows: a quota that lets nothing be spent (holding its stages' claims).
    argv = ["--database-url", dsn, "quotas", "define", "shut", "--capacity", "0", "--period", "60"]
    assert main(argv) == 0
    assert capsys.readouterr().out.endswith(" (exhausted)\n")
    assert [(q["capacity"], q["remaining"], q["reserve"]) for q in quotas(conn)] == [(0, 0, 0)]
    assert listed(capsys, dsn)["shut"][4] == "exhausted"


def test_the_door_refuses_a_capacity_past_the_most_a_quota_holds(
    dsn: str, conn: Connection
) -> None:
    with connect(dsn) as app, pytest.raises(psycopg.Error, match=r"capacity <= 10\^15"):
        app.execute("select * from fairqueue.define_quota('q', 1000000000000001, 0, 60)")
    with pytest.raises(ConfigurationError, match=r"capacity <= 1,000,000,000,000,000"):
        define_quota(conn, "q", capacity=10**15 + 1, period=timedelta(hours=1))
    assert quotas(conn) == []
    define_quota(conn, "q", capacity=10**15, period=timedelta(hours=1), reserve=10**15)
    assert [(q["capacity"], q["reserve"]) for q in quotas(conn)] == [(10**15, 10**15)]

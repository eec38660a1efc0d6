"""Every option of every command: bounded where it is parsed, explained in --help, and the
command's own version and migration output."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from uuid import uuid4

import pytest

from fairqueue.cli import build_parser, main
from fairqueue.db import Connection

HUGE = "99999999999999999999"

# Each numeric option: the command line before the value, and what follows it.
NUMERIC_OPTIONS = [
    (["run", "--interval"], []),
    (["run", "--seed"], []),
    (["serve", "--cron-interval"], []),
    (["serve", "--sweep-interval"], []),
    (["token", "--tenant", "acme", "--lane", "alice", "--ttl"], []),
    (["runs", "--limit"], []),
    (["jobs", "list", "--limit"], []),
    (["jobs", "retry", "--failed", "--limit"], []),
    (["top", "--interval"], []),
    (["credits", "grant", "acme"], []),
    (["quotas", "define", "q", "--period", "60", "--capacity"], []),
    (["quotas", "define", "q", "--capacity", "10", "--period"], []),
    (["quotas", "define", "q", "--capacity", "10", "--period", "60", "--reserve"], []),
]


def written(conn: Connection) -> dict[str, int]:
    row = conn.execute(
        "select (select count(*) from fairqueue.quotas) as quotas,"
        " (select count(*) from fairqueue.credits) as credits,"
        " (select count(*) from fairqueue.all_jobs) as jobs,"
        " (select count(*) from fairqueue.groups) as groups,"
        " (select count(*) from fairqueue.runs) as runs"
    ).fetchone()
    assert row is not None
    return dict(row)


@pytest.mark.parametrize("value", [HUGE, f"-{HUGE}", "-1", "inf", "nan", "1e400"])
@pytest.mark.parametrize(("before", "after"), NUMERIC_OPTIONS)
def test_a_number_out_of_range_is_one_line_exit_2_and_nothing_written(
    dsn: str,
    conn: Connection,
    capsys: pytest.CaptureFixture[str],
    before: list[str],
    after: list[str],
    value: str,
) -> None:
    was = written(conn)
    with pytest.raises(SystemExit) as exited:
        main(["--database-url", dsn, *before, value, *after])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"fairqueue {before[0]}")
    assert ": error: " in line and "Traceback" not in line
    assert line.endswith("--help)")
    assert written(conn) == was


def test_the_numbers_named_in_the_issue_as_a_real_process(dsn: str, conn: Connection) -> None:
    for argv in (
        ["quotas", "define", "q", "--capacity", HUGE, "--period", "60"],
        ["quotas", "define", "q", "--capacity", "10", "--period", HUGE],
        ["runs", "--limit", HUGE],
        ["credits", "grant", "acme", HUGE],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "fairqueue", "--database-url", dsn, *argv],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
    assert written(conn)["quotas"] == 0
    assert written(conn)["credits"] == 0


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from parsers(sub)


def test_every_option_and_argument_of_every_command_has_help() -> None:
    missing = [
        f"{p.prog} {action.dest}"
        for p in parsers(build_parser())
        for action in p._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def test_help_is_plain_text() -> None:
    for p in parsers(build_parser()):
        text = p.format_help()
        for markup in ("``", ":func:", ":class:", ":meth:"):
            assert markup not in text, (p.prog, text)


def test_version_is_the_installed_packages() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fairqueue", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"fairqueue {metadata.version('fairqueue')}\n",
        "",
    )


def test_migrate_prints_a_line_per_file_applied_then_a_count(
    server_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.databases import scratch_database

    with scratch_database(server_dsn, f"fq_cli_migrate_{uuid4().hex[:12]}") as fresh:
        assert main(["--database-url", fresh, "migrate"]) == 0
        lines = capsys.readouterr().out.splitlines()
        *applied, total = lines
        assert applied[0] == "applied 0001_core.sql"
        assert all(line.startswith("applied ") and line.endswith(".sql") for line in applied)
        assert len(set(applied)) == len(applied) > 40
        assert total == f"{len(applied)} migration(s) applied"
        assert max(len(line) for line in lines) < 100
        assert main(["--database-url", fresh, "migrate"]) == 0
        assert capsys.readouterr().out == "up to date\n"


def test_a_token_without_a_lifetime_is_refused_where_it_is_parsed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["token", "--tenant", "acme", "--lane", "alice", "--ttl", "0"])
    assert exited.value.code == 2
    assert "argument --ttl: must be a whole number from 1 to 2,592,000, got 0" in (
        capsys.readouterr().err
    )

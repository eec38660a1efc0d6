"""Labels a client chose (group ids, types, errors) reach the operator's terminal as text: no
markup read into them, no control character passed through. Run as the installed command runs,
in a subprocess whose output is captured byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fairqueue import enqueue
from fairqueue.cli.common import visible
from fairqueue.db import Connection
from support import jobs_stages

# A group id that closed a style rich never opened (MarkupError), one that rendered as a link,
# and one that cleared the screen and retitled the window.
CLOSES_A_STYLE = "[/bold]"
LINKS_AWAY = "[link=https://evil.example/]click[/link]"
CLEARS_THE_SCREEN = "\x1b[2J\x1b]0;pwned\x07"
HOSTILE = [CLOSES_A_STYLE, LINKS_AWAY, CLEARS_THE_SCREEN]


def command(dsn: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "fairqueue", "--database-url", dsn, *argv],
        capture_output=True,
        env={**os.environ, "COLUMNS": "200", "LINES": "60", "TERM": "xterm-256color"},
        timeout=60,
        check=False,
    )


@pytest.fixture
def hostile_groups(conn: Connection) -> None:
    for group in HOSTILE:
        enqueue(conn, jobs_stages.LOOKED_AT.name, {}, tenant_id="acme", group_id=group)


def test_visible_writes_each_control_character_as_its_escape() -> None:
    assert visible("plain [b]text[/b] é") == "plain [b]text[/b] é"
    assert visible(CLEARS_THE_SCREEN) == "\\x1b[2J\\x1b]0;pwned\\x07"
    assert visible("a\tb\nc\u202ed\u200be") == "a\\x09b\\x0ac\\u202ed\\u200be"
    assert visible("line one\nline two", keep_newlines=True) == "line one\nline two"


@pytest.mark.usefixtures("hostile_groups")
def test_top_once_shows_hostile_group_ids_as_text(dsn: str) -> None:
    done = command(dsn, "top", "--once")
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert b"\x1b" not in done.stdout and b"\x07" not in done.stdout
    out = done.stdout.decode()
    assert CLOSES_A_STYLE in out
    assert LINKS_AWAY in out
    assert visible(CLEARS_THE_SCREEN) in out


@pytest.mark.usefixtures("hostile_groups")
def test_jobs_list_shows_hostile_group_ids_as_text(dsn: str) -> None:
    done = command(dsn, "jobs", "list", "--tenant", "acme")
    assert (done.returncode, done.stderr) == (0, b"")
    assert b"\x1b" not in done.stdout and b"\x07" not in done.stdout
    out = done.stdout.decode()
    assert CLOSES_A_STYLE in out
    assert LINKS_AWAY in out
    assert visible(CLEARS_THE_SCREEN) in out


def test_a_hostile_group_in_a_refusal_is_shown_as_text(dsn: str) -> None:
    done = command(dsn, "groups", "pause", CLEARS_THE_SCREEN, "--tenant", "acme")
    assert done.returncode == 2
    assert b"\x1b" not in done.stderr and b"\x07" not in done.stderr
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("fairqueue: no job of tenant 'acme' has ever had group ")
    assert visible(CLEARS_THE_SCREEN) in line

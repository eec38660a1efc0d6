"""What every ``fairqueue`` command shares: where the database is, a connection that has checked
the schema, payloads from an argument, a file or stdin, and plain text tables."""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..db import Connection, connect, resolve_dsn
from ..errors import InvalidPayload
from ..job_info import MAX_LISTED
from ..migrate import require_migrated
from ..results import ResultSettings
from ..runs import RunRow
from ..status import missing_results, queue_status


def resolve_database(args: argparse.Namespace) -> str:
    """--database-url, else what :func:`fairqueue.db.resolve_dsn` finds: DATABASE_URL, else
    (outside production) the embedded Postgres."""
    return resolve_dsn(getattr(args, "database_url", None))


def migrated_database(args: argparse.Namespace) -> str:
    """The database's DSN, once it is known to be migrated (for commands that connect later)."""
    dsn = resolve_database(args)
    with connect(dsn, as_app_role=True) as conn:
        require_migrated(conn)
    return dsn


@contextmanager
def app_connection(args: argparse.Namespace, *, autocommit: bool = False) -> Iterator[Connection]:
    """A connection as the application role to a database the migrations have reached: one that
    was never migrated is refused with what to do, not a missing table's error."""
    with connect(resolve_database(args), autocommit=autocommit, as_app_role=True) as conn:
        require_migrated(conn)
        if not autocommit:
            conn.commit()
        yield conn


# Characters a terminal acts on or hides (escapes, bells, bidi overrides, zero widths).
_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def visible(text: str, *, keep_newlines: bool = False) -> str:
    """Text a client chose (a group id, a type, an error it raised), made safe to print: each
    character a terminal would act on or hide is written as its escape (``\\x1b``,
    ``\\u202e``), so that a label can neither clear the screen nor pass for another.
    ``keep_newlines``: a multi-line text (a traceback) keeps its lines. Every value the CLI
    shows goes through here; ``fairqueue top`` then shows it as plain text, never as markup."""
    if text.isprintable():
        return text
    return "".join(_seen(c, keep_newlines) for c in text)


def _seen(char: str, keep_newlines: bool) -> str:
    if char == " " or (keep_newlines and char == "\n"):
        return char
    if unicodedata.category(char) not in _UNSEEN_CATEGORIES:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def read_payload(text: str) -> Any:
    """A JSON document given as itself, as ``@path`` (a file's content) or as ``-`` (stdin), so
    that a payload larger than the command line allows can still be given."""
    if text == "-":
        source, where = sys.stdin.read(), "stdin"
    elif text.startswith("@"):
        path = Path(text[1:])
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidPayload(f"cannot read the payload file {str(path)!r}: {exc}") from None
        where = str(path)
    else:
        source, where = text, "the payload"
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise InvalidPayload(f"{where} is not valid JSON: {exc}") from None


def whole_number_argument(least: int, most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``least`` to ``most``, so that no value past what
    the database or the library takes gets any further than the command line."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{visible(text)!r} is not a whole number") from None
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {least:,} to {most:,}, got {_shown_number(text)}"
            )
        return value

    return parse


def seconds_argument(least: float, most: float) -> Callable[[str], float]:
    """An argparse type: a number of seconds from ``least`` to ``most`` (not inf, not nan)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{visible(text)!r} is not a number of seconds"
            ) from None
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(
                f"must be from {least:g} to {most:g} seconds, got {_shown_number(text)}"
            )
        return value

    return parse


def _shown_number(text: str) -> str:
    """A refused number as typed, cut short: twenty thousand digits make no useful message."""
    text = visible(text.strip())
    return text if len(text) <= 24 else text[:21] + "..."


# How many jobs or runs one listing prints at most: the library's own limit for jobs.
count_argument = whole_number_argument(1, MAX_LISTED)


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, a rule under the header; numbers to the right."""
    cells = [[str(c) for c in header], *[["-" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [
        any(isinstance(r[i], int | float) for r in rows)
        and all(isinstance(r[i], int | float) or r[i] is None for r in rows)
        for i in range(len(header))
    ]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(row, widths, numeric, strict=True)
        ).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *map(line, cells[1:])])


RUN_COLUMNS = ("started", "trigger", "stop_reason", "done", "failed", "deferred", "units", "secs")


def print_run_header(*, open_left: bool = False) -> None:
    """The runs table's header; ``open_left`` adds the column of jobs the queue still holds."""
    line = "{:<19} {:<9} {:<16} {:>5} {:>6} {:>8} {:>5} {:>6}".format(*RUN_COLUMNS)
    print(line + (" {:>6}".format("open") if open_left else ""))


def print_run(run: RunRow, open_left: int | None = None) -> None:
    """One run's row; ``open_left``: the jobs still open in the queue once it closed."""
    seconds = (run.finished_at - run.started_at).total_seconds() if run.finished_at else 0.0
    print(
        f"{run.started_at:%Y-%m-%d %H:%M:%S} {visible(run.trigger):<9}"
        f" {run.stop_reason or 'open':<16}"
        f" {run.jobs_done:>5} {run.jobs_failed:>6} {run.jobs_deferred:>8} {run.quota_units:>5}"
        f" {seconds:>6.1f}"
        + (f" {open_left:>6}" if open_left is not None else "")
        + (f"  error: {visible(run.error)}" if run.error else "")
    )


def print_status(conn: Connection) -> None:
    rows = queue_status(conn)
    header = ("type", "queued", "backlog", "scheduled", "running", "stuck", "failed", "done")
    print("{:<12} {:>6} {:>7} {:>9} {:>7} {:>5} {:>6} {:>6}".format(*header))
    for r in rows:
        print(
            f"{visible(r.type):<12} {r.queued:>6} {r.backlog:>7} {r.scheduled:>9} {r.running:>7}"
            f" {r.stuck:>5} {r.failed:>6} {r.done:>6}"
        )
    missing = missing_results(conn, grace_s=ResultSettings.from_env().grace_s)
    print(
        f"results missing: {missing.within_grace} within the grace window,"
        f" {missing.under_an_hour} under an hour, {missing.under_a_day} under a day,"
        f" {missing.older} older"
    )

"""One workload of `make bench` run alone (``python -m bench.<workload> --dsn DSN``): the
argument, the scratch database made ready, the workload measured at the full run's sizes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from fairqueue.db import Connection, connect

from . import database
from .sizes import FULL, Sizes

Run = TypeVar("Run")


def measured_alone(
    prog: str,
    description: str | None,
    measure: Callable[[Connection, str, Sizes, Callable[[str], None]], list[Run]],
    argv: Sequence[str] | None,
) -> list[Run]:
    """The runs of ``measure`` in the scratch database ``--dsn`` names (superuser), at the full
    run's sizes, its progress on stderr."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--dsn", required=True, help="a scratch database (superuser)")
    args = parser.parse_args(argv)
    database.prepare(args.dsn)
    with connect(args.dsn, autocommit=True) as admin:
        return measure(admin, args.dsn, FULL, lambda line: print(line, file=sys.stderr))

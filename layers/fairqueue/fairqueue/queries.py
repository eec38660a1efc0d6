"""Named queries, read once from the ``queries/*.sql`` files beside this module and from the
``sql/order/*.queries.sql`` files beside the order's functions.

A file holds blocks that start with ``-- name: <query_name>``. Python only ever passes
parameters to these strings; it never builds SQL from values.
"""

import re
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import LiteralString, cast

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, LiteralString]:
    """Split a named-query file into {name: sql}."""
    parts = _NAME.split(text)
    named: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in named:
            raise ValueError(f"query {name!r} is defined twice")
        # The text comes from files shipped with the package, never from input.
        named[name] = cast(LiteralString, body.strip())
    return named


def _files() -> list[Traversable]:
    package = resources.files("fairqueue")
    found = [e for e in package.joinpath("queries").iterdir() if e.name.endswith(".sql")]
    found += [
        e for e in package.joinpath("sql", "order").iterdir() if e.name.endswith(".queries.sql")
    ]
    return sorted(found, key=lambda e: e.name)


@cache
def _all() -> dict[str, LiteralString]:
    named: dict[str, LiteralString] = {}
    for entry in _files():
        for name, sql in parse(entry.read_text(encoding="utf-8")).items():
            if name in named:
                raise ValueError(f"query {name!r} is defined in two files")
            named[name] = sql
    return named


def query(name: str) -> LiteralString:
    """The SQL of one named query."""
    try:
        return _all()[name]
    except KeyError:
        raise KeyError(
            f"no query named {name!r} in fairqueue/queries/*.sql or sql/order/*.queries.sql"
        ) from None

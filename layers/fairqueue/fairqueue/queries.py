"""Named queries, read once from the ``queries/*.sql`` files beside this module.

A file holds blocks that start with ``-- name: <query_name>``. Python only ever passes
parameters to these strings; it never builds SQL from values.
"""

import re
from functools import cache
from importlib import resources
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


@cache
def _all() -> dict[str, LiteralString]:
    named: dict[str, LiteralString] = {}
    folder = resources.files("fairqueue") / "queries"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
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
        raise KeyError(f"no query named {name!r} in fairqueue/queries/*.sql") from None

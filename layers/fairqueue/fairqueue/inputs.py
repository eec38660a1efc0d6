"""What fairqueue accepts from a caller, checked before anything is written.

Every limit here is documented (docs/guide/writing-stages.md, "What enqueue refuses"), and a
value past one is an ``InvalidPayload`` that names the field; nothing a caller passes reaches
the driver as an error of the driver's own. The limits are what the columns hold
(``max_attempts`` is an integer, labels are btree keys, a time must fit a timestamptz) with room
for sense: a job that may take a thousand attempts, or starts in ten years, is a mistake more
often than a plan.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any, Final

from .errors import InvalidPayload

MAX_DEPTH: Final = 64
"""The deepest a JSON document may nest: objects and arrays inside one another."""

MAX_LABEL_CHARS: Final = 200
"""The longest a tenant id, group id, dedupe key or lane may be, in characters."""

MAX_ATTEMPTS: Final = 1000
"""The most attempts a job may be given."""

MAX_DELAY: Final = timedelta(days=3650)
"""The furthest ahead (or back) a ``run_after`` offset may reach."""

MAX_BATCH: Final = 1000
"""The most jobs one claim may take (the claim's door refuses more)."""

MAX_QUANTUM: Final = 1000
# The largest cost a job may carry (enqueue's cost=): a day's served count, a bigint, then cannot
# overflow however many jobs a group runs. The SQL doors check the same (door_costs).
MAX_COST: Final = 1_000_000_000
"""The largest quantum a stage may give its groups (the claim's door refuses more)."""

MAX_ENQUEUE_MANY: Final = 10_000
"""The most jobs one ``enqueue_many`` call may insert."""

MAX_ENQUEUE_MANY_BYTES: Final = 64 * 1024 * 1024
"""The most payload bytes (compact JSON, UTF-8) one ``enqueue_many`` call may send: one
statement's arrays, kept far below what one Postgres message may hold (1 GiB)."""

MAX_LEASE_S: Final = 86_400.0
"""The longest a claim may lease its jobs, in seconds (the claim's door refuses more)."""


def text_problem(text: str) -> str | None:
    """Why a string cannot be stored (a NUL, or a lone surrogate), or None."""
    if "\x00" in text:
        return "holds a NUL character (\\u0000), which Postgres cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate)"
    return None


def check_label(what: str, value: object, *, required: bool = False) -> str | None:
    """A tenant id, group id, dedupe key or lane: a non-empty string within the limit, or None
    where the label may be absent (not ``required``)."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        allowed = "a non-empty string" if required else "a non-empty string or None"
        raise InvalidPayload(f"{what} must be {allowed}")
    if len(value) > MAX_LABEL_CHARS:
        raise InvalidPayload(
            f"{what} is {len(value)} characters, over the limit of {MAX_LABEL_CHARS}"
        )
    problem = text_problem(value)
    if problem is not None:
        raise InvalidPayload(f"{what} {problem}")
    return value


def check_attempts(what: str, value: object) -> int:
    """A ``max_attempts``: a whole number from 1 to MAX_ATTEMPTS."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPTS:
        raise InvalidPayload(
            f"{what} must be a whole number from 1 to {MAX_ATTEMPTS}, got {value!r}"
        )
    return value


def check_cost(what: str, value: object) -> int:
    """A job's ``cost``: a whole number of units from 1 to MAX_COST."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COST:
        raise InvalidPayload(f"{what} must be a whole number from 1 to {MAX_COST}, got {value!r}")
    return value


def check_delay(what: str, value: timedelta) -> float:
    """A ``run_after`` offset in seconds, within MAX_DELAY either way."""
    if abs(value) > MAX_DELAY:
        raise InvalidPayload(f"{what} may reach at most {MAX_DELAY.days} days, got {value}")
    return value.total_seconds()


def storable_json(document: Any, what: str) -> str:
    """``document`` as the compact UTF-8 JSON a jsonb column stores, or InvalidPayload naming
    the place in it that cannot be stored: a key that is not a string, a NUL, invalid Unicode,
    a number JSON has no spelling for, a value JSON has no type for, or nesting past MAX_DEPTH.
    """
    encoded = json_if_storable(document)
    if encoded is not None:
        return encoded
    # Only a document that fails a check is walked value by value, to name the place: the walk
    # costs more than the encoding of a small payload. A walk that finds nothing means the
    # output only looked wrong (a string that spells a backslash and u0000).
    _refuse_unstorable(document, what)
    try:
        return _STRICT.encode(document)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidPayload(f"{what} cannot be written as JSON: {exc}") from exc


def json_if_storable(document: Any) -> str | None:
    """``document`` as compact UTF-8 JSON when a jsonb column can store it as it is; None when
    it cannot, without saying why (``storable_json`` names the place)."""
    # The encoder refuses what JSON cannot spell; what it would let through (a key it would
    # turn into a string, a NUL, a lone surrogate, deep nesting) is looked for in its output
    # and in the containers alone.
    try:
        encoded = _STRICT.encode(document)
    except (TypeError, ValueError, RecursionError):
        return None
    if "\\u0000" in encoded or not _text_is_valid(encoded) or not _containers_fit(document):
        return None
    return encoded


def _text_is_valid(encoded: str) -> bool:
    """Whether JSON text is valid Unicode: a lone surrogate passes the encoder, not UTF-8."""
    if encoded.isascii():
        return True
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _containers_fit(document: Any) -> bool:
    """Whether every object's keys are strings and nothing nests past MAX_DEPTH."""
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return False
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return False
                if isinstance(item, dict | list | tuple):
                    stack.append((item, depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend(
                (item, depth + 1) for item in value if isinstance(item, dict | list | tuple)
            )
    return True


def _refuse_unstorable(document: Any, what: str) -> None:
    """Raise InvalidPayload naming the first place in the document that cannot be stored;
    return when there is none."""
    # An explicit stack: a document nested deeper than Python's recursion limit is refused,
    # not a RecursionError.
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(document, 0, ())]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:
                raise InvalidPayload(f"{what}: {_place(path)} {problem}")
        elif isinstance(value, dict | list | tuple):
            if depth >= MAX_DEPTH:
                raise InvalidPayload(f"{what} nests deeper than {MAX_DEPTH} levels")
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InvalidPayload(
                            f"{what}: {_place(path)} has the key {key!r}, which is not a "
                            "string (JSON object keys are strings)"
                        )
                    problem = text_problem(key)
                    if problem is not None:
                        raise InvalidPayload(f"{what}: a key of {_place(path)} {problem}")
                    stack.append((item, depth + 1, (*path, key)))
            else:
                stack.extend((item, depth + 1, (*path, i)) for i, item in enumerate(value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidPayload(
                    f"{what}: {_place(path)} is {value}, which is not JSON-serializable"
                )
        elif value is not None and not isinstance(value, bool | int):
            raise InvalidPayload(
                f"{what}: {_place(path)} is a {type(value).__name__}, "
                "which is not JSON-serializable"
            )


# Made once: json.dumps with options builds an encoder on every call. It refuses NaN and the
# infinities, and a circular document, instead of writing what JSON has no spelling for.
_STRICT: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _place(path: tuple[str | int, ...]) -> str:
    """Where in a document a value is, as ``the value at items[2].name``."""
    if not path:
        return "the document"
    spelled = ""
    for part in path:
        spelled += f"[{part}]" if isinstance(part, int) else (f".{part}" if spelled else part)
    return f"the value at {spelled}"


def integral_numbers(encoded: str) -> str:
    """JSON text with every number that has no fractional part written as an integer (``2.0``
    as ``2``), as JSON Schema counts it: a model checking JSON strictly then takes for an
    integer what the published schema calls one."""
    return json.dumps(
        json.loads(encoded, parse_float=_json_number), separators=(",", ":"), ensure_ascii=False
    )


def _json_number(literal: str) -> float | int:
    value = float(literal)
    return int(value) if value.is_integer() else value

"""Declared options: a dataclass's field annotations state what each option accepts.

A field is annotated with its type and, for numbers and text, its bounds
(``Annotated[int, Interval(ge=1, le=1000)]``); ``check_options`` checks an instance's values
against those annotations with pydantic, strictly (``True`` is not a batch size, ``"5"`` is
not a number), and turns every violation into one
:class:`~fairqueue.errors.ConfigurationError` that names each bad option and its owner. The
dataclass itself stays a plain dataclass: its constructor, defaults and attributes are what
the fields say, and nothing is coerced. A field annotated with ``SkipValidation`` is not
checked (a protocol, which cannot be checked at run time).
"""

from __future__ import annotations

import dataclasses
import threading
import typing
from typing import Annotated, Any, get_args, get_origin

import annotated_types
from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from .errors import ConfigurationError

_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)


class _Option(typing.NamedTuple):
    name: str
    adapter: TypeAdapter[Any]
    bounds: dict[str, Any]


_checked: dict[type, tuple[_Option, ...]] = {}
_checked_lock = threading.Lock()


def _options(cls: type) -> tuple[_Option, ...]:
    """Each field's check, built once per class (the first instance pays for it)."""
    with _checked_lock:
        if cls not in _checked:
            hints = typing.get_type_hints(cls, include_extras=True)
            _checked[cls] = tuple(
                _Option(f.name, TypeAdapter(hints[f.name], config=_STRICT), _bounds(hints[f.name]))
                for f in dataclasses.fields(cls)
                if f.init
            )
        return _checked[cls]


def _bounds(hint: Any) -> dict[str, Any]:
    """The numeric bounds an annotation states, as ``{"ge": 1, "le": 1000}``."""
    found: dict[str, Any] = {}
    if get_origin(hint) is not Annotated:
        # An optional bounded number: Annotated[float, Gt(0)] | None.
        for member in get_args(hint):
            found.update(_bounds(member))
        return found
    for meta in get_args(hint)[1:]:
        parts = list(meta) if isinstance(meta, annotated_types.GroupedMetadata) else [meta]
        for part in parts:
            for key in ("gt", "ge", "lt", "le"):
                value = getattr(part, key, None)
                if value is not None:
                    found[key] = value
    return found


def check_options(instance: Any, owner: str) -> None:
    """Check every option of a dataclass instance; ConfigurationError names each bad one."""
    problems = []
    for option in _options(type(instance)):
        value = getattr(instance, option.name)
        try:
            option.adapter.validate_python(value)
        except ValidationError as exc:
            problems.append(_describe(option, value, exc.errors()[0]))
    if problems:
        raise ConfigurationError(f"{owner}: " + "; ".join(problems))


def _describe(option: _Option, value: Any, error: ErrorDetails) -> str:
    kind = error["type"]
    context = error.get("ctx") or {}
    if option.bounds and kind in (
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
    ):
        wanted = _range(option.bounds)
    elif kind in ("int_type", "int_parsing", "int_from_float"):
        wanted = "a whole number"
    elif kind in ("float_type", "float_parsing", "finite_number"):
        wanted = "a number"
    elif kind == "literal_error":
        wanted = str(context.get("expected"))
    elif kind == "callable_type":
        wanted = "callable or None" if _optional(option) else "callable"
    elif kind == "is_subclass_of":
        wanted = f"a subclass of {context.get('class')} or None"
    elif kind in ("string_type", "string_pattern_mismatch", "string_too_short"):
        wanted = "a non-empty string"
    else:
        wanted = error["msg"].removeprefix("Input should be ")
    return f"{option.name} must be {wanted}, got {value!r}"


def _optional(option: _Option) -> bool:
    try:
        option.adapter.validate_python(None)
    except ValidationError:
        return False
    return True


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _range(bounds: dict[str, Any]) -> str:
    """The bounds as a phrase: "from 1 to 1000", "over 0 and at most 86400", "positive"."""
    if "ge" in bounds and "le" in bounds:
        return f"from {_number(bounds['ge'])} to {_number(bounds['le'])}"
    low = ""
    if "gt" in bounds:
        low = "positive" if bounds["gt"] == 0 else f"over {_number(bounds['gt'])}"
    elif "ge" in bounds:
        low = f"at least {_number(bounds['ge'])}"
    high = ""
    if "le" in bounds:
        high = f"at most {_number(bounds['le'])}"
    elif "lt" in bounds:
        high = f"under {_number(bounds['lt'])}"
    if low == "positive" and high:
        low = "over 0"
    return " and ".join(part for part in (low, high) if part)

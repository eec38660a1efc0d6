"""Pydantic's validation errors as the one-line messages fairqueue's own errors carry: each
problem named by where it is, what was wrong and what was given, without the library's links
to its documentation, its error codes or its multi-line layout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import ValidationError
from pydantic_core import ErrorDetails

# How much of a refused value a message repeats.
SHOWN_CHARS: Final = 80


def problems(errors: ValidationError | Sequence[ErrorDetails]) -> str:
    """Every problem of a validation, as one line: ``where: what was wrong, got what``."""
    found = errors.errors(include_url=False) if isinstance(errors, ValidationError) else errors
    return "; ".join(problem(error) for error in found)


def problem(error: ErrorDetails, where: str | None = None) -> str:
    """One problem as a phrase that names its place: ``where`` when the caller names it (an
    API names a field without the ``body`` pydantic puts first), else the error's location
    (``payload.pages``), else ``the value``."""
    where = where or ".".join(str(part) for part in error["loc"]) or "the value"
    if error["type"] == "missing":
        return f"{where} is missing"
    why = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if error["type"] in ("json_invalid", "model_type", "dict_type", "model_attributes_type"):
        return f"{where}: {why}"
    return f"{where}: {why}, got {shown_value(error.get('input'))}"


def shown_value(value: object) -> str:
    """A refused value as a message repeats it: an empty text said in words (not ``''``), an
    object or a list by its kind, anything long cut short."""
    if value == "":
        return "an empty value"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."

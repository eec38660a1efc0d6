"""A request as the dashboard's pages and actions read it."""

from __future__ import annotations

from dataclasses import dataclass

from .sessions import Session


@dataclass
class Request:
    """What a page and an action read of a request."""

    method: str
    path: str
    base: str
    query: dict[str, str]
    form: dict[str, str]
    secure: bool
    session: Session | None = None
    form_token: str = ""

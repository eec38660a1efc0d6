"""The dashboard as a WSGI application: the login, the pages (fairqueue.dashboard.pages) and the
operators' actions, each a POST that carries the session's form token.

Nothing but the login page and the static files answers without a session. Labels reach the
HTML only through templates that escape them; tenant ids travel in form bodies, never in a URL,
and the log line of a request names its method, path and status alone.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from importlib import resources
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs

from jinja2 import Environment, PackageLoader, StrictUndefined

from ..db import Connection
from ..errors import (
    DatabaseUnavailable,
    FairqueueError,
    UnknownGroup,
    UnknownJob,
)
from ..stage import Stage
from . import pages
from .request import Request
from .sessions import COOKIE_NAME, Sessions

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger("fairqueue.dashboard")

# The largest form a page posts: a few labels and a token.
MAX_FORM_BYTES: Final = 16 * 1024
STATIC_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
}
# Every answer: nothing from another origin runs or frames a page, no page is cached or names
# where it came from.
SECURITY_HEADERS: Final = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
]
_STATIC_NAME = re.compile(r"[a-z0-9.-]+\.(js|css|md)")

Connections = Callable[[], AbstractContextManager[Connection]]


@dataclass
class Reply:
    """An answer: status, extra headers and body."""

    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "text/html; charset=utf-8"


class Dashboard:
    """The WSGI application; ``connections`` hands out application-role connections that
    autocommit, ``stages`` (by type) let a job's page say what only the stages know."""

    def __init__(
        self, connections: Connections, secret: str, stages: dict[str, Stage] | None = None
    ) -> None:
        self.connections = connections
        self.sessions = Sessions(secret)
        self.stages = stages
        self.templates = Environment(
            loader=PackageLoader("fairqueue.dashboard", "templates"),
            autoescape=True,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        try:
            reply = self.answer(environ)
        except Exception as exc:
            # What broke is logged by its kind alone: its text may hold a tenant's labels.
            log.error("the dashboard could not answer: %s", type(exc).__name__)
            reply = self._page_reply(500, "error.html", None, message="Something went wrong.")
        status = HTTPStatus(reply.status)
        headers = [
            ("Content-Type", reply.content_type),
            ("Content-Length", str(len(reply.body))),
            *SECURITY_HEADERS,
            *reply.headers,
        ]
        if not any(name == "Cache-Control" for name, _ in reply.headers):
            headers.append(("Cache-Control", "no-store"))
        start_response(f"{status.value} {status.phrase}", headers)
        log.info(
            "request",
            extra={
                "method": environ.get("REQUEST_METHOD"),
                "path": environ.get("PATH_INFO"),
                "status": reply.status,
            },
        )
        return [reply.body]

    def answer(self, environ: WSGIEnvironment) -> Reply:
        """The reply to one request."""
        request = self._request(environ)
        if request is None:
            return self._page_reply(413, "error.html", None, message="That form is too large.")
        if request.path.startswith("/static/"):
            return self._static(request.path.removeprefix("/static/"))
        if request.path == "/login":
            return self._login(request)
        if request.session is None:
            if request.method == "POST":
                return self._page_reply(401, "login.html", request, failed=False)
            return self._redirect(request, "/login")
        request.form_token = self.sessions.form_token(request.session)
        if request.method == "POST" and not self.sessions.form_token_matches(
            request.session, request.form.get("form_token")
        ):
            return self._page_reply(
                403, "error.html", request, message="The form expired: reload the page."
            )
        if request.path == "/logout" and request.method == "POST":
            reply = self._redirect(request, "/login")
            reply.headers.append(("Set-Cookie", self._cookie(request, "", max_age=0)))
            return reply
        return self._page(request)

    def _page(self, request: Request) -> Reply:
        route = pages.route_of(request.method, request.path)
        if route is None:
            return self._page_reply(404, "error.html", request, message="No such page.")
        try:
            with self.connections() as conn:
                outcome = route.handler(pages.Context(conn, request, self.stages), *route.args)
        except (UnknownJob, UnknownGroup) as exc:
            return self._page_reply(404, "error.html", request, message=str(exc))
        except DatabaseUnavailable:
            return self._page_reply(
                503, "error.html", request, message="The database cannot be reached right now."
            )
        except FairqueueError as exc:
            return self._page_reply(409, "error.html", request, message=str(exc))
        if isinstance(outcome, pages.Redirect):
            return self._redirect(request, outcome.path)
        return self._page_reply(200, outcome.template, request, **outcome.values)

    def _login(self, request: Request) -> Reply:
        if request.method == "GET":
            return self._page_reply(200, "login.html", request, failed=False)
        if request.method != "POST":
            return self._page_reply(405, "error.html", None, message="Not allowed.")
        if not self.sessions.password_matches(request.form.get("secret", "")):
            return self._page_reply(401, "login.html", request, failed=True)
        value = self.sessions.start()
        reply = self._redirect(request, "/")
        reply.headers.append(("Set-Cookie", self._cookie(request, value, self.sessions.ttl_s)))
        return reply

    def _cookie(self, request: Request, value: str, max_age: int) -> str:
        secure = "; Secure" if request.secure else ""
        path = request.base or "/"
        return (
            f"{COOKIE_NAME}={value}; Path={path}; Max-Age={max_age}; HttpOnly;"
            f" SameSite=Strict{secure}"
        )

    def _static(self, name: str) -> Reply:
        found = _STATIC_NAME.fullmatch(name)
        entry = resources.files("fairqueue.dashboard").joinpath("static", name)
        if found is None or not entry.is_file():
            return Reply(404, b"not found", content_type="text/plain; charset=utf-8")
        body = entry.read_bytes()
        suffix = "." + found[1]
        return Reply(
            200, body, [("Cache-Control", "max-age=3600")], content_type=STATIC_TYPES[suffix]
        )

    def _redirect(self, request: Request, path: str) -> Reply:
        return Reply(303, b"", [("Location", request.base + path)])

    def _page_reply(
        self, status: int, template: str, request: Request | None, **values: Any
    ) -> Reply:
        values.setdefault("note", None)
        body = self.templates.get_template(template).render(
            base="" if request is None else request.base,
            form_token="" if request is None else request.form_token,
            signed_in=request is not None and request.session is not None,
            path="" if request is None else request.path,
            **values,
        )
        return Reply(status, body.encode())

    def _request(self, environ: WSGIEnvironment) -> Request | None:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        form: dict[str, str] = {}
        if method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length > MAX_FORM_BYTES:
                return None
            raw = environ["wsgi.input"].read(length) if length > 0 else b""
            form = _single_values(raw.decode("utf-8", errors="replace"))
        forwarded = str(environ.get("HTTP_X_FORWARDED_PROTO", ""))
        request = Request(
            method=method,
            path=str(environ.get("PATH_INFO") or "/"),
            base=str(environ.get("SCRIPT_NAME", "")).rstrip("/"),
            query=_single_values(str(environ.get("QUERY_STRING", ""))),
            form=form,
            secure=environ.get("wsgi.url_scheme") == "https" or forwarded == "https",
        )
        request.session = self.sessions.session_of(_cookie_value(environ))
        return request


def _single_values(text: str) -> dict[str, str]:
    """A form or query string as one value per name (the last of a repeated one)."""
    return {name: values[-1] for name, values in parse_qs(text, keep_blank_values=True).items()}


def _cookie_value(environ: WSGIEnvironment) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(str(environ.get("HTTP_COOKIE", "")))
    except CookieError:
        return None
    morsel = jar.get(COOKIE_NAME)
    return None if morsel is None else morsel.value

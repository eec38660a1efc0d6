"""The dashboard behind API Gateway (HTTP API, payload format 2.0): an event as the WSGI
environment the application reads, and its answer as the response the gateway expects."""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any

from .app import Dashboard

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment


def environ_of(event: dict[str, Any]) -> WSGIEnvironment:
    """What a WSGI server would hand the application for this request."""
    http = (event.get("requestContext") or {}).get("http") or {}
    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    environ: dict[str, Any] = {
        "REQUEST_METHOD": str(http.get("method", "GET")).upper(),
        "SCRIPT_NAME": "",
        "PATH_INFO": event.get("rawPath") or "/",
        "QUERY_STRING": event.get("rawQueryString") or "",
        "CONTENT_LENGTH": str(len(raw)),
        "CONTENT_TYPE": headers.get("content-type", ""),
        "HTTP_COOKIE": "; ".join(event.get("cookies") or []),
        "wsgi.input": io.BytesIO(raw),
        # API Gateway answers over HTTPS only: the session cookie is Secure.
        "wsgi.url_scheme": "https",
    }
    return environ


def answer(app: Dashboard, event: dict[str, Any]) -> dict[str, Any]:
    """The gateway's response to one event: status, headers, cookies apart, the body."""
    answered: list[Any] = []

    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answered[:] = [status, headers]
        return lambda data: None

    body = b"".join(app(environ_of(event), start))
    status, headers = answered
    cookies = [value for name, value in headers if name == "Set-Cookie"]
    text_like = any(
        name == "Content-Type" and value.startswith(("text/", "application/json"))
        for name, value in headers
    )
    return {
        "statusCode": int(status[:3]),
        "headers": {name: value for name, value in headers if name != "Set-Cookie"},
        "cookies": cookies,
        "body": body.decode() if text_like else base64.b64encode(body).decode(),
        "isBase64Encoded": not text_like,
    }

"""A WSGI request as an API Gateway HTTP API (payload 2.0) event, and the resolver's answer as
a WSGI response: what lets the Lambda's resolver answer behind a standard WSGI server.

:func:`wsgi_app` plays API Gateway's part on this machine: it reads the body (refusing one
declared over the limit before reading it), asks ``authorize`` for the caller's verified
claims as the JWT authorizer would (a route without the authorizer gets None), builds the
event and hands it to the resolver. Nothing a request does reaches the client as a Python
error: whatever fails is the documented JSON error.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from .models import ApiError, Reply, error_reply
from .resolver import max_body_bytes

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from .resolver import ApiResolver

log = logging.getLogger("fairqueue.api")

# The caller's verified claims, from its path and Authorization header; None for a public
# route; raises ApiError (401) for a caller the authorizer refuses.
Authorize = Callable[[str, str | None], Mapping[str, Any] | None]


def http_api_event(
    method: str,
    path: str,
    query_string: str,
    headers: Mapping[str, str],
    body: bytes,
    claims: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The event API Gateway would send for this request: lower-case header names, a
    repeated query parameter's values joined with commas, the body base64-encoded."""
    now = datetime.now(UTC)
    host = headers.get("host", "localhost")
    context: dict[str, Any] = {
        "accountId": "local",
        "apiId": "local",
        "domainName": host,
        "domainPrefix": host.split(".")[0],
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": headers.get("x-forwarded-for", "127.0.0.1"),
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": str(uuid.uuid4()),
        "routeKey": "$default",
        "stage": "$default",
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }
    if claims is not None:
        context["authorizer"] = {"jwt": {"claims": dict(claims), "scopes": None}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query_string,
        "headers": dict(headers),
        "requestContext": context,
        "isBase64Encoded": True,
        "body": base64.b64encode(body).decode("ascii"),
    }
    parsed = parse_qs(query_string, keep_blank_values=True)
    if parsed:
        event["queryStringParameters"] = {k: ",".join(v) for k, v in parsed.items()}
    return event


def reply_of(answer: Mapping[str, Any]) -> Reply:
    """A resolver's answer as status, JSON body and headers."""
    raw = answer.get("body") or ""
    data = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode()
    headers = {k: v for k, v in (answer.get("headers") or {}).items() if k != "Content-Type"}
    return Reply(int(answer["statusCode"]), json.loads(data) if data else {}, headers)


def wsgi_app(resolver: ApiResolver, authorize: Authorize) -> WSGIApplication:
    """The resolver as a WSGI application, behind ``authorize``."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        try:
            body = _body(environ)
            path = _text(environ.get("PATH_INFO") or "/")
            headers = _headers(environ)
            claims = authorize(path, headers.get("authorization"))
            event = http_api_event(
                method, path, _text(environ.get("QUERY_STRING", "")), headers, body, claims
            )
            reply = reply_of(resolver.resolve(event, None))
        except ApiError as exc:
            reply = exc.reply()
        except Exception:
            log.exception("%s %s failed", method, environ.get("PATH_INFO"))
            reply = error_reply(500, "internal_error", "the request failed on the server's side")
        data = json.dumps(reply.body, separators=(",", ":")).encode()
        status = HTTPStatus(reply.status)
        start_response(
            f"{status.value} {status.phrase}",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(data))),
                *reply.headers.items(),
            ],
        )
        return [] if method == "HEAD" else [data]

    return app


def _body(environ: WSGIEnvironment) -> bytes:
    """The body, refused before it is read when its declared length is over the limit."""
    raw_length = environ.get("CONTENT_LENGTH") or "0"
    try:
        length = int(raw_length)
    except ValueError:
        length = -1
    if length < 0:
        raise ApiError(400, "invalid_body", f"Content-Length is not a length: {raw_length!r}")
    limit = max_body_bytes()
    if length > limit:
        raise ApiError(
            413, "payload_too_large", f"the body is {length} bytes, over the limit of {limit}"
        )
    if not length:
        return b""
    try:
        data: bytes = environ["wsgi.input"].read(length)
    except OSError as exc:  # the client went silent (the server's timeout) or away
        raise ApiError(400, "invalid_body", f"the body could not be read: {exc}") from None
    return data


def _headers(environ: WSGIEnvironment) -> dict[str, str]:
    headers = {
        name[5:].replace("_", "-").lower(): _text(value)
        for name, value in environ.items()
        if name.startswith("HTTP_")
    }
    for name in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(name):
            headers[name.replace("_", "-").lower()] = _text(environ[name])
    return headers


def _text(value: Any) -> str:
    """A WSGI string (bytes read as Latin-1) as the text its UTF-8 bytes spell."""
    return str(value).encode("latin-1", "replace").decode("utf-8", "replace")

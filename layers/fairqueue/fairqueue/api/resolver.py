"""Powertools' ``APIGatewayHttpResolver``, made safe to share between threads, reading bodies
by fairqueue's rules.

Powertools keeps the request being resolved on the resolver (``current_event`` is even a class
attribute of its base): one Lambda invocation at a time, never two. The local server answers
requests in threads with one resolver, so here that state lives in a ``threading.local``: each
thread resolves its own request and sees only its own event, context and claims.

A JSON body is read once, by :func:`json_object`: within the size limit, UTF-8 (or -16, -32),
no ``NaN`` or infinity, not nested past what the parser can take, and an object; each refusal
is an ``ApiError`` with its documented code, raised where Powertools reads the body.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Final

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from ..jobs import max_payload_bytes
from .models import ApiError

# What a body may carry besides its payload (type, ids, keys, JSON punctuation).
BODY_ENVELOPE_BYTES: Final = 16 * 1024


def max_body_bytes() -> int:
    return max_payload_bytes() + BODY_ENVELOPE_BYTES


def json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, within the size limit; 400 or 413 naming what is wrong."""
    limit = max_body_bytes()
    if len(body) > limit:
        raise ApiError(
            413, "payload_too_large", f"the body is {len(body)} bytes, over the limit of {limit}"
        )
    if not body.strip():
        raise ApiError(400, "malformed_json", "the body is empty; send a JSON object")
    try:
        document = json.loads(body, parse_constant=_refuse_constant)
    except ValueError as exc:  # also a body that is not UTF-8, -16 or -32
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "malformed_json", "the body is nested too deeply") from None
    if not isinstance(document, dict):
        raise ApiError(
            400, "invalid_body", f"the body must be a JSON object, got {_json_type(document)}"
        )
    return document


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


class ApiEvent(APIGatewayProxyEventV2):
    """An HTTP API (payload 2.0) event whose JSON body is read by :func:`json_object`.

    A body that cannot be read is not refused at once: the resolver validates the path first,
    so a bad job id is ``invalid_id`` whatever the body; the refusal waits in
    ``body_refusal`` for the validation error a missing body then is.
    """

    body_refusal: ApiError | None = None

    @cached_property
    def raw_body(self) -> bytes:
        """The body's bytes as the client sent them (API Gateway base64-encodes binary ones)."""
        body = self.body or ""
        if not self.is_base64_encoded:
            # An event read from JSON may hold a lone surrogate: it is not UTF-8, and the JSON
            # parser says so, as it would of the client's own bytes.
            return body.encode("utf-8", "surrogatepass")
        try:
            return base64.b64decode(body, validate=True)
        except binascii.Error:
            raise ApiError(400, "malformed_json", "the body is not valid base64") from None

    @cached_property
    def json_body(self) -> Any:
        try:
            return json_object(self.raw_body)
        except ApiError as exc:
            self.body_refusal = exc
            return None


class _RequestState(threading.local):
    """What Powertools keeps of the request being resolved, one copy per thread."""

    def __init__(self) -> None:
        self.event: BaseProxyEvent | None = None
        self.lambda_context: Any = None
        self.context: dict[str, Any] = {}
        self.frames: list[str] = []


class ApiResolver(APIGatewayHttpResolver):
    """``APIGatewayHttpResolver(enable_validation=True)`` with its request state per thread."""

    def __init__(self) -> None:
        # Before the base's __init__, which assigns the properties below.
        self._request = _RequestState()
        self._stack_lock = threading.Lock()
        super().__init__(
            # Never Powertools' debug mode (POWERTOOLS_DEV): it prints events, claims and
            # bodies included, and answers a fault with its traceback.
            debug=False,
            enable_validation=True,
            # An answer that does not fit its own model is the server's fault: 500, not 422.
            response_validation_error_http_code=500,
        )

    @property
    def current_event(self) -> APIGatewayProxyEventV2:
        event = self._request.event
        if not isinstance(event, APIGatewayProxyEventV2):
            raise RuntimeError("no request is being resolved on this thread")
        return event

    @current_event.setter
    def current_event(self, value: BaseProxyEvent) -> None:
        self._request.event = value

    @property
    def lambda_context(self) -> Any:
        return self._request.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        return self._request.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context = value

    @property
    def processed_stack_frames(self) -> list[str]:
        return self._request.frames

    @processed_stack_frames.setter
    def processed_stack_frames(self, value: list[str]) -> None:
        self._request.frames = value

    def resolve(self, event: Mapping[str, Any], context: LambdaContext | Any) -> dict[str, Any]:
        """The base's ``resolve``, with the request kept on this thread instead of the class."""
        state = self._request
        state.event = self._to_proxy_event(dict(event))
        state.lambda_context = context
        try:
            return self._build_response(self._resolve())
        finally:
            state.event, state.lambda_context, state.context = None, None, {}

    def _to_proxy_event(self, event: dict[str, Any]) -> BaseProxyEvent:
        # Every body is read as JSON, whatever its Content-Type says, as the API always has
        # (`curl -d` labels JSON a form): Powertools would parse a form or a multipart body
        # by rules of its own.
        headers = event.get("headers") or {}
        kept = {name: value for name, value in headers.items() if name.lower() != "content-type"}
        return ApiEvent({**event, "headers": kept})

    def _call_route(self, route: Route, route_arguments: dict[str, str]) -> ResponseBuilder[Any]:
        # A route builds its middleware stack on its first call; two threads doing it at once
        # would wrap it twice.
        if not route._middleware_stack_built:
            with self._stack_lock:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(self._router_middlewares, self)
        return super()._call_route(route, route_arguments)

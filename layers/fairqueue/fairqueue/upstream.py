"""Held upstream work: a service with its own state machine, started only when a lane says so.

An admitted stage may name an ``Upstream``. ``create(held=True)`` runs at admission, under the
lane's lock: the service validates everything and starts nothing, so its errors are admission
errors. ``release`` starts the work once the job holds its lane. Release must be idempotent:
the same id may be released again after a crash between the call and its record.

Adapters: ``HttpUpstream`` (the service speaks the small JSON protocol below);
``fairqueue.dev.upstream.DatabaseUpstream``, a development stand-in whose held work is kept in
the database, so every process on it shares it; and ``InProcessUpstream``, held work in one
process's memory, for tests. ``FAIRQUEUE_ENV=production`` refuses both stand-ins.

HTTP protocol, relative to the base URL:

- ``POST work`` with ``{"key", "type", "payload", "held"}`` answers 200 or 201 with
  ``{"id": "..."}``; 400 or 422 mean the work is invalid (the body's ``error`` or ``message``
  says why); anything else, or no answer, means the service is unavailable.
- ``POST work/{id}/release`` answers 2xx, or 409 when the work was already released.
"""

from __future__ import annotations

import json
import random
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from .errors import ConfigurationError, UpstreamRejected, UpstreamUnavailable
from .settings import settings, settings_of


class Upstream(Protocol):
    @property
    def name(self) -> str: ...

    def create(self, job_type: str, payload: dict[str, Any], *, key: str, held: bool = True) -> str:
        """Validate the work and record it (held: not started); its id upstream.

        ``key`` is the job's id, so a retried create can be recognised upstream. Raises
        UpstreamRejected for invalid work, UpstreamUnavailable when the service cannot answer.
        """
        ...

    def release(self, upstream_id: str) -> None:
        """Start held work; a second release of the same id is not an error.

        Raises UpstreamUnavailable when the service cannot answer.
        """
        ...


def release_delay(tries: int, *, base_s: float, cap_s: float) -> float:
    """Seconds before the next release try: exponential in ``tries`` up to ``cap_s``, then a
    random point in the upper half of that, so lanes failing together do not retry together."""
    ceiling: float = min(cap_s, base_s * 2.0 ** min(max(tries - 1, 0), 32))
    return ceiling * random.uniform(0.5, 1.0)  # noqa: S311 - spreading retries, not secrets


class HttpUpstream:
    """An upstream service reached over HTTP (protocol in the module's docstring)."""

    def __init__(self, base_url: str, *, timeout_s: float = 5.0, token: str | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"an upstream URL must start with http:// or https://, got {base_url!r}"
            )
        if timeout_s <= 0:
            raise ConfigurationError(f"the upstream timeout must be positive, got {timeout_s}")
        self.base_url = base_url.rstrip("/") + "/"
        self.timeout_s = timeout_s
        self.token = token

    @property
    def name(self) -> str:
        return f"http upstream {self.base_url}"

    def create(self, job_type: str, payload: dict[str, Any], *, key: str, held: bool = True) -> str:
        status, body = self._post(
            "work", {"key": key, "type": job_type, "payload": payload, "held": held}
        )
        if status in (400, 422):
            raise UpstreamRejected(f"{self.name} refused the work: {_reason(body, status)}")
        if status not in (200, 201):
            raise UpstreamUnavailable(f"{self.name} answered {status}: {_reason(body, status)}")
        upstream_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(upstream_id, str) or not upstream_id:
            raise UpstreamUnavailable(f"{self.name} answered {status} without an id")
        return upstream_id

    def release(self, upstream_id: str) -> None:
        status, body = self._post(f"work/{quote(upstream_id, safe='')}/release", {})
        if not (200 <= status < 300 or status == 409):
            raise UpstreamUnavailable(
                f"{self.name} did not release {upstream_id}: {status} {_reason(body, status)}"
            )

    def _post(self, path: str, document: dict[str, Any]) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # The scheme is checked in __init__: http or https only.
        request = urllib.request.Request(  # noqa: S310
            self.base_url + path,
            data=json.dumps(document).encode(),
            headers=headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                return response.status, _json_or_none(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json_or_none(exc.read())
        except (OSError, ValueError) as exc:
            # URLError, refused connections and timeouts are all OSErrors.
            raise UpstreamUnavailable(f"{self.name} cannot be reached: {exc}") from exc


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _reason(body: Any, status: int) -> str:
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            if isinstance(body.get(key), str):
                return str(body[key])
    return f"HTTP {status}"


Validator = Callable[[str, dict[str, Any]], None]


@dataclass
class HeldWork:
    job_type: str
    payload: dict[str, Any]
    key: str
    released: bool = False


@dataclass
class InProcessUpstream:
    """Upstream work kept in this process's memory: for development and tests only.

    ``validate`` raises UpstreamRejected (or any ValueError, taken as a rejection) for invalid
    work. ``available = False`` makes every call fail as an unreachable service would.
    """

    validate: Validator | None = None
    available: bool = True
    work: dict[str, HeldWork] = field(default_factory=dict)
    released_order: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if settings().production:
            raise ConfigurationError(
                "InProcessUpstream is refused when FAIRQUEUE_ENV=production: its held work "
                "lives in one process's memory; use HttpUpstream"
            )

    @property
    def name(self) -> str:
        return "in-process upstream"

    def create(self, job_type: str, payload: dict[str, Any], *, key: str, held: bool = True) -> str:
        self._check_available()
        if self.validate is not None:
            try:
                self.validate(job_type, payload)
            except ValueError as exc:
                raise UpstreamRejected(f"{self.name} refused the work: {exc}") from exc
        with self._lock:
            self.work[key] = HeldWork(job_type, dict(payload), key)
        if not held:
            self.release(key)
        return key

    def release(self, upstream_id: str) -> None:
        self._check_available()
        with self._lock:
            held = self.work.get(upstream_id)
            if held is None:
                raise UpstreamUnavailable(f"{self.name} has no work {upstream_id}")
            if not held.released:
                held.released = True
                self.released_order.append(upstream_id)

    def _check_available(self) -> None:
        if not self.available:
            raise UpstreamUnavailable(f"{self.name} is unavailable")


def upstream_from_env(env: Mapping[str, str] | None = None) -> HttpUpstream:
    """The HTTP upstream that ``FAIRQUEUE_UPSTREAM_URL`` names (``FAIRQUEUE_UPSTREAM_TOKEN``
    and ``FAIRQUEUE_UPSTREAM_TIMEOUT_S`` optional)."""
    config = settings_of(env)
    if not config.upstream_url:
        raise ConfigurationError("FAIRQUEUE_UPSTREAM_URL is not set")
    token = config.upstream_token
    return HttpUpstream(
        config.upstream_url,
        timeout_s=config.upstream_timeout_s,
        token=None if token is None else token.get_secret_value(),
    )

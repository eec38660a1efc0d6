"""The dashboard's login: the operator secret (``FAIRQUEUE_DASHBOARD_SECRET``) is the password,
and a session is a signed cookie that expires; every form carries a token bound to the session,
so a page of another site cannot post one.

Nothing is stored on the server: changing the secret ends every session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ..errors import ConfigurationError
from ..settings import settings_of

SECRET_ENV: Final = "FAIRQUEUE_DASHBOARD_SECRET"  # noqa: S105 - its name, not its value
MIN_SECRET_BYTES: Final = 32
COOKIE_NAME: Final = "fairqueue_session"
SESSION_TTL_S: Final = 12 * 3600


def dashboard_secret(env: Mapping[str, str] | None = None) -> str:
    """The operator secret; refused when missing or shorter than 32 bytes."""
    given = settings_of(env).dashboard_secret
    secret = None if given is None else given.get_secret_value()
    if not secret:
        raise ConfigurationError(
            f"{SECRET_ENV} is not set: operators log in to the dashboard with it (at least"
            f" {MIN_SECRET_BYTES} bytes; `openssl rand -hex 32` makes one)"
        )
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise ConfigurationError(
            f"{SECRET_ENV} is {len(secret.encode())} bytes; it must be at least"
            f" {MIN_SECRET_BYTES} (`openssl rand -hex 32` makes one)"
        )
    return secret


@dataclass(frozen=True)
class Session:
    """A logged-in operator's session: its random id and when it ends (Unix seconds)."""

    nonce: str
    expires_at: int


class Sessions:
    """Signs and checks session cookies and form tokens with keys derived from the secret."""

    def __init__(self, secret: str, ttl_s: int = SESSION_TTL_S) -> None:
        self._secret = secret.encode()
        self._session_key = self._derived(b"session")
        self._form_key = self._derived(b"form")
        self.ttl_s = ttl_s

    def _derived(self, purpose: bytes) -> bytes:
        return hmac.new(self._secret, b"fairqueue-dashboard/" + purpose, hashlib.sha256).digest()

    def password_matches(self, given: str) -> bool:
        """Whether ``given`` is the operator secret, compared in constant time."""
        return hmac.compare_digest(given.encode(), self._secret)

    def start(self) -> str:
        """A new session's cookie value."""
        session = Session(secrets.token_urlsafe(18), int(time.time()) + self.ttl_s)
        body = f"{session.expires_at}.{session.nonce}"
        return f"{body}.{self._sign(self._session_key, body)}"

    def session_of(self, cookie: str | None) -> Session | None:
        """The session a cookie value holds; None when absent, forged or expired."""
        if not cookie:
            return None
        expires, _, rest = cookie.partition(".")
        nonce, _, signature = rest.partition(".")
        if not (expires.isdigit() and nonce and signature):
            return None
        if not hmac.compare_digest(signature, self._sign(self._session_key, f"{expires}.{nonce}")):
            return None
        if int(expires) <= time.time():
            return None
        return Session(nonce, int(expires))

    def form_token(self, session: Session) -> str:
        """The token every form of this session posts back."""
        return self._sign(self._form_key, session.nonce)

    def form_token_matches(self, session: Session, given: str | None) -> bool:
        """Whether a posted token is this session's."""
        return given is not None and hmac.compare_digest(given, self.form_token(session))

    @staticmethod
    def _sign(key: bytes, text: str) -> str:
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()

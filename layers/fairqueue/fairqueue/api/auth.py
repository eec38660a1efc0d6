"""Who calls the admission API: claims verified by API Gateway's JWT authorizer, or a local
HS256 token verified here (``fairqueue serve --role api``, which plays the authorizer's part).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import jwt

from ..errors import ConfigurationError, InvalidPayload
from ..inputs import check_label
from ..settings import settings_of
from .models import ApiError, Identity

SIGNING_KEY_ENV: Final = "FAIRQUEUE_API_SECRET"
MIN_SECRET_BYTES: Final = 32
SIGNING_ALGORITHM: Final = "HS256"
DEFAULT_TOKEN_TTL_S: Final = 3600


@dataclass(frozen=True)
class ClaimNames:
    """Which claims of a token name the tenant and the lane."""

    tenant: str = "tenant_id"
    lane: str = "sub"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClaimNames:
        found = settings_of(env)
        return cls(tenant=found.tenant_claim, lane=found.lane_claim)


def identity_from_claims(claims: Mapping[str, Any], names: ClaimNames) -> Identity:
    """The caller, from a verified token's claims; 401 when one of the two is missing."""
    values: dict[str, str] = {}
    for claim in (names.tenant, names.lane):
        value = claims.get(claim)
        if not isinstance(value, str) or not value:
            raise unauthorized("missing_claim", f"the token has no {claim} claim (a string)")
        try:
            check_label(f"the token's {claim} claim", value)
        except InvalidPayload as exc:
            raise unauthorized("invalid_token", str(exc)) from None
        values[claim] = value
    return Identity(tenant_id=values[names.tenant], lane=values[names.lane])


def api_secret(env: Mapping[str, str] | None = None) -> str:
    """The local tokens' signing secret; refused when missing or shorter than 32 bytes."""
    given = settings_of(env).api_secret
    secret = None if given is None else given.get_secret_value()
    if not secret:
        raise ConfigurationError(
            f"{SIGNING_KEY_ENV} is not set: the API signs and verifies its local tokens with it "
            f"(at least {MIN_SECRET_BYTES} bytes; `openssl rand -hex 32` makes one)"
        )
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise ConfigurationError(
            f"{SIGNING_KEY_ENV} is {len(secret.encode())} bytes; it must be at least "
            f"{MIN_SECRET_BYTES} (`openssl rand -hex 32` makes one)"
        )
    return secret


def mint_token(
    secret: str,
    *,
    tenant_id: str,
    lane: str,
    ttl_s: int = DEFAULT_TOKEN_TTL_S,
    names: ClaimNames | None = None,
) -> str:
    """A token for the local API, valid ``ttl_s`` seconds."""
    if ttl_s <= 0:
        raise ConfigurationError(f"a token's lifetime must be positive, got {ttl_s} s")
    # The API refuses a token whose tenant or lane it would refuse as a label: refuse to mint one.
    check_label("the token's tenant", tenant_id, required=True)
    check_label("the token's lane", lane, required=True)
    claim = names or ClaimNames()
    now = datetime.now(UTC)
    return jwt.encode(
        {
            claim.tenant: tenant_id,
            claim.lane: lane,
            "iat": now,
            "exp": now + timedelta(seconds=ttl_s),
        },
        secret,
        algorithm=SIGNING_ALGORITHM,
    )


def verified_claims(authorization: str | None, secret: str) -> dict[str, Any]:
    """The claims of the local API's ``Authorization: Bearer`` token, once its signature,
    algorithm and ``exp`` check out; 401 otherwise."""
    if not authorization:
        raise unauthorized("missing_token", "send Authorization: Bearer <token>")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("invalid_token", "the Authorization header must be 'Bearer <token>'")
    try:
        claims: dict[str, Any] = jwt.decode(
            token.strip(), secret, algorithms=[SIGNING_ALGORITHM], options={"require": ["exp"]}
        )
    except jwt.ExpiredSignatureError:
        raise unauthorized("expired_token", "the token has expired; get a new one") from None
    except jwt.InvalidTokenError as exc:
        raise unauthorized("invalid_token", f"the token was refused: {exc}") from None
    return claims


def authenticate(authorization: str | None, secret: str, names: ClaimNames) -> Identity:
    """The caller of the local API, from its ``Authorization: Bearer`` header."""
    return identity_from_claims(verified_claims(authorization, secret), names)


def unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, {"WWW-Authenticate": f'Bearer error="{code}"'})

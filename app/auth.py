"""Authentication: the presented key -> its digest -> one indexed lookup -> the caller,
behind the abuse limits; `last_used` recorded. Every endpoint that takes a key calls
authenticate(); the keys blueprint's hook adds the managing-kind rule."""

from __future__ import annotations

from flask import Response, g, request
from sqlalchemy import bindparam, select

from app import credentials, keyformat, limits
from app.credentials import Caller
from app.errors import ApiError
from app.keys import service
from app.models import ApiKey
from app.reads import Read
from app.scopes import MANAGING_KINDS, exceeding, to_names
from app.timestamps import utcnow

CHALLENGE = ("WWW-Authenticate", 'Basic realm="api"')

# SQLAlchemy Core on the model's table, built once: the ORM's execution machinery and
# objects cost more than the lookup itself (see bench/README.md).
_KEYS = ApiKey.__table__
_BY_DIGEST = Read(
    select(
        _KEYS.c.id,
        _KEYS.c.organization_id,
        _KEYS.c.identifier,
        _KEYS.c.kind,
        _KEYS.c.scope_bits,
        _KEYS.c.last_used,
        _KEYS.c.expires_at,
    ).where(_KEYS.c.digest == bindparam("digest"))
)


# How a key may be presented, as a 401 says it.
WAYS = {
    credentials.BASIC: "as the user name of HTTP Basic authentication",
    credentials.BEARER: "as a Bearer token",
}


def unauthorized(
    challenge: tuple[str, str] = CHALLENGE,
    schemes: tuple[str, ...] = (credentials.BASIC, credentials.BEARER),
) -> ApiError:
    ways = " or ".join(WAYS[scheme] for scheme in schemes)
    return ApiError(
        401, "unauthorized", f"A valid API key is required, {ways}.", headers=[challenge]
    )


def expired(challenge: tuple[str, str] = CHALLENGE) -> ApiError:
    """The holder already has the key, so saying why leaks nothing."""
    return ApiError(
        401,
        "expired_key",
        "This API key has expired: it authenticates nothing any more.",
        headers=[challenge],
    )


def found(key: str) -> tuple[Caller | None, bool]:
    """(the live key with this full value, its use recorded; whether it has expired):
    what authenticates now, for a request's own key and for a key another service checks
    (introspection)."""
    row = _BY_DIGEST.first({"digest": keyformat.digest(key)})
    if row is None:
        return None, False
    *found, last_used, expires_at = row
    if expires_at is not None and expires_at <= utcnow():
        return None, True
    caller = Caller(*found)
    service.record_use(caller.identifier, last_used)
    return caller, False


def authenticate(
    rate: str = limits.PER_KEY,
    challenge: tuple[str, str] = CHALLENGE,
    schemes: tuple[str, ...] = (credentials.BASIC, credentials.BEARER),
) -> Caller:
    """The key this request's Authorization presents in one of `schemes`: 429 past the
    abuse limits (`rate` per key), 401 (with `challenge`) when there is no valid key."""
    limits.check_address()
    presented = credentials.presented(request.headers.get("Authorization"))
    valid = presented is not None and presented.scheme in schemes
    caller, has_expired = found(presented.key) if valid else (None, False)
    if caller is None:
        limits.count_failure()
        raise expired(challenge) if has_expired else unauthorized(challenge, schemes)
    limits.count_use(caller.identifier, rate)
    return caller


def require_held(required: int, held: int) -> None:
    """403 naming the scopes of `required` that `held` lacks (bits), for a check of a key
    against the scopes a service requires: forward auth and the Flask extension."""
    missing = exceeding(required, held)
    if missing:
        names = ", ".join(to_names(missing))
        raise ApiError(403, "forbidden", f"This key lacks the scopes: {names}.")


def caller() -> Caller:
    """The key that authenticated the current request."""
    return g.caller


def managing_caller(rate: str = limits.PER_KEY) -> Caller:
    """The request's key, which must be of a managing kind: 403 for telemetry."""
    caller = authenticate(rate)
    if caller.kind not in MANAGING_KINDS:
        raise ApiError(403, "forbidden", "Telemetry keys cannot manage API keys.")
    return caller


def require_managing_key() -> None:
    """The before_request hook of the key-management blueprints."""
    g.caller = managing_caller()


def no_store(response: Response) -> Response:
    """The after_request hook of every blueprint behind these keys: its answers (key data,
    events, refusals) are never kept by a browser or a proxy."""
    response.headers["Cache-Control"] = "no-store"
    return response

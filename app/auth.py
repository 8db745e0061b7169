"""Authentication: credentials -> checksum -> digest -> one indexed lookup -> caller()."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from flask import current_app, g, request
from sqlalchemy import bindparam, select, update
from werkzeug.datastructures import Authorization

from app import keyformat
from app.errors import ApiError
from app.extensions import db
from app.models import ApiKey
from app.reads import Read
from app.scopes import MANAGING_KINDS
from app.timestamps import seconds_since, utcnow

CHALLENGE = ("WWW-Authenticate", 'Basic realm="api"')

# Every request of the API runs this module: it reaches the request, the application and
# `g` through `_get_current_object()`, a quarter of the work of an attribute lookup through
# Flask's proxies (bench/README.md).

# SQLAlchemy Core statements on the model's table, built once: the ORM's execution
# machinery and objects cost more than the lookup itself (see bench/README.md).
_KEYS = ApiKey.__table__
_BY_DIGEST = Read(
    select(
        _KEYS.c.id, _KEYS.c.organization_id, _KEYS.c.kind, _KEYS.c.scope_bits, _KEYS.c.last_used
    ).where(_KEYS.c.digest == bindparam("digest"))
)
_RECORD_USE = (
    update(_KEYS).where(_KEYS.c.id == bindparam("key_id")).values(last_used=bindparam("now"))
)


class Caller(NamedTuple):
    """The key that authenticated the current request."""

    id: int
    organization_id: int
    kind: str
    scope_bits: int


def presented_key() -> str | None:
    """The key from `Basic base64(<key>:)` (password ignored) or `Bearer <key>`."""
    header = request._get_current_object().environ.get("HTTP_AUTHORIZATION")
    credentials = Authorization.from_header(header)  # as request.authorization parses it
    if credentials is None:
        return None
    if credentials.type == "basic":
        return credentials.username
    if credentials.type == "bearer":
        return credentials.token
    return None


def _record_use(key_id: int, last_used: datetime | None, resolution: int) -> None:
    """Write last_used on first use, then at most once per `resolution` seconds."""
    if last_used is None or seconds_since(last_used) >= resolution:
        db.session.execute(_RECORD_USE, {"key_id": key_id, "now": utcnow()})
        db.session.commit()


def caller() -> Caller:
    """The key that authenticated the current request."""
    return g._get_current_object().caller


def authenticate() -> None:
    """The keys blueprint's before_request hook: 401 for no valid key, 403 for telemetry."""
    presented = presented_key()
    row = None
    if presented and keyformat.is_full_key(presented):
        digest = keyformat.digest(presented)
        row = _BY_DIGEST.first({"digest": digest})
    if row is None:
        raise ApiError(
            401,
            "unauthorized",
            "A valid API key is required, as the user name of HTTP Basic authentication "
            "or as a Bearer token.",
            headers=[CHALLENGE],
        )
    key_id, organization_id, kind, scope_bits, last_used = row
    config = current_app._get_current_object().config
    _record_use(key_id, last_used, config["LAST_USED_RESOLUTION"])
    g._get_current_object().caller = Caller(key_id, organization_id, kind, scope_bits)
    if kind not in MANAGING_KINDS:
        raise ApiError(403, "forbidden", "Telemetry keys cannot manage API keys.")

"""Authentication: credentials -> checksum -> digest -> one indexed lookup -> g.caller."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from flask import current_app, g, request
from sqlalchemy import bindparam, select, update

from app import keyformat
from app.errors import ApiError
from app.extensions import db
from app.models import ApiKey
from app.reads import Read
from app.scopes import MANAGING_KINDS
from app.timestamps import utcnow

CHALLENGE = ("WWW-Authenticate", 'Basic realm="api"')

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
    credentials = request.authorization
    if credentials is None:
        return None
    if credentials.type == "basic":
        return credentials.username
    if credentials.type == "bearer":
        return credentials.token
    return None


def _record_use(key_id: int, last_used: datetime | None) -> None:
    """Write last_used on first use, then at most once per LAST_USED_RESOLUTION seconds."""
    now = utcnow()
    resolution = current_app.config["LAST_USED_RESOLUTION"]
    if last_used is None or (now - last_used).total_seconds() >= resolution:
        db.session.execute(_RECORD_USE, {"key_id": key_id, "now": now})
        db.session.commit()


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
    _record_use(key_id, last_used)
    g.caller = Caller(key_id, organization_id, kind, scope_bits)
    if kind not in MANAGING_KINDS:
        raise ApiError(403, "forbidden", "Telemetry keys cannot manage API keys.")

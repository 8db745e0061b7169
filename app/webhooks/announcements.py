"""What the webhook senders' scans announce (CONTRACT.md section 22), each once, whichever
worker finds it first: key_announcements' primary key lets one transaction write it, with
its audit event and deliveries.

- Expiries: each key of an organization with an endpoint that takes them (enabled or not: a
  disabled endpoint's events are held for it), whose expires_at
  is within 7 days (or passed within a day), at the latest notice it has reached (7 days
  before, 1 day before, expired).
- Quotas used up: each key with a quota and nothing left in its period, for the end of the
  period (key.quota_exhausted).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from flask import Flask
from sqlalchemy import select

from app import audit
from app.domain import periods, timestamps
from app.extensions import db
from app.keys.bodies import dump_key
from app.quotas import service as quotas
from app.storage import database, queries
from app.storage.models import ApiKey, KeyAnnouncement, WebhookEndpoint

# The notices of an expiry, from the earliest: how long before expires_at each is due.
NOTICES = (("7d", timedelta(days=7)), ("1d", timedelta(days=1)), ("expired", timedelta(0)))
# A key that expired longer ago than this when first seen is not announced any more.
LOOKBACK = timedelta(days=1)
# A quota used up, announced for the end of its period (a lifetime's: periods.NEVER).
QUOTA_NOTICE = "quota"

_ENDPOINTS = WebhookEndpoint.__table__
_KEYS = ApiKey.__table__
_ANNOUNCEMENTS = KeyAnnouncement.__table__


def expiries(app: Flask) -> int:
    """Announce each expiry notice reached and not yet announced; how many."""
    with app.app_context():
        now = timestamps.utcnow()
        listening = _listening("key.expiring", "key.expired")
        if not listening:
            return 0
        candidates = db.session.execute(
            select(_KEYS.c.organization_id, _KEYS.c.expires_at, *queries.KEY_COLUMNS).where(
                _KEYS.c.organization_id.in_(listening),
                _KEYS.c.expires_at > now - LOOKBACK,
                _KEYS.c.expires_at <= now + NOTICES[0][1],
            )
        ).all()
        db.session.commit()
        made = 0
        for organization, expires_at, *row in candidates:
            notice = next(name for name, before in reversed(NOTICES) if expires_at - before <= now)
            made += _announce(organization, expires_at, notice, queries.key_of_row(row))
        return made


def quotas_used_up(app: Flask) -> int:
    """Announce each quota used up in its period and not yet announced (key.quota_exhausted,
    once a period, whichever worker finds it); how many."""
    with app.app_context():
        listening = _listening("key.quota_exhausted")
        if not listening:
            return 0
        candidates = db.session.execute(
            select(_KEYS.c.organization_id, *queries.KEY_COLUMNS).where(
                _KEYS.c.organization_id.in_(listening), _KEYS.c.quota_requests.is_not(None)
            )
        ).all()
        db.session.commit()
        made = 0
        for organization, *row in candidates:
            key = queries.key_of_row(row)
            if quotas.remaining(key) == 0:
                period = periods.window(key.quota_period, timestamps.utcnow())
                made += _announce(organization, period.end or periods.NEVER, QUOTA_NOTICE, key)
        return made


def _listening(*events: str) -> set[int]:
    """The organizations with an endpoint that takes one of `events`, enabled or not (a
    disabled one's events are held until it is enabled again)."""
    query = select(_ENDPOINTS.c.organization_id, _ENDPOINTS.c.events)
    return {
        organization
        for organization, taken in db.session.execute(query)
        if any(event in taken for event in events)
    }


def _announce(organization: int, expires_at: datetime, notice: str, key: queries.Key) -> int:
    """One notice, written once: by this transaction, unless another has already (a
    quota's notice: for the end of its period, so once a period)."""
    dialect = db.session.connection().dialect.name
    statement = (
        database.insert(_ANNOUNCEMENTS, dialect)
        .values(
            identifier=key.identifier,
            notice=notice,
            expires_at=expires_at,
            announced=timestamps.utcnow(),
        )
        .on_conflict_do_nothing()
        .returning(_ANNOUNCEMENTS.c.identifier)
    )
    if db.session.execute(statement).first() is None:
        db.session.rollback()
        return 0
    if notice == QUOTA_NOTICE:
        action, details = "key.quota_exhausted", {"quota": key.quota}
    else:
        action = "key.expired" if notice == "expired" else "key.expiring"
        details = {"expires_at": key.expires_at, "notice": notice}
    audit.record(
        action,
        organization_id=organization,
        actor=audit.OPERATOR,
        target=key.identifier,
        details=details,
        target_key=key,
        key=dump_key(key),
    )
    db.session.commit()
    return 1

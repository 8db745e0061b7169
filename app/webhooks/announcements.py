"""What is announced (docs/design.md, "Webhooks"), each once, whichever worker finds it
first: key_announcements' primary key lets one transaction write it, with its audit event
and deliveries.

- Expiries: each key of an organization with an endpoint that takes them (enabled or not: a
  disabled endpoint's events are held for it), whose expires_at
  is within 7 days (or passed within a day), at the latest notice it has reached (7 days
  before, 1 day before, expired).
- Quotas used up: recorded by the use that used one up (quotas_used_up, which
  authentication calls), once for the end of the period (key.quota_exhausted,
  identity.quota_exhausted), whether or not a webhook listens.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from flask import Flask
from sqlalchemy import select

from app import audit
from app.access.limits import EXHAUSTED
from app.access.uses import Exhausted
from app.domain import bindings, periods, timestamps
from app.domain.credentials import Caller
from app.extensions import db
from app.identities import service as identities
from app.keys.bodies import dump_key
from app.storage import database, queries
from app.storage.models import ApiKey
from app.storage.webhook_models import KeyAnnouncement, WebhookEndpoint

# The notices of an expiry, from the earliest: how long before expires_at each is due.
NOTICES = (("7d", timedelta(days=7)), ("1d", timedelta(days=1)), ("expired", timedelta(0)))
# A key that expired longer ago than this when first seen is not announced any more.
LOOKBACK = timedelta(days=1)
# A quota used up, announced for the end of its period (a lifetime's: periods.NEVER), by
# its counter (a key's lineage, or an identity's).
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


def quotas_used_up(caller: Caller, exhausted: Sequence[Exhausted]) -> None:
    """The quotas the caller's use has just used up (docs/design.md, "Identities"), each recorded
    once a period whichever worker served the use, at the time: key.quota_exhausted for the
    key's own quota or a maker's (the key of that lineage, while one is left),
    identity.quota_exhausted for its identity's; the audit log has them, and so the
    webhooks that take them. Written and committed now, apart from the request's work."""
    actor = audit.actor_of(caller)
    for used_up in exhausted:
        ends = used_up.ends or periods.NEVER
        if not _announced(used_up.counter, QUOTA_NOTICE, ends):
            continue
        if used_up.who == bindings.IDENTITY and caller.identity is not None:
            identity = identities.find_identity(caller, caller.identity.id)
            shown = identities.dump_identity(identity)
            audit.record(
                "identity.quota_exhausted",
                organization_id=caller.organization_id,
                actor=actor,
                target=identity.id,
                target_name=identity.name,
                details={"quota": identity.quota},
                actor_key=caller,
                identity=shown,
                target_identity=identity.row_id,
            )
        else:
            key = queries.key_of_lineage(caller.organization_id, used_up.counter)
            if key is not None:
                audit.record(
                    "key.quota_exhausted",
                    organization_id=caller.organization_id,
                    actor=actor,
                    target=key.identifier,
                    details={"quota": key.quota},
                    actor_key=caller,
                    target_key=key,
                    key=dump_key(key),
                )
        db.session.commit()


def init_app(app: Flask) -> None:
    """Authentication hands each use's used-up quotas here (app/access/auth.py)."""
    app.extensions[EXHAUSTED] = quotas_used_up


def _listening(*events: str) -> set[int]:
    """The organizations with an endpoint that takes one of `events`, enabled or not (a
    disabled one's events are held until it is enabled again)."""
    query = select(_ENDPOINTS.c.organization_id, _ENDPOINTS.c.events)
    return {
        organization
        for organization, taken in db.session.execute(query)
        if any(event in taken for event in events)
    }


def _announced(identifier: str, notice: str, expires_at: datetime) -> bool:
    """Whether this transaction is the one that makes the announcement: once, whichever
    worker gets there first (key_announcements' primary key)."""
    dialect = db.session.connection().dialect.name
    statement = (
        database.insert(_ANNOUNCEMENTS, dialect)
        .values(
            identifier=identifier,
            notice=notice,
            expires_at=expires_at,
            announced=timestamps.utcnow(),
        )
        .on_conflict_do_nothing()
        .returning(_ANNOUNCEMENTS.c.identifier)
    )
    if db.session.execute(statement).first() is None:
        db.session.rollback()
        return False
    return True


def _announce(organization: int, expires_at: datetime, notice: str, key: queries.Key) -> int:
    """One notice, written once: by this transaction, unless another has already."""
    if not _announced(key.identifier, notice, expires_at):
        return 0
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

"""What the webhook senders remove (app/webhooks/sender.py, at most once an hour), once older
than WEBHOOK_RETENTION_DAYS: finished deliveries (delivered or failed), those held for an
endpoint still disabled, the events none is left for; and the announcements of expiries too
old to be announced again. A pending delivery of an enabled endpoint stays, whatever its
age: it still has tries to make."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask
from sqlalchemy import delete, or_, select

from app.audit.outbox import PENDING
from app.domain import timestamps
from app.extensions import db
from app.storage.webhook_models import (
    KeyAnnouncement,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from app.webhooks import announcements

_DELIVERIES = WebhookDelivery.__table__
_ANNOUNCEMENTS = KeyAnnouncement.__table__
_ENDPOINTS = WebhookEndpoint.__table__
_EVENTS = WebhookEvent.__table__


def prune(app: Flask, retention: timedelta) -> int:
    """Remove what is older than `retention`; how many deliveries."""
    disabled = select(_ENDPOINTS.c.id).where(_ENDPOINTS.c.enabled.is_(False))
    with app.app_context():
        now = timestamps.utcnow()
        cutoff = now - retention
        removed = db.session.execute(
            delete(_DELIVERIES).where(
                _DELIVERIES.c.created < cutoff,
                or_(_DELIVERIES.c.status != PENDING, _DELIVERIES.c.endpoint_id.in_(disabled)),
            )
        ).rowcount
        left = select(_DELIVERIES.c.id).where(_DELIVERIES.c.event_id == _EVENTS.c.id)
        db.session.execute(delete(_EVENTS).where(_EVENTS.c.created < cutoff, ~left.exists()))
        db.session.execute(
            delete(_ANNOUNCEMENTS).where(
                _ANNOUNCEMENTS.c.expires_at < now - 2 * announcements.LOOKBACK
            )
        )
        db.session.commit()
        return removed

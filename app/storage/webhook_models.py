"""The webhooks' tables: the endpoints, the events and their deliveries, and the expiry
notices announced once. Columns, indexes and constraints only (app/storage/models.py holds
the rest)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db


class WebhookEndpoint(db.Model):
    """Where an organization's key events are sent (app/webhooks), with the secret that
    signs them: kept as it is, since signing needs it (a digest could not sign)."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The endpoint's id in the API: `ep_` and random characters, never reused.
    public_id: Mapped[str] = mapped_column(String(40), unique=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    # The event types it receives, in the order of app/audit/outbox.py's EVENT_TYPES.
    events: Mapped[list[str]] = mapped_column(JSON)
    description: Mapped[str] = mapped_column(String(500))
    enabled: Mapped[bool]
    secret: Mapped[str] = mapped_column(String(100))
    # The secret a new one replaced, still signing beside it until previous_secret_until.
    previous_secret: Mapped[str | None] = mapped_column(String(100))
    previous_secret_until: Mapped[datetime | None]
    created: Mapped[datetime]
    updated: Mapped[datetime]
    # The first failed try since the last success; None: not failing.
    failing_since: Mapped[datetime | None]

    __table_args__ = (Index("ix_webhook_endpoints_organization", "organization_id", "id"),)


class WebhookEvent(db.Model):
    """One key event for an organization's endpoints: its body, signed and sent as it is
    by every try of every delivery. Written by app/audit's record(), in the transaction of
    the change it reports."""

    __tablename__ = "webhook_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(40))
    payload: Mapped[str] = mapped_column(Text)
    created: Mapped[datetime]


class WebhookDelivery(db.Model):
    """One event for one endpoint: its tries, claimed one at a time by a worker's sender
    (claim and lease_until), until one succeeds or the retries end."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The delivery's id in the API and its `webhook-id` header, the same on every try.
    public_id: Mapped[str] = mapped_column(String(40), unique=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("webhook_events.id", ondelete="CASCADE"))
    endpoint_id: Mapped[int] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    # pending, delivered or failed (its retries are over).
    status: Mapped[str] = mapped_column(String(20))
    tries: Mapped[int]
    next_attempt: Mapped[datetime]
    # The worker's claim of the try under way, and when another may take it over.
    claim: Mapped[str | None] = mapped_column(String(40))
    lease_until: Mapped[datetime | None]
    last_attempt: Mapped[datetime | None]
    last_status: Mapped[int | None]
    last_error: Mapped[str | None] = mapped_column(String(200))
    created: Mapped[datetime]

    __table_args__ = (
        # The senders' look for due tries; an endpoint's deliveries, newest first.
        Index("ix_webhook_deliveries_due", "status", "next_attempt"),
        Index("ix_webhook_deliveries_endpoint", "endpoint_id", "id"),
    )


class KeyAnnouncement(db.Model):
    """A key's expiry announced (`notice`: 7d, 1d or expired) for its `expires_at`: the
    primary key makes each one happen once, whichever worker finds it first."""

    __tablename__ = "key_announcements"

    identifier: Mapped[str] = mapped_column(String(64), primary_key=True)
    notice: Mapped[str] = mapped_column(String(20), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(primary_key=True)
    announced: Mapped[datetime]

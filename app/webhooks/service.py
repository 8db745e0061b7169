"""The rules of webhook endpoints (docs/design.md, "Webhooks"): who may manage them (an
organization's sdk_integration keys), at most 20 an organization, a URL that leads to a
public https address, the signing secret shown once and replaced with a day of overlap,
each change in the audit log; the deliveries listed and retried. Every function takes the
caller, and so its organization: no query without it."""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from typing import Any, NamedTuple

from flask import current_app
from sqlalchemy import func, select, update

from app import audit
from app.audit import outbox as webhook_outbox
from app.domain import timestamps
from app.domain.credentials import Caller
from app.domain.scopes import SDK_INTEGRATION
from app.extensions import db
from app.http.errors import ApiError, invalid
from app.storage.models import Organization
from app.storage.queries import Page
from app.storage.webhook_models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from app.webhooks import signatures, targets

MAX_ENDPOINTS = 20
# A replaced secret keeps signing beside the new one this long, for receivers to catch up.
SECRET_OVERLAP = timedelta(hours=24)
ENDPOINT_PREFIX = "ep_"


class Delivery(NamedTuple):
    """A delivery as the API shows it, with its event's type and body."""

    public_id: str
    type: str
    status: str
    tries: int
    last_status: int | None
    last_error: str | None
    last_attempt: Any
    next_attempt: Any
    created: Any
    payload: str
    claim: str | None
    lease_until: Any

    @property
    def payload_object(self) -> dict:
        return json.loads(self.payload)


def require_manager(caller: Caller) -> None:
    """Only an organization's sdk_integration keys of no identity manage its webhooks,
    whose events name every key of the organization: 403 for others."""
    if caller.kind != SDK_INTEGRATION:
        raise ApiError(403, "forbidden", "Only sdk_integration keys may manage webhooks.")
    if caller.identity is not None:  # its keys alone are within its reach
        raise ApiError(403, "forbidden", "A key that belongs to an identity manages no webhooks.")


def _not_found() -> ApiError:
    return ApiError(404, "not_found", "No webhook endpoint of your organization has this id.")


def _checked_url(url: str) -> str:
    """The URL, if a webhook may go there now (targets.check): 422 naming `url` otherwise,
    and WEBHOOK_ALLOW_PRIVATE when that setting would allow it."""
    try:
        targets.check(url, current_app.config["WEBHOOK_ALLOW_PRIVATE"])
    except targets.UnsafeTarget as error:
        said = f"{error} {targets.ALLOW_PRIVATE_HINT}" if error.private else str(error)
        raise invalid({"url": [said]}) from None
    return url


def _lock_organization(organization_id: int) -> None:
    """The organization's row locked for this transaction, so that two creates cannot both
    count 19 endpoints (SQLite: the write lock, taken by BEGIN IMMEDIATE before the count)."""
    connection = db.session.connection()
    if connection.dialect.name == "sqlite":
        if not connection.connection.dbapi_connection.in_transaction:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        return
    query = select(Organization.id).where(Organization.id == organization_id).with_for_update()
    connection.execute(query)


def list_endpoints(caller: Caller) -> list[WebhookEndpoint]:
    """The organization's endpoints, oldest first."""
    query = (
        select(WebhookEndpoint)
        .where(WebhookEndpoint.organization_id == caller.organization_id)
        .order_by(WebhookEndpoint.id)
    )
    return list(db.session.scalars(query))


def find_endpoint(caller: Caller, public_id: str) -> WebhookEndpoint:
    query = select(WebhookEndpoint).where(
        WebhookEndpoint.organization_id == caller.organization_id,
        WebhookEndpoint.public_id == public_id,
    )
    endpoint = db.session.scalar(query)
    if endpoint is None:
        raise _not_found()
    return endpoint


def _described(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {
        "url": endpoint.url,
        "events": list(endpoint.events),
        "description": endpoint.description,
        "enabled": endpoint.enabled,
    }


def create_endpoint(caller: Caller, data: dict) -> WebhookEndpoint:
    """A new endpoint with its secret (the only answer that shows it): 409
    `webhook_limit_reached` past MAX_ENDPOINTS."""
    url = _checked_url(data["url"])
    _lock_organization(caller.organization_id)
    count = db.session.scalar(
        select(func.count())
        .select_from(WebhookEndpoint)
        .where(WebhookEndpoint.organization_id == caller.organization_id)
    )
    if count >= MAX_ENDPOINTS:
        db.session.rollback()
        raise ApiError(
            409,
            "webhook_limit_reached",
            f"An organization has at most {MAX_ENDPOINTS} webhook endpoints: delete one first.",
        )
    now = timestamps.utcnow()
    endpoint = WebhookEndpoint(
        public_id=ENDPOINT_PREFIX + secrets.token_urlsafe(12),
        organization_id=caller.organization_id,
        url=url,
        events=data["events"],
        description=data["description"],
        enabled=data["enabled"],
        secret=signatures.new_secret(),
        previous_secret=None,
        previous_secret_until=None,
        created=now,
        updated=now,
        failing_since=None,
    )
    db.session.add(endpoint)
    audit.record(
        "webhook.created",
        organization_id=caller.organization_id,
        actor=audit.actor_of(caller),
        actor_key=caller,
        target=endpoint.public_id,
        details=_described(endpoint),
    )
    db.session.commit()
    return endpoint


def update_endpoint(caller: Caller, endpoint: WebhookEndpoint, data: dict) -> WebhookEndpoint:
    """Change what the body names. Enabling an endpoint again forgets its failures, and its
    pending deliveries (those held while it was disabled, and those waiting for a retry)
    are due at once, in the order they were written."""
    if "url" in data:
        _checked_url(data["url"])
    before = _described(endpoint)
    for field in ("url", "events", "description", "enabled"):
        if field in data:
            setattr(endpoint, field, data[field])
    after = _described(endpoint)
    details = {
        field: [before[field], after[field]] for field in after if before[field] != after[field]
    }
    enabled = details.get("enabled") == [False, True]
    if details:
        now = timestamps.utcnow()
        if enabled:
            endpoint.failing_since = None
            db.session.execute(
                update(WebhookDelivery)
                .where(
                    WebhookDelivery.endpoint_id == endpoint.id,
                    WebhookDelivery.status == webhook_outbox.PENDING,
                )
                .values(next_attempt=now)
            )
        endpoint.updated = max(now, endpoint.updated + timestamps.TICK)
        audit.record(
            "webhook.updated",
            organization_id=caller.organization_id,
            actor=audit.actor_of(caller),
            actor_key=caller,
            target=endpoint.public_id,
            details=details,
        )
    db.session.commit()
    if enabled:
        webhook_outbox.written.set()  # this worker's sender looks at once
    return endpoint


def delete_endpoint(caller: Caller, endpoint: WebhookEndpoint) -> None:
    """The endpoint and its deliveries, gone."""
    db.session.delete(endpoint)
    audit.record(
        "webhook.deleted",
        organization_id=caller.organization_id,
        actor=audit.actor_of(caller),
        actor_key=caller,
        target=endpoint.public_id,
        details={"url": endpoint.url},
    )
    db.session.commit()


def replace_secret(caller: Caller, endpoint: WebhookEndpoint) -> WebhookEndpoint:
    """A new secret; the one it replaces signs beside it for SECRET_OVERLAP (a secret
    replaced twice within that time is dropped at once: only the newest old one stays)."""
    now = timestamps.utcnow()
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_until = now + SECRET_OVERLAP
    endpoint.secret = signatures.new_secret()
    endpoint.updated = max(now, endpoint.updated + timestamps.TICK)
    audit.record(
        "webhook.new_secret",
        organization_id=caller.organization_id,
        actor=audit.actor_of(caller),
        actor_key=caller,
        target=endpoint.public_id,
        details={"previous_secret_expires_at": timestamps.iso(endpoint.previous_secret_until)},
    )
    db.session.commit()
    return endpoint


_DELIVERY_COLUMNS = (
    WebhookDelivery.public_id,
    WebhookEvent.type,
    WebhookDelivery.status,
    WebhookDelivery.tries,
    WebhookDelivery.last_status,
    WebhookDelivery.last_error,
    WebhookDelivery.last_attempt,
    WebhookDelivery.next_attempt,
    WebhookDelivery.created,
    WebhookEvent.payload,
    WebhookDelivery.claim,
    WebhookDelivery.lease_until,
)


def _deliveries(endpoint: WebhookEndpoint, *criteria: Any):
    return (
        select(*_DELIVERY_COLUMNS)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .where(WebhookDelivery.endpoint_id == endpoint.id, *criteria)
    )


def list_deliveries(
    caller: Caller, endpoint: WebhookEndpoint, page: int, page_size: int, status: str | None = None
) -> Page[Delivery]:
    """One page of the endpoint's deliveries, newest first."""
    criteria = [] if status is None else [WebhookDelivery.status == status]
    total = db.session.scalar(
        select(func.count())
        .select_from(WebhookDelivery)
        .where(WebhookDelivery.endpoint_id == endpoint.id, *criteria)
    )
    offset = (page - 1) * page_size
    data: list[Delivery] = []
    if offset < total:
        query = _deliveries(endpoint, *criteria).order_by(WebhookDelivery.id.desc())
        rows = db.session.execute(query.offset(offset).limit(page_size))
        data = [Delivery._make(row) for row in rows]
    return Page(page, page_size, total, data)


def retry_delivery(caller: Caller, endpoint: WebhookEndpoint, public_id: str) -> Delivery:
    """Send a delivery again, now, with its id (whatever became of it): 409
    `delivery_in_progress` while a try of it is under way."""
    query = _deliveries(endpoint, WebhookDelivery.public_id == public_id)
    row = db.session.execute(query).first()
    if row is None:
        raise ApiError(404, "not_found", "This endpoint has no delivery with this id.")
    now = timestamps.utcnow()
    delivery = Delivery._make(row)
    if delivery.claim is not None and delivery.lease_until > now:
        raise ApiError(409, "delivery_in_progress", "A try of this delivery is under way.")
    values = {
        "status": webhook_outbox.PENDING,
        "next_attempt": now,
        "claim": None,
        "lease_until": None,
    }
    db.session.execute(
        WebhookDelivery.__table__.update()
        .where(WebhookDelivery.public_id == public_id)
        .values(**values)
    )
    db.session.commit()
    webhook_outbox.written.set()
    return delivery._replace(status=webhook_outbox.PENDING, next_attempt=now)

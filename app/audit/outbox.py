"""The key events webhooks send (docs/design.md, "Webhooks"), written where they happen: app/audit's
record(), the one writer of audit events, hands each event here inside the transaction of
the change it reports, so that no event is sent for a change that did not commit and no
committed change lacks its event. One event row (its body, fixed: every try signs and sends
the same bytes) and one delivery per endpoint of the organization that takes its type;
nothing at all when none does. A disabled endpoint's deliveries are held: the senders
(app/webhooks/sender.py) send none of them until it is enabled again.

A module beside app/webhooks (as app/usage/counter.py is beside app/usage): app/audit
imports it, and app/webhooks imports app/audit to record the endpoints' own changes.
"""

from __future__ import annotations

import json
import secrets
import threading
from typing import Any

from sqlalchemy import insert, select

from app.domain import timestamps
from app.extensions import db
from app.storage.webhook_models import WebhookDelivery, WebhookEndpoint, WebhookEvent

# Every type an endpoint may take, in the order lists show them.
EVENT_TYPES = (
    "key.created",
    "key.updated",
    "key.rotated",
    "key.deleted",
    "key.revoked",
    "key.quota",
    "key.quota_exhausted",
    "key.expiring",
    "key.expired",
    "identity.quota_exhausted",
)
# The types whose audit details a payload carries, as `changes`.
WITH_CHANGES = frozenset({"key.updated", "key.rotated", "key.quota"})
DELIVERY_PREFIX = "msg_"
PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"

_ENDPOINTS = select(WebhookEndpoint.id, WebhookEndpoint.events)
_EVENT = insert(WebhookEvent.__table__).returning(WebhookEvent.__table__.c.id)
_DELIVERY = insert(WebhookDelivery.__table__)

# Set when this process writes an event: its sender looks at once rather than at its next
# poll (the others find it at theirs).
written = threading.Event()


def new_delivery_id() -> str:
    """A delivery's id, its `webhook-id`: random, never reused."""
    return DELIVERY_PREFIX + secrets.token_urlsafe(18)


def write(
    action: str,
    organization_id: int,
    actor: str,
    key: dict[str, Any] | None,
    details: dict[str, Any] | None,
    identity: dict[str, Any] | None = None,
) -> bool:
    """The event `action` on `key` (the key object as read, the output schema's dump), or on
    `identity` (the identity object) for an identity's event, by `actor`, for every endpoint
    of the organization that takes it (a disabled one's held until it is enabled), in the
    session's transaction; whether there was one."""
    subject = {"key": key} if key is not None else {"identity": identity}
    if subject == {"identity": None} or action not in EVENT_TYPES:
        return False
    query = _ENDPOINTS.where(WebhookEndpoint.organization_id == organization_id)
    endpoints = [id_ for id_, events in db.session.execute(query) if action in events]
    if not endpoints:
        return False
    now = timestamps.utcnow()
    data: dict[str, Any] = subject | {"actor": actor}
    if action in WITH_CHANGES and details:
        data["changes"] = details
    body = {"type": action, "timestamp": timestamps.iso(now), "data": data}
    payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    event_id = db.session.execute(
        _EVENT,
        {"organization_id": organization_id, "type": action, "payload": payload, "created": now},
    ).scalar_one()
    rows = [
        {
            "public_id": new_delivery_id(),
            "event_id": event_id,
            "endpoint_id": endpoint,
            "status": PENDING,
            "tries": 0,
            "next_attempt": now,
            "claim": None,
            "lease_until": None,
            "last_attempt": None,
            "last_status": None,
            "last_error": None,
            "created": now,
        }
        for endpoint in endpoints
    ]
    db.session.execute(_DELIVERY, rows)
    written.set()
    return True

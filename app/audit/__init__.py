"""The audit log (docs/design.md, "The audit log"): record() is the only writer of events. Every
writer of keys calls it inside its own transaction, before its one commit, so that no
change is acknowledged without its event and no refused change leaves one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Protocol

from flask import has_request_context
from sqlalchemy import insert

from app.audit import events
from app.audit import outbox as webhook_outbox
from app.domain import addresses, keyformat, reach
from app.domain.credentials import Caller
from app.domain.scopes import ALL
from app.domain.timestamps import utcnow
from app.extensions import db
from app.http.errors import ApiError
from app.serving import metrics
from app.storage import queries
from app.storage.models import AuditEvent
from app.storage.queries import Page

_INSERT = insert(AuditEvent.__table__)
KEY_ACTIONS = (
    "key.created",
    "key.updated",
    "key.rotated",
    "key.deleted",
    "key.revoked",
    "key.quota",
    # A key brought in from elsewhere (app/keys/imports.py), one event per key.
    "key.imported",
    # A quota used up in its period, recorded once, by the use that used it up
    # (app/webhooks/announcements.py).
    "key.quota_exhausted",
    # Announced before and at a key's expires_at, for organizations with webhooks that
    # take them (app/webhooks/sender.py).
    "key.expiring",
    "key.expired",
)
# A webhook endpoint's changes: their target is the endpoint's id, not a key.
WEBHOOK_ACTIONS = (
    "webhook.created",
    "webhook.updated",
    "webhook.deleted",
    "webhook.new_secret",
    "webhook.disabled",
)
# An identity's changes (docs/design.md, "Identities"): their target is the identity's id.
IDENTITY_ACTIONS = (
    "identity.created",
    "identity.updated",
    "identity.deleted",
    "identity.quota_exhausted",
    # More uses granted to an identity's quota (POST /api/identities/<id>/quota).
    "identity.quota",
)
ACTIONS = KEY_ACTIONS + WEBHOOK_ACTIONS + IDENTITY_ACTIONS
# The actions whose target is no key: shown as it is.
_NOT_OF_A_KEY = frozenset(WEBHOOK_ACTIONS + IDENTITY_ACTIONS)
OPERATOR = "operator"
LEAK_REPORT = "leak-report"


class Named(Protocol):
    """A key as an event names it beside its shown value: a Caller, a queries.Key, a row."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def identity_id(self) -> int | None: ...


def actor_of(caller: Caller) -> str:
    """How an event names the key that acted: its shown value, never the key."""
    return caller.shown or keyformat.shown(caller.identifier)


def _shown(identifier: str, key: Named | None) -> str:
    """How an event names the key acted on: as every answer shows it (an imported key by
    its own shown form)."""
    return getattr(key, "shown", None) or keyformat.shown(identifier)


def record(
    action: str,
    *,
    organization_id: int,
    actor: str,
    target: str,
    details: dict[str, Any] | None = None,
    actor_key: Named | None = None,
    target_key: Named | None = None,
    key: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
    target_name: str | None = None,
    target_identity: int | None = None,
) -> None:
    """Add one event to the session's transaction; `target` is the key's identifier (a
    webhook endpoint's id for its own actions). The client's address is the one the abuse
    limits see (None outside a request: the CLI). `actor_key` and `target_key` are the
    acting and target keys as they are now, whose name and kind the event keeps (None: the
    actor is no key). `key`, the key object as read, goes to the organization's webhooks
    with the event (app/audit/outbox.py), as `identity`, the identity object, goes with an
    identity's. `target_name` names a target that is no key (an identity, by its name);
    `target_identity` is the row id of the identity an identity's own event is of (a key's
    event is of its key's identity)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    metrics.audit_recorded(action)
    # A Core INSERT, not an object for the ORM's unit of work to flush at commit: the
    # cheaper, the shorter a SQLite writer holds the write lock (bench/README.md).
    db.session.execute(
        _INSERT,
        {
            "organization_id": organization_id,
            "at": utcnow(),
            "action": action,
            "actor": actor,
            "target": target if action in _NOT_OF_A_KEY else _shown(target, target_key),
            "client_address": addresses.client_address() if has_request_context() else None,
            "details": details or {},
            "actor_name": None if actor_key is None else actor_key.name,
            "actor_kind": None if actor_key is None else actor_key.kind,
            "target_name": target_name if target_key is None else target_key.name,
            "target_kind": None if target_key is None else target_key.kind,
            "actor_identity_id": None if actor_key is None else actor_key.identity_id,
            "target_identity_id": target_identity if target_key is None else target_key.identity_id,
        },
    )
    webhook_outbox.write(action, organization_id, actor, key, details, identity)


def list_events(caller: Caller, page: int, page_size: int, **filters: Any) -> Page[AuditEvent]:
    """The events within the caller's reach, newest first (`filters`: target, action, since,
    as events.events_page takes them): its organization's, and for a key of an identity,
    those whose acting key or target was of its identity (app/domain/reach.py). Only a key
    that holds every scope may read them (the log names every key and who changed it)."""
    if caller.scope_bits != ALL:
        raise ApiError(
            403, "forbidden", "Only a key that holds every scope may read the audit log."
        )
    reached = reach.of(caller)
    target = filters.get("target")
    if target is not None and target.endswith(keyformat.SHOWN_SUFFIX):
        # A key named by its identifier: its events name it as answers show it.
        identifier = target.removesuffix(keyformat.SHOWN_SUFFIX)
        key = queries.key_by_identifier(reached.organization_id, identifier)
        if key is not None and key.shown:
            filters["target"] = key.shown
    return events.events_page(
        reached.organization_id, page, page_size, identity=reached.identity_id, **filters
    )


def exported(organization_name: str, since: datetime | None = None) -> Iterator[AuditEvent]:
    """An organization's events, oldest first, for log pipelines (the operator's CLI);
    LookupError, at the call, for an unknown organization."""
    organization_id = queries.organization_id(organization_name)
    if organization_id is None:
        raise LookupError(f'no organization is named "{organization_name}"')
    return events.events_since(organization_id, since)

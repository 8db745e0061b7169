"""The audit log (CONTRACT.md section 10): record() is the only writer of events. Every
writer of keys calls it inside its own transaction, before its one commit, so that no
change is acknowledged without its event and no refused change leaves one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple

from flask import has_request_context
from sqlalchemy import func, select

from app import keyformat, limits
from app.credentials import Caller
from app.errors import ApiError
from app.extensions import db
from app.models import AuditEvent, Organization
from app.scopes import ALL
from app.timestamps import utcnow

ACTIONS = ("key.created", "key.updated", "key.rotated", "key.deleted", "key.revoked")
OPERATOR = "operator"
LEAK_REPORT = "leak-report"


def actor_of(caller: Caller) -> str:
    """How an event names the key that acted: its shown value, never the key."""
    return keyformat.shown(caller.identifier)


def record(
    action: str,
    *,
    organization_id: int,
    actor: str,
    target: str,
    details: dict[str, Any] | None = None,
) -> None:
    """Add one event to the session's transaction; `target` is the key's identifier. The
    client's address is the one the abuse limits see (None outside a request: the CLI)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    db.session.add(
        AuditEvent(
            organization_id=organization_id,
            at=utcnow(),
            action=action,
            actor=actor,
            target=keyformat.shown(target),
            client_address=limits.client_address() if has_request_context() else None,
            details=details or {},
        )
    )


class Page(NamedTuple):
    page: int
    page_size: int
    total_count: int
    data: list[AuditEvent]


def list_events(
    caller: Caller,
    page: int,
    page_size: int,
    target: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
) -> Page:
    """The caller's organization's events, newest first; only a key that holds every
    scope may read them (the log names every key and who changed it)."""
    if caller.scope_bits != ALL:
        raise ApiError(
            403, "forbidden", "Only a key that holds every scope may read the audit log."
        )
    criteria = [AuditEvent.organization_id == caller.organization_id]
    if target is not None:
        criteria.append(AuditEvent.target == target)
    if action is not None:
        criteria.append(AuditEvent.action == action)
    if since is not None:
        criteria.append(AuditEvent.at >= since)
    total = db.session.scalar(select(func.count()).select_from(AuditEvent).where(*criteria))
    offset = (page - 1) * page_size
    events: list[AuditEvent] = []
    if offset < total:  # a page past the end asks nothing (nor an offset past 64 bits)
        query = select(AuditEvent).where(*criteria).order_by(AuditEvent.id.desc())
        events = list(db.session.scalars(query.offset(offset).limit(page_size)))
    return Page(page, page_size, total, events)


def exported(organization_name: str, since: datetime | None = None) -> Iterator[AuditEvent]:
    """An organization's events, oldest first, for log pipelines (the operator's CLI);
    LookupError for an unknown organization."""
    organization_id = db.session.scalar(
        select(Organization.id).where(Organization.name == organization_name)
    )
    if organization_id is None:
        raise LookupError(f'no organization is named "{organization_name}"')
    criteria = [AuditEvent.organization_id == organization_id]
    if since is not None:
        criteria.append(AuditEvent.at >= since)
    query = select(AuditEvent).where(*criteria).order_by(AuditEvent.id)
    yield from db.session.scalars(query.execution_options(yield_per=500))

"""The audit log's reads: a page of an organization's events for GET /api/audit, and every
event since a time for the operator's export. Paged as keys are (pages.counted)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import ColumnElement, Select, and_, or_, select

from app.extensions import db
from app.storage import pages
from app.storage.models import AuditEvent
from app.storage.queries import Page


def events_page(
    organization_id: int,
    page: int,
    page_size: int,
    target: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
    identity: int | None = None,
) -> Page[AuditEvent]:
    """A page of the organization's audit events, newest first; of one identity's keys
    (its row's id: those whose acting key or target was of it) when `identity` is given."""
    where = _events(organization_id, since, target, action, identity)
    in_order = select(AuditEvent).where(where).order_by(AuditEvent.id.desc())
    return pages.counted(AuditEvent, where, in_order, page, page_size, _event_rows)


def _event_rows(query: Select) -> list[AuditEvent]:
    return list(db.session.scalars(query))


def events_since(organization_id: int, since: datetime | None) -> Iterator[AuditEvent]:
    """The organization's audit events, oldest first, 500 rows at a time."""
    query = select(AuditEvent).where(_events(organization_id, since)).order_by(AuditEvent.id)
    yield from db.session.scalars(query.execution_options(yield_per=500))


def _events(
    organization_id: int,
    since: datetime | None,
    target: str | None = None,
    action: str | None = None,
    identity: int | None = None,
) -> ColumnElement[bool]:
    """The organization's events of `target`, of `action`, from `since` on, of `identity`
    (each when given)."""
    criteria = [AuditEvent.organization_id == organization_id]
    if identity is not None:
        criteria.append(
            or_(
                AuditEvent.actor_identity_id == identity,
                AuditEvent.target_identity_id == identity,
            )
        )
    if target is not None:
        criteria.append(AuditEvent.target == target)
    if action is not None:
        criteria.append(AuditEvent.action == action)
    if since is not None:
        criteria.append(AuditEvent.at >= since)
    return and_(*criteria)

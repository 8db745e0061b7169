"""A page of keys, with its total, and the page of any table (queries.py's reads of one
row each, and the rows they make, are the rest): GET /api/keys and its filters, the
operator's list, and every other listing's paging (`counted`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, and_, bindparam, false, func, not_, or_, select, true

from app.domain.timestamps import utcnow
from app.extensions import db
from app.storage.queries import (
    COUNTED,
    IN_ORGANIZATION,
    KEY,
    KEYS,
    METADATA,
    ORDER,
    Key,
    Page,
    key_of_columns,
)
from app.storage.reads import Read

T = TypeVar("T")

# The states a key may be listed by (`state=`).
ACTIVE, EXPIRED = "active", "expired"
# Pages starting this far in skip their rows through the index alone (_page).
DEEP_OFFSET = 1_000


# The total of a page: one row per kind, kept by the database (models.KeyCount).
_TOTAL = select(func.coalesce(func.sum(COUNTED.c.total), 0)).where(
    COUNTED.c.organization_id == bindparam("organization_id")
)
_TOTALS = {False: Read(_TOTAL), True: Read(_TOTAL.where(COUNTED.c.kind == bindparam("kind")))}


def _page(*criteria: Any, deep: bool) -> Select:
    """A page of keys in list order. A deep page takes its keys' ids from the listing
    index first, then reads those rows: what it skips are index entries, not table rows
    (half the time 25,000 keys in; a little more than the plain query near the start,
    hence both)."""

    def in_order(query: Select) -> Select:
        query = query.where(*criteria).order_by(*ORDER)
        return query.offset(bindparam("offset")).limit(bindparam("limit"))

    if not deep:
        return in_order(KEY)
    ids = in_order(select(KEYS.c.id)).scalar_subquery()
    return KEY.where(KEYS.c.id.in_(ids)).order_by(*ORDER)


_PAGES = {
    (kind, deep): Read(_page(*criteria, deep=deep))
    for kind, criteria in (
        (False, (IN_ORGANIZATION,)),
        (True, (IN_ORGANIZATION, KEYS.c.kind == bindparam("kind"))),
    )
    for deep in (False, True)
}


def matching(
    organization_id: int,
    kind: str | None,
    state: str | None,
    unused_since: datetime | None,
    enabled: bool | None = None,
    metadata: dict[str, str] | None = None,
    outside_policy: bool | None = None,
    lifetime_days: int | None = None,
    identity: int | None = None,
) -> ColumnElement[bool]:
    """The organization's keys of `kind`, in `state`, unused since `unused_since`, enabled
    or not, with these metadata members, outside the organization's policy or within it
    (each when given): what ix_api_keys_expiry, ix_api_keys_last_used and
    ix_key_metadata_lookup serve. A key is outside a policy whose keys live at most
    `lifetime_days` when it expires later than that many days from now, or never; with
    no such rule, every key is within it."""
    now = utcnow()
    criteria = [KEYS.c.organization_id == organization_id]
    if kind is not None:
        criteria.append(KEYS.c.kind == kind)
    if state == ACTIVE:
        criteria.append(or_(KEYS.c.expires_at.is_(None), KEYS.c.expires_at > now))
    elif state == EXPIRED:
        criteria.append(KEYS.c.expires_at <= now)
    if unused_since is not None:
        criteria.append(or_(KEYS.c.last_used.is_(None), KEYS.c.last_used < unused_since))
    if enabled is not None:
        criteria.append(KEYS.c.enabled == enabled)
    if identity is not None:
        criteria.append(KEYS.c.identity_id == identity)
    for name, value in (metadata or {}).items():
        member = select(METADATA.c.key_id).where(
            METADATA.c.organization_id == organization_id,
            METADATA.c.name == name,
            METADATA.c.value == value,
        )
        criteria.append(KEYS.c.id.in_(member))
    if outside_policy is not None:
        within: ColumnElement[bool] = true()
        if lifetime_days is not None:
            latest = now + timedelta(days=lifetime_days)
            within = and_(KEYS.c.expires_at.is_not(None), KEYS.c.expires_at <= latest)
        outside = false() if lifetime_days is None else not_(within)
        criteria.append(outside if outside_policy else within)
    return and_(*criteria)


def keys_page(
    organization_id: int,
    page: int,
    page_size: int,
    kind: str | None = None,
    state: str | None = None,
    unused_since: datetime | None = None,
    enabled: bool | None = None,
    metadata: dict[str, str] | None = None,
    outside_policy: bool | None = None,
    lifetime_days: int | None = None,
    identity: int | None = None,
) -> Page[Key]:
    """One page of the organization's keys, oldest first, ties by identifier: one total
    and one page query; a page past the end asks only for the total (nor sends an offset
    past 64 bits). Unfiltered (or by kind alone), the total is the stored count; filtered
    otherwise, count(*) over the index of the filtered column."""
    filtered = (state, unused_since, enabled, outside_policy, identity)
    if filtered == (None, None, None, None, None) and not metadata:
        parameters: dict[str, Any] = {"organization_id": organization_id, "kind": kind}
        ((total,),) = _TOTALS[kind is not None].rows(parameters)
        offset = (page - 1) * page_size
        data: list[Key] = []
        if offset < total:
            parameters |= {"offset": offset, "limit": page_size}
            query = _PAGES[kind is not None, offset >= DEEP_OFFSET]
            data = query.rows(parameters, key_of_columns)
        return Page(page, page_size, total, data)
    where = matching(
        organization_id,
        kind,
        state,
        unused_since,
        enabled,
        metadata,
        outside_policy,
        lifetime_days,
        identity,
    )
    in_order = KEY.where(where).order_by(*ORDER)
    return counted(KEYS, where, in_order, page, page_size, _key_rows)


def _key_rows(query: Select) -> list[Key]:
    return [key_of_columns(list(row)) for row in db.session.execute(query)]


def counted(
    table: Any,
    where: ColumnElement[bool],
    in_order: Select,
    page: int,
    page_size: int,
    read: Callable[[Select], list[T]],
) -> Page[T]:
    """A page of `in_order` whose total is count(*) of `table`'s rows `where` (through
    db.session); a page past the end asks only for the total (nor sends an offset past 64
    bits)."""
    total = db.session.scalar(select(func.count()).select_from(table).where(where))
    offset = (page - 1) * page_size
    data = read(in_order.offset(offset).limit(page_size)) if offset < total else []
    return Page(page, page_size, total, data)

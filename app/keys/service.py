"""The rules of the spec and the contract; the only code that writes keys.

Every function takes the organization explicitly (the caller's, or the operator's choice
in the CLI): no query runs without it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from flask import current_app
from marshmallow import ValidationError
from sqlalchemy import Select, bindparam, delete, func, select, update
from sqlalchemy.exc import IntegrityError

from app import keyformat
from app.auth import Caller
from app.errors import ApiError
from app.extensions import db
from app.models import ApiKey, KeyCount, Organization
from app.reads import Read
from app.scopes import CUSTOM, FIXED, SDK_INTEGRATION, TELEMETRY, exceeding, is_immutable, to_names
from app.timestamps import TICK, as_shown, from_iso, iso, utcnow

# The keys every new organization starts with: (name, kind).
STARTING_KEYS = (("Telemetry", TELEMETRY), ("SDK Integration", SDK_INTEGRATION))


class Key(NamedTuple):
    """A key as reads return it: the row, not an ORM object (cheaper to build, by half),
    with its times as shown (timestamps.iso)."""

    id: int
    identifier: str
    name: str
    kind: str
    scope_bits: int
    created: str
    updated: str
    last_used: str | None


class Page(NamedTuple):
    page: int
    page_size: int
    total_count: int
    data: list[Key]


# Reads are SQLAlchemy Core statements on the models' table, built once: no ORM objects,
# no statement construction per request (see bench/README.md).
_KEYS = ApiKey.__table__
_IN_ORGANIZATION = _KEYS.c.organization_id == bindparam("organization_id")
_TIMES = ("created", "updated", "last_used")
_KEY = select(
    *(
        as_shown(_KEYS.c[name]).label(name) if name in _TIMES else _KEYS.c[name]
        for name in Key._fields
    )
)
_BY_DIGEST = Read(_KEY.where(_KEYS.c.digest == bindparam("digest"), _IN_ORGANIZATION))
_BY_IDENTIFIER = Read(_KEY.where(_KEYS.c.identifier == bindparam("identifier"), _IN_ORGANIZATION))
_ORDER = (_KEYS.c.created, _KEYS.c.identifier)
_WITH_KIND = _KEYS.c.kind == bindparam("kind")
# The total of a page: one row per kind, kept by the database (models.KeyCount).
_COUNTED = KeyCount.__table__
_COUNT = select(func.coalesce(func.sum(_COUNTED.c.total), 0)).where(
    _COUNTED.c.organization_id == bindparam("organization_id")
)
_COUNTS = {False: Read(_COUNT), True: Read(_COUNT.where(_COUNTED.c.kind == bindparam("kind")))}


def _page(*criteria: Any, deep: bool) -> Select:
    """A page of keys in list order. A deep page takes its keys' ids from the listing
    index first, then reads those rows: what it skips are index entries, not table rows
    (half the time 25,000 keys in; a little more than the plain query near the start,
    hence both, bench/README.md)."""

    def in_order(*columns: Any) -> Select:
        query = select(*columns).where(*criteria).order_by(*_ORDER)
        return query.offset(bindparam("offset")).limit(bindparam("limit"))

    if not deep:
        return in_order(*_KEY.selected_columns)
    return _KEY.where(_KEYS.c.id.in_(in_order(_KEYS.c.id).scalar_subquery())).order_by(*_ORDER)


# Pages starting this far in skip their rows through the index alone.
DEEP_OFFSET = 1_000
_PAGES = {
    (kind, deep): Read(_page(*criteria, deep=deep))
    for kind, criteria in ((False, (_IN_ORGANIZATION,)), (True, (_IN_ORGANIZATION, _WITH_KIND)))
    for deep in (False, True)
}
_UPDATE = update(_KEYS).where(_KEYS.c.id == bindparam("key_id"))


class OrganizationError(Exception):
    """An operator's request about organizations that cannot be carried out."""


def _not_found() -> ApiError:
    return ApiError(404, "not_found", "No API key of your organization has this reference.")


def _scope_exceeds_caller(excess: int) -> ApiError:
    names = ", ".join(to_names(excess))
    return ApiError(
        403,
        "scope_exceeds_caller",
        f"These scopes exceed the calling key's own: {names}.",
        {"scopes": [f"Not held by the calling key: {names}."]},
    )


def _require_power_over(caller: Caller, key: Key) -> None:
    """A key may alter or revoke only keys whose scopes it holds all of."""
    if exceeding(key.scope_bits, caller.scope_bits):
        raise ApiError(403, "forbidden", "This key holds scopes the calling key lacks.")


def find_key(caller: Caller, reference: str) -> Key:
    """The caller's organization's key named by `reference` (its full value, identifier or
    `<identifier>...`); 404 for any other."""
    row = None
    organization_id = caller.organization_id
    if keyformat.is_full_key(reference):
        parameters = {"digest": keyformat.digest(reference), "organization_id": organization_id}
        row = _BY_DIGEST.first(parameters)
    else:
        identifier = reference.removesuffix(keyformat.SHOWN_SUFFIX)
        if keyformat.is_identifier(identifier):
            parameters = {"identifier": identifier, "organization_id": organization_id}
            row = _BY_IDENTIFIER.first(parameters)
    if row is None:
        raise _not_found()
    return Key._make(row)


def list_keys(caller: Caller, page: int, page_size: int, kind: str | None = None) -> Page:
    """One page, oldest first, ties by identifier: one count and one page query."""
    parameters: dict[str, Any] = {"organization_id": caller.organization_id, "kind": kind}
    ((total,),) = _COUNTS[kind is not None].rows(parameters)
    offset = (page - 1) * page_size
    data: list[Key] = []
    if offset < total:
        parameters |= {"offset": offset, "limit": page_size}
        query = _PAGES[kind is not None, offset >= DEEP_OFFSET]
        data = [Key._make(row) for row in query.rows(parameters)]
    return Page(page, page_size, total, data)


def _add_key(organization_id: int, name: str, kind: str, scope_bits: int) -> tuple[Key, str]:
    identifier, full_key = keyformat.new_key(current_app.config["KEY_PREFIX"])
    now = utcnow()
    key = ApiKey(
        organization_id=organization_id,
        identifier=identifier,
        digest=keyformat.digest(full_key),
        name=name,
        kind=kind,
        scope_bits=scope_bits,
        created=now,
        updated=now,
        last_used=None,
    )
    db.session.add(key)
    db.session.flush()  # its id
    shown = iso(now)
    return Key(key.id, identifier, name, kind, scope_bits, shown, shown, None), full_key


def create_key(caller: Caller, data: dict) -> tuple[Key, str]:
    """A new key in the caller's organization, within the caller's scopes."""
    excess = exceeding(data["scope_bits"], caller.scope_bits)
    if excess:
        raise _scope_exceeds_caller(excess)
    created = _add_key(caller.organization_id, data["name"], data["kind"], data["scope_bits"])
    db.session.commit()
    return created


def update_key(caller: Caller, key: Key, data: dict) -> Key:
    """Rename and/or rescope a key; refusals in the contract's order (422, 403, 409)."""
    if data.get("kind", key.kind) != key.kind:
        raise ValidationError("The kind of a key cannot be changed.", "kind")
    scope_bits = data.get("scope_bits", key.scope_bits)
    if key.kind == CUSTOM and not scope_bits:
        raise ValidationError("A custom key needs at least one scope.", "scopes")
    _require_power_over(caller, key)
    excess = exceeding(scope_bits, caller.scope_bits)
    if excess:
        raise _scope_exceeds_caller(excess)
    if is_immutable(key.kind) and scope_bits != key.scope_bits:
        raise ApiError(409, "immutable_key", f"The scopes of a {key.kind} key cannot change.")
    name = data.get("name", key.name)
    # Only what this request changes is written: a rename never writes back the scopes it
    # read, which another request may have narrowed meanwhile, nor a rescope the name.
    changes = {
        column: value
        for column, value in (("name", name), ("scope_bits", scope_bits))
        if value != getattr(key, column)
    }
    if changes:
        updated = max(utcnow(), from_iso(key.updated) + TICK)
        key = key._replace(**changes, updated=iso(updated))
        statement = _UPDATE.values(**changes, updated=updated)
        updated = db.session.execute(statement, {"key_id": key.id}).rowcount
        db.session.commit()
        if not updated:  # deleted by another request since it was read
            raise _not_found()
    return key


def delete_key(caller: Caller, key: Key) -> None:
    """Revoke a key at once and for good."""
    _require_power_over(caller, key)
    deleted = db.session.execute(delete(ApiKey).where(ApiKey.id == key.id)).rowcount
    db.session.commit()
    if not deleted:
        raise _not_found()


def create_organization(name: str) -> tuple[Organization, list[tuple[Key, str]]]:
    """A new organization with its two starting keys, written together or not at all."""
    organization = Organization(name=name, created=utcnow())
    db.session.add(organization)
    try:
        db.session.flush()
        keys = [
            _add_key(organization.id, key_name, kind, FIXED[kind])
            for key_name, kind in STARTING_KEYS
        ]
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise OrganizationError(f'an organization named "{name}" already exists') from None
    return organization, keys


def mint_key(organization_name: str, data: dict) -> tuple[Key, str]:
    """The operator's key: any kind and scopes, in an existing organization."""
    organization_id = db.session.scalar(
        select(Organization.id).where(Organization.name == organization_name)
    )
    if organization_id is None:
        raise OrganizationError(f'no organization is named "{organization_name}"')
    created = _add_key(organization_id, data["name"], data["kind"], data["scope_bits"])
    db.session.commit()
    return created


def has_organization() -> bool:
    """True once any organization exists."""
    return db.session.scalar(select(Organization.id).limit(1)) is not None

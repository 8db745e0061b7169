"""Every read the service makes, each behind a named function: the key a request presents,
a key of an organization, a page of keys with its total, an organization, the audit log;
and the read a write of a key decides from (locked_key). The writes are elsewhere: keys in
app/keys/service.py, events in app/audit.

The reads on a request's path (authentication, a key, an unfiltered list page and its
total, forward auth's organization name) are SQLAlchemy Core statements built once here
and run by app/storage/reads.py: no ORM objects, no statement built per request (the table of
tricks in bench/README.md). The rest (lists filtered by state or use, the operator's
lookups, the audit log) go through db.session.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from sqlalchemy import (
    ColumnElement,
    Text,
    bindparam,
    cast,
    func,
    or_,
    select,
    union_all,
)

from app.domain import bindings
from app.domain.credentials import NO_METADATA, Caller, Identity
from app.domain.timestamps import as_shown
from app.extensions import db
from app.storage.database import writing
from app.storage.identity_reads import IDENTITY_SHOWN, identity_shown
from app.storage.models import ApiKey, KeyCount, KeyMetadata, Organization, RetiredKey
from app.storage.models import Identity as IdentityRow
from app.storage.reads import Read

T = TypeVar("T")


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
    expires_at: str | None
    # The identifier of the key that made it (an imported key's shown form); None: the operator.
    created_by: str | None
    enabled: bool
    allowed_ips: list[str]
    rate_limit_requests: int | None
    rate_limit_seconds: int | None
    metadata: dict[str, str]
    replaced_by: str | None  # the identifier of its successor by rotation; None: not rotated
    quota_requests: int | None = None
    quota_period: str | None = None
    quota_counter: str | None = None  # whose count it spends (app/quotas); None: its own
    shown: str | None = None  # an imported key's shown form; None: `<identifier>...`
    identity_id: int | None = None  # the identity that holds it; None: none
    bound_by: list[list[Any]] = []  # noqa: RUF012 - its makers' limits (bindings.stored)
    identity: Identity | None = None  # as it shows the identity

    @property
    def counter(self) -> str:
        """The counter its own uses spend (bindings.lineage)."""
        return self.quota_counter or self.identifier

    @property
    def rate_limit(self) -> dict[str, int] | None:
        """Its own limit as the API shows it; None: none of its own."""
        if self.rate_limit_requests is None:
            return None
        return {"requests": self.rate_limit_requests, "seconds": self.rate_limit_seconds}

    @property
    def quota(self) -> dict[str, int | str] | None:
        """Its quota as the API shows it; None: none."""
        if self.quota_requests is None:
            return None
        return {"requests": self.quota_requests, "period": self.quota_period}


class Page(NamedTuple, Generic[T]):
    """A page of keys or of audit events, and how many there are in all."""

    page: int
    page_size: int
    total_count: int
    data: list[T]


class Holder(NamedTuple):
    """What authentication reads of the key a request presents."""

    caller: Caller
    last_used: datetime | None
    # Read only when asked for (`holder(digest, facts=True)`): what introspection and
    # forward auth answer beside the caller's facts; `created` as the database writes a
    # time as text.
    name: str | None = None
    created: str | None = None
    organization: str | None = None

    @property
    def expires_at(self) -> datetime | None:
        return self.caller.expires_at


KEYS = ApiKey.__table__
METADATA = KeyMetadata.__table__
COUNTED = KeyCount.__table__
_ORGANIZATIONS = Organization.__table__
_IDENTITIES = IdentityRow.__table__
_RETIRED = RetiredKey.__table__
# A key's row and its identity's, if any.
_WITH_IDENTITY = KEYS.outerjoin(_IDENTITIES, _IDENTITIES.c.id == KEYS.c.identity_id)
# What binds a key of the identity's limits.
_IDENTITY_LIMITS = (
    _IDENTITIES.c.rate_limit_requests,
    _IDENTITIES.c.rate_limit_seconds,
    _IDENTITIES.c.quota_requests,
    _IDENTITIES.c.quota_period,
)
IN_ORGANIZATION = KEYS.c.organization_id == bindparam("organization_id")
_TIMES = ("created", "updated", "last_used", "expires_at")
# A key's lists and objects, read as their text: decoded only when not empty (_document).
_AS_TEXT = ("allowed_ips", "metadata", "bound_by")


def _column(name: str) -> ColumnElement:
    """A key's column as reads take it: times as shown, lists and objects as text."""
    if name in _TIMES:
        return as_shown(KEYS.c[name]).label(name)
    if name in _AS_TEXT:
        return cast(KEYS.c[name], Text).label(name)
    return KEYS.c[name]


# A key's columns as reads take them, for a statement that returns a key (a DELETE's
# RETURNING): key_of_row() makes the Key.
KEY_COLUMNS = tuple(_column(name) for name in Key._fields[:-1])
KEY = select(*KEY_COLUMNS, *IDENTITY_SHOWN).select_from(_WITH_IDENTITY)
ORDER = (KEYS.c.created, KEYS.c.identifier)
_EMPTY = frozenset({"[]", "{}"})

# The caller's columns, through identity_id; then its makers' limits, its identity's
# (bound_by, identity), and the rest of what authentication reads.
_CALLER_COLUMNS = Caller._fields[: Caller._fields.index("bound_by")]
_OF_DIGEST = (
    select(
        *(
            cast(KEYS.c[name], Text) if name in _AS_TEXT else KEYS.c[name]
            for name in _CALLER_COLUMNS
        ),
        cast(KEYS.c.bound_by, Text),
        *IDENTITY_SHOWN,
        *_IDENTITY_LIMITS,
        KEYS.c.last_used,
    )
    .select_from(_WITH_IDENTITY)
    .where(KEYS.c.digest == bindparam("digest"))
)
_HOLDER = Read(_OF_DIGEST)
# Introspection and forward auth answer the key's name and creation, or its organization's
# name: read with it, not again after.
_HOLDER_WITH_FACTS = Read(
    _OF_DIGEST.add_columns(KEYS.c.name, cast(KEYS.c.created, Text), _ORGANIZATIONS.c.name).join(
        _ORGANIZATIONS, _ORGANIZATIONS.c.id == KEYS.c.organization_id
    )
)
_IPS, _METADATA_TEXT = (Caller._fields.index(name) for name in _AS_TEXT[:2])
_CALLER_FIELDS = len(_CALLER_COLUMNS)
_READ_AFTER = _CALLER_FIELDS + 1 + len(IDENTITY_SHOWN) + len(_IDENTITY_LIMITS)
_BY_DIGEST = Read(KEY.where(KEYS.c.digest == bindparam("digest"), IN_ORGANIZATION))
_OF_IDENTIFIER = KEY.where(KEYS.c.identifier == bindparam("identifier"), IN_ORGANIZATION)
_BY_IDENTIFIER = Read(_OF_IDENTIFIER)
# SQLite has no FOR UPDATE: its SQL leaves it out. The key's row alone is locked.
_LOCKED = _OF_IDENTIFIER.with_for_update(of=KEYS)


def holder(digest: bytes, facts: bool = False) -> Holder | None:
    """The key with this digest, in whichever organization: what authenticates; with
    `facts`, its name, creation and organization's name too."""
    row = (_HOLDER_WITH_FACTS if facts else _HOLDER).first({"digest": digest})
    if row is None:
        return None
    fields = list(row[:_CALLER_FIELDS])
    fields[_IPS] = _document(fields[_IPS], ())
    fields[_METADATA_TEXT] = _document(fields[_METADATA_TEXT], NO_METADATA)
    bound_by, public_id, external_id, *limits = row[_CALLER_FIELDS:_READ_AFTER]
    bound = bindings.makers(_document(bound_by, ()))
    identity = None
    if public_id is not None:
        identity = Identity(public_id, external_id)
        limited = bindings.Limited(bindings.identity_counter(public_id), *limits)
        if bindings.has_limits(limited):
            bound += (bindings.of_identity(limited),)
    return Holder(Caller(*fields, bound, identity), *row[_READ_AFTER:])


_KEY_IPS, _KEY_METADATA, _KEY_BOUND = (Key._fields.index(name) for name in _AS_TEXT)


def key_of_columns(fields: list[Any]) -> Key:
    """A key's values (read with _column, in a list of its own that this changes) as a Key:
    its lists and objects decoded, the empty ones without the JSON decoder (a page of 50
    spent a fifth of its time in it). Each its own [] and {}: whoever reads a key may
    change them."""
    ips, metadata, bound = fields[_KEY_IPS], fields[_KEY_METADATA], fields[_KEY_BOUND]
    fields[_KEY_IPS] = [] if ips == "[]" else json.loads(ips)
    fields[_KEY_METADATA] = {} if metadata == "{}" else json.loads(metadata)
    fields[_KEY_BOUND] = [] if bound == "[]" else json.loads(bound)
    public_id = fields[-2]  # then its identity's external id: one field, the identity
    fields[-2:] = (None if public_id is None else Identity(public_id, fields[-1]),)
    return Key._make(fields)


def key_of_row(row: Sequence[Any]) -> Key:
    """A Key from a row of KEY_COLUMNS (its identity read apart: a DELETE returns no join)."""
    fields = list(row)
    identity_id = fields[Key._fields.index("identity_id")]
    shown = (None, None) if identity_id is None else identity_shown(identity_id)
    return key_of_columns([*fields, *shown])


def _document(text: str, empty: Any) -> Any:
    """A JSON list or object read as text: `empty` for [] or {} (most keys, no policy),
    decoded otherwise. Both databases give the empty ones so: SQLite the stored text,
    PostgreSQL jsonb's text form."""
    return empty if text in _EMPTY else json.loads(text)


def key_by_digest(organization_id: int, digest: bytes) -> Key | None:
    return _BY_DIGEST.first({"digest": digest, "organization_id": organization_id}, key_of_columns)


def key_by_identifier(organization_id: int, identifier: str) -> Key | None:
    parameters = {"identifier": identifier, "organization_id": organization_id}
    return _BY_IDENTIFIER.first(parameters, key_of_columns)


_BY_SHOWN = KEY.where(KEYS.c.shown == bindparam("shown"), IN_ORGANIZATION).limit(3)


def keys_shown(organization_id: int, shown: str) -> list[Key]:
    """The organization's imported keys shown as `shown` (at most 3: one, or too many)."""
    parameters = {"shown": shown, "organization_id": organization_id}
    return [key_of_columns(list(row)) for row in db.session.execute(_BY_SHOWN, parameters)]


def known_digests(digests: Sequence[bytes]) -> set[bytes]:
    """Those of `digests` that a key of any organization has or had (a retired key's)."""
    query = union_all(
        select(KEYS.c.digest).where(KEYS.c.digest.in_(digests)),
        select(_RETIRED.c.digest).where(_RETIRED.c.digest.in_(digests)),
    )
    return {bytes(digest) for digest in db.session.scalars(query)}


def known_identifiers(identifiers: Sequence[str]) -> set[str]:
    """Those of `identifiers` that a key of any organization has or had (a retired key's)."""
    query = union_all(
        select(KEYS.c.identifier).where(KEYS.c.identifier.in_(identifiers)),
        select(_RETIRED.c.identifier).where(_RETIRED.c.identifier.in_(identifiers)),
    )
    return set(db.session.scalars(query))


def exported_keys(organization_id: int) -> list[tuple[Key, bytes]]:
    """Every key of the organization with its digest, in list order (the export)."""
    query = KEY.add_columns(KEYS.c.digest).where(KEYS.c.organization_id == organization_id)
    rows = db.session.execute(query.order_by(*ORDER))
    return [(key_of_columns(list(row[:-1])), bytes(row[-1])) for row in rows]


def locked_key(organization_id: int, identifier: str) -> Key | None:
    """The key as it is inside db.session's transaction, locked until that transaction
    ends: what a write of the key decides from (its caller's power over it, what it copies
    or records as before), since a read made before the transaction may be stale by then.

    PostgreSQL: SELECT ... FOR UPDATE; a concurrent write of the key waits for this
    transaction, and one holding the row first makes this read wait, then see its commit
    (READ COMMITTED, app/storage/database.py).

    SQLite has one writer per database and no FOR UPDATE: the transaction begins here with
    BEGIN IMMEDIATE (database.writing says why).
    """
    parameters = {"identifier": identifier, "organization_id": organization_id}
    row = writing().execute(_LOCKED, parameters).first()
    return None if row is None else key_of_columns(list(row))


_OF_LINEAGE = Read(
    KEY.where(
        IN_ORGANIZATION,
        or_(
            KEYS.c.identifier == bindparam("counter"),
            KEYS.c.quota_counter == bindparam("counter"),
        ),
        KEYS.c.replaced_by.is_(None),
    ).order_by(KEYS.c.created.desc())
)


def key_of_lineage(organization_id: int, counter: str) -> Key | None:
    """The newest key of the lineage whose counter is `counter` that is not replaced."""
    return _OF_LINEAGE.first(
        {"organization_id": organization_id, "counter": counter}, key_of_columns
    )


def keys_bound(organization_id: int, counter: str) -> list[tuple[str, list[list[Any]]]]:
    """The organization's keys whose makers' limits (bound_by) may name `counter`: each
    key's identifier and bound_by, for bindings.changed to tell."""
    query = select(KEYS.c.identifier, KEYS.c.bound_by).where(
        KEYS.c.organization_id == organization_id,
        cast(KEYS.c.bound_by, Text).contains(counter, autoescape=True),
    )
    return [(identifier, bound_by) for identifier, bound_by in db.session.execute(query)]


def organization_id(name: str) -> int | None:
    return db.session.scalar(select(Organization.id).where(Organization.name == name))


def organizations() -> list[tuple[str, datetime, int]]:
    """Every organization's name, creation time and number of keys, by name (in code point
    order, whatever the database's collation)."""
    keys = func.coalesce(func.sum(KeyCount.total), 0)
    query = (
        select(Organization.name, Organization.created, keys)
        .outerjoin(KeyCount, KeyCount.organization_id == Organization.id)
        .group_by(Organization.id, Organization.name, Organization.created)
    )
    return sorted((name, created, total) for name, created, total in db.session.execute(query))


def has_organization() -> bool:
    """True once any organization exists; reads a real table, so that the health check
    does not call a database without its schema healthy."""
    return db.session.scalar(select(Organization.id).limit(1)) is not None

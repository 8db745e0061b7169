"""The reads of an identity that a key's reads and writes make: which identity a reference
names (held until the write's commit when a key is written with it), how a key shows it,
and its quota. The identities' own service (app/identities/service.py) reads the rest."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import bindparam, select

from app.domain.credentials import Identity
from app.storage import database
from app.storage.models import Identity as IdentityRow
from app.storage.reads import Read

_IDENTITIES = IdentityRow.__table__
# What a key shows of its identity.
IDENTITY_SHOWN = (_IDENTITIES.c.public_id, _IDENTITIES.c.external_id)


class HeldBy(NamedTuple):
    """The identity that holds a key: its row's id, and how a key shows it."""

    row_id: int
    shown: Identity


_IDENTITY_REFERENCE = select(_IDENTITIES.c.id, *IDENTITY_SHOWN).where(
    _IDENTITIES.c.organization_id == bindparam("organization_id")
)
_NAMED_BY = (
    _IDENTITY_REFERENCE.where(_IDENTITIES.c.public_id == bindparam("reference")),
    _IDENTITY_REFERENCE.where(_IDENTITIES.c.external_id == bindparam("reference")),
)
_IDENTITY_NAMED = tuple(Read(statement) for statement in _NAMED_BY)
_IDENTITY_HELD = tuple(
    statement.with_for_update(read=True, key_share=True) for statement in _NAMED_BY
)


def identity_named(organization_id: int, reference: str, lock: bool = False) -> HeldBy | None:
    """The organization's identity whose id is `reference`, or else whose external id is.
    `lock`: read in db.session's write transaction (database.writing()) and held there until it
    ends, for a key about to be written with it: PostgreSQL's FOR KEY SHARE, which the
    identity's delete (FOR UPDATE) waits for, and which waits for a delete under way, then
    finds nothing; on SQLite, the write lock, taken before the read."""
    parameters = {"organization_id": organization_id, "reference": reference}
    for read, held in zip(_IDENTITY_NAMED, _IDENTITY_HELD, strict=True):
        if lock:
            row = database.writing().execute(held, parameters).first()
        else:
            row = read.first(parameters)
        if row is not None:
            return HeldBy(row[0], Identity(row[1], row[2]))
    return None


_IDENTITY_BY_ID = Read(select(*IDENTITY_SHOWN).where(_IDENTITIES.c.id == bindparam("id")))


def identity_shown(identity_id: int) -> tuple[str, str]:
    """An identity's id and external id, by its row's id."""
    return _IDENTITY_BY_ID.first({"id": identity_id}, tuple)


_IDENTITY_QUOTA = Read(
    select(_IDENTITIES.c.public_id, _IDENTITIES.c.quota_requests, _IDENTITIES.c.quota_period).where(
        _IDENTITIES.c.id == bindparam("id")
    )
)


def identity_quota(identity_id: int) -> tuple[str, int | None, str | None] | None:
    """An identity's id and quota (requests, period; None: none), by its row's id; None
    for no such identity."""
    return _IDENTITY_QUOTA.first({"id": identity_id}, tuple)

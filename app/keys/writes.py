"""How a key's row is written: a new key with its key.created event (add_key), its
metadata's index, its policy as columns, and the statements that change or delete a row.
app/keys/service.py decides whether a write may happen (the rules), app/keys/operator.py
what the operator writes; both write through here.

Writes (and their locked reads) name a key by its identifier, never by its id: SQLite gives
a deleted row's id to the next key made, so a write meant for a key another request has
just deleted (or rotated) would land on that request's new key.

A key's row leaves the table through remove_key (or, for a leak report, retire): its
identifier and digest stay behind in models.RetiredKey, in the same transaction, and no
key is given either again, neither a new key (add_key draws again) nor an import
(queries.known_identifiers and known_digests read both tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from flask import current_app
from sqlalchemy import bindparam, delete, insert, update

from app import audit
from app.domain import bindings, keyformat
from app.domain.bindings import Bound
from app.domain.credentials import Caller
from app.domain.scopes import to_names
from app.domain.timestamps import iso, utcnow
from app.extensions import db
from app.keys.bodies import dump_key
from app.storage import queries
from app.storage.identity_reads import HeldBy
from app.storage.models import ApiKey, KeyMetadata, RetiredKey
from app.storage.queries import Key

KEYS = ApiKey.__table__
UPDATE = update(KEYS).where(KEYS.c.identifier == bindparam("key"))
_METADATA = KeyMetadata.__table__
_INSERT_KEY = insert(KEYS).returning(KEYS.c.id)
_RETIRED = RetiredKey.__table__
_REMOVE = (
    delete(KEYS)
    .where(KEYS.c.identifier == bindparam("key"))
    .returning(KEYS.c.identifier, KEYS.c.digest, KEYS.c.organization_id)
)


def retire(gone: Sequence[tuple[str, bytes, int]]) -> None:
    """Keys whose rows were just deleted in the session's transaction (identifier, digest,
    organization's id each), kept as retired in that transaction."""
    if gone:
        now = utcnow()
        rows = [
            {"identifier": identifier, "digest": digest, "organization_id": org, "retired_at": now}
            for identifier, digest, org in gone
        ]
        db.session.execute(insert(_RETIRED), rows)


def remove_key(identifier: str) -> None:
    """The key's row deleted, its identifier and digest kept as retired (retire)."""
    retire(db.session.execute(_REMOVE, {"key": identifier}).all())


class Imported(NamedTuple):
    """A key made elsewhere, as an import writes it (app/keys/imports.py): its identifier,
    digest and shown form (None: `<identifier>...`), and when it was made and last used."""

    identifier: str
    digest: bytes
    shown: str | None
    created: datetime
    last_used: datetime | None


def rate_limit_columns(data: dict | None) -> dict[str, int | None]:
    """A rate_limit as its columns."""
    data = data or {}
    return {
        "rate_limit_requests": data.get("requests"),
        "rate_limit_seconds": data.get("seconds"),
    }


def quota_columns(data: dict | None) -> dict[str, int | str | None]:
    """A quota as its columns."""
    data = data or {}
    return {"quota_requests": data.get("requests"), "quota_period": data.get("period")}


def write_metadata(
    organization_id: int, key_id: int, metadata: dict[str, str], fresh: bool = False
) -> None:
    """The index of a key's metadata (models.KeyMetadata), as `metadata` says (`fresh`: a
    new key, which has none yet)."""
    if not fresh:
        db.session.execute(delete(_METADATA).where(_METADATA.c.key_id == key_id))
    if metadata:
        rows = [
            {"key_id": key_id, "organization_id": organization_id, "name": name, "value": value}
            for name, value in metadata.items()
        ]
        db.session.execute(insert(_METADATA), rows)


def add_key(
    organization_id: int,
    name: str,
    kind: str,
    scope_bits: int,
    actor: str,
    expires_at: datetime | None = None,
    created_by: str | None = None,
    allowed_ips: Sequence[str] = (),
    rate_limit: dict | None = None,
    metadata: dict[str, str] | None = None,
    enabled: bool = True,
    quota: dict | None = None,
    quota_counter: str | None = None,
    actor_key: Caller | None = None,
    identity: HeldBy | None = None,
    bound_by: Sequence[Bound] = (),
    imported: Imported | None = None,
) -> tuple[Key, str]:
    """A new key in the session's transaction, with its key.created event (`actor_key`:
    the key that made it; None: the operator); with limits, counted under `quota_counter`
    (a predecessor's: its counts go on) or its own; held by `identity`, and bound by the
    limits `bound_by` of the keys that made it (app/domain/bindings.py). An `imported` key
    is written as it was made elsewhere, with its key.imported event, and no full key
    returned ("")."""
    allowed_ips, metadata = list(allowed_ips), dict(metadata or {})
    limit = rate_limit_columns(rate_limit) | quota_columns(quota) | {"quota_counter": quota_counter}
    limit |= {
        "identity_id": None if identity is None else identity.row_id,
        "bound_by": bindings.stored(bound_by),
    }
    if imported is None:
        identifier, full_key = keyformat.new_key(current_app.config["KEY_PREFIX"])
        while queries.known_identifiers([identifier]):  # given before: 71 random bits apart
            identifier, full_key = keyformat.new_key(current_app.config["KEY_PREFIX"])
        now = utcnow()
        made_as = (identifier, keyformat.digest(full_key), None, now, None)
        action = "key.created"
    else:
        full_key, made_as, action = "", imported, "key.imported"
    identifier, key_digest, shown_as, now, last_used = made_as
    row = {
        "organization_id": organization_id,
        "identifier": identifier,
        "digest": key_digest,
        "shown": shown_as,
        "name": name,
        "kind": kind,
        "scope_bits": scope_bits,
        "created": now,
        "updated": now,
        "last_used": last_used,
        "expires_at": expires_at,
        "created_by": created_by,
        "enabled": enabled,
        "allowed_ips": allowed_ips,
        "metadata": metadata,
        "replaced_by": None,
        **limit,
    }
    # A Core INSERT, not the ORM's unit of work: a SQLite write holds the database's one
    # write lock from its first statement to its commit (bench/README.md, the writes).
    key_id = db.session.execute(_INSERT_KEY, row).scalar_one()
    if metadata:
        write_metadata(organization_id, key_id, metadata, fresh=True)
    shown = iso(now)
    expiry = None if expires_at is None else iso(expires_at)
    # The key as reads give it (queries.Key): its row, with its times as shown.
    used = None if last_used is None else iso(last_used)
    fields = row | {
        "id": key_id,
        "created": shown,
        "updated": shown,
        "expires_at": expiry,
        "last_used": used,
        "identity": None if identity is None else identity.shown,
    }
    made = Key(**{field: fields[field] for field in Key._fields})
    audit.record(
        action,
        organization_id=organization_id,
        actor=actor,
        target=identifier,
        actor_key=actor_key,
        target_key=made,
        details={
            "name": name,
            "kind": kind,
            "scopes": list(to_names(scope_bits)),
            "expires_at": expiry,
            "enabled": enabled,
            "allowed_ips": allowed_ips,
            "rate_limit": rate_limit,
            "metadata": metadata,
            "quota": quota,
            **({} if identity is None else {"identity": identity.shown.external_id}),
        },
        key=dump_key(made),
    )
    return made, full_key

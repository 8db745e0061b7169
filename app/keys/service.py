"""The rules of the spec and the contract; the only code that changes keys (a use's
`last_used` is app/auth.py's). Its reads are app/queries.py's.

Every function takes the organization explicitly (the caller's, or the operator's choice
in the CLI): no query runs without it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import bindparam, delete, insert, update
from sqlalchemy.exc import IntegrityError

from app import audit, keyformat, queries, usage_counter
from app.credentials import Caller
from app.errors import ApiError, invalid
from app.extensions import db
from app.keys.schemas import dump_key
from app.models import ApiKey, KeyMetadata, Organization
from app.queries import Key, Page
from app.scopes import (
    FIXED,
    SDK_INTEGRATION,
    TELEMETRY,
    exceeding,
    is_immutable,
    misfit,
    to_names,
)
from app.timestamps import TICK, from_iso, iso, utcnow

# The keys every new organization starts with: (name, kind).
STARTING_KEYS = (("Telemetry", TELEMETRY), ("SDK Integration", SDK_INTEGRATION))

# Writes (and their locked reads) name a key by its identifier, never by its id: SQLite
# gives a deleted row's id to the next key made, so a write meant for a key another request
# has just deleted (or rotated) would land on that request's new key.
_KEYS = ApiKey.__table__
_UPDATE = update(_KEYS).where(_KEYS.c.identifier == bindparam("key"))
_DELETE = delete(_KEYS).where(_KEYS.c.identifier == bindparam("key"))
_METADATA = KeyMetadata.__table__
_INSERT_KEY = insert(ApiKey.__table__).returning(ApiKey.__table__.c.id)


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
        raise usage_counter.refused(
            caller, ApiError(403, "forbidden", "This key holds scopes the calling key lacks.")
        )


def _exceeds_caller(field: str, message: str) -> ApiError:
    return ApiError(403, "exceeds_caller", message, {field: [message]})


def _inside(entries: Sequence[str], own: Sequence[str]) -> bool:
    """Whether every network of `entries` lies inside one of `own`."""
    networks = [ipaddress.ip_network(network) for network in own]
    return all(
        any(entry.version == mine.version and entry.subnet_of(mine) for mine in networks)
        for entry in map(ipaddress.ip_network, entries)
    )


def _within_caller(caller: Caller, data: dict) -> None:
    """A key gets no place or time beyond its caller's, in what a body names (CONTRACT.md
    section 15): 403 `exceeds_caller`."""
    if caller.allowed_ips and "allowed_ips" in data:
        entries = data["allowed_ips"]
        if not entries or not _inside(entries, caller.allowed_ips):
            raise _exceeds_caller(
                "allowed_ips",
                "The calling key is limited to some addresses: a key it makes or changes "
                "must be limited to addresses inside them.",
            )
    if caller.expires_at is not None and "expires_at" in data:
        expires_at = data["expires_at"]
        if expires_at is None or expires_at > caller.expires_at:
            raise _exceeds_caller(
                "expires_at",
                f"The calling key expires at {iso(caller.expires_at)}: a key it makes or "
                "changes must expire no later.",
            )


def _earlier(one: datetime | None, other: datetime | None) -> datetime | None:
    """The earlier of two ends, where None is never."""
    if one is None or other is None:
        return other if one is None else one
    return min(one, other)


def _rate_limit(data: dict | None) -> dict[str, int | None]:
    """A rate_limit as its columns."""
    data = data or {}
    return {
        "rate_limit_requests": data.get("requests"),
        "rate_limit_seconds": data.get("seconds"),
    }


def _write_metadata(
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


def _already_rotated(key: Key, why: str) -> ApiError:
    successor = keyformat.shown(key.replaced_by or "")
    return ApiError(409, "already_rotated", f"This key was replaced by {successor}: {why}")


@contextmanager
def _locked(caller: Caller, key: Key) -> Iterator[Key]:
    """`key` as it is now, locked in this write's transaction (queries.locked_key): what
    the write decides from, not the view's read of it (find_key), which another request
    may have made stale since; 404 when it was deleted meanwhile. A refusal ends the
    transaction, and with it the lock."""
    try:
        current = queries.locked_key(caller.organization_id, key.identifier)
        if current is None:
            raise _not_found()
        yield current
    except BaseException:
        db.session.rollback()
        raise


def find_key(caller: Caller, reference: str) -> Key:
    """The caller's organization's key named by `reference` (its full value, identifier or
    `<identifier>...`); 404 for any other."""
    key = None
    if keyformat.is_full_key(reference):
        key = queries.key_by_digest(caller.organization_id, keyformat.digest(reference))
    else:
        identifier = reference.removesuffix(keyformat.SHOWN_SUFFIX)
        if keyformat.is_identifier(identifier):
            key = queries.key_by_identifier(caller.organization_id, identifier)
    if key is None:
        raise _not_found()
    return key


def list_keys(caller: Caller, page: int, page_size: int, **filters: Any) -> Page[Key]:
    """One page of the caller's organization's keys (`filters`: kind, state, unused_since,
    as queries.keys_page takes them)."""
    return queries.keys_page(caller.organization_id, page, page_size, **filters)


def _add_key(
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
) -> tuple[Key, str]:
    """A new key in the session's transaction, with its key.created event."""
    allowed_ips, metadata = list(allowed_ips), dict(metadata or {})
    limit = _rate_limit(rate_limit)
    identifier, full_key = keyformat.new_key(current_app.config["KEY_PREFIX"])
    now = utcnow()
    row = {
        "organization_id": organization_id,
        "identifier": identifier,
        "digest": keyformat.digest(full_key),
        "name": name,
        "kind": kind,
        "scope_bits": scope_bits,
        "created": now,
        "updated": now,
        "last_used": None,
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
        _write_metadata(organization_id, key_id, metadata, fresh=True)
    shown = iso(now)
    expiry = None if expires_at is None else iso(expires_at)
    made = Key(
        id=key_id,
        identifier=identifier,
        name=name,
        kind=kind,
        scope_bits=scope_bits,
        created=shown,
        updated=shown,
        last_used=None,
        expires_at=expiry,
        created_by=created_by,
        enabled=enabled,
        allowed_ips=allowed_ips,
        metadata=metadata,
        replaced_by=None,
        **limit,
    )
    audit.record(
        "key.created",
        organization_id=organization_id,
        actor=actor,
        target=identifier,
        details={
            "name": name,
            "kind": kind,
            "scopes": list(to_names(scope_bits)),
            "expires_at": expiry,
            "enabled": enabled,
            "allowed_ips": allowed_ips,
            "rate_limit": rate_limit,
            "metadata": metadata,
        },
        key=dump_key(made),
    )
    return made, full_key


def create_key(caller: Caller, data: dict) -> tuple[Key, str]:
    """A new key in the caller's organization, within the caller's scopes, place and time;
    where it names no place or time, the caller's."""
    excess = exceeding(data["scope_bits"], caller.scope_bits)
    if excess:
        raise usage_counter.refused(caller, _scope_exceeds_caller(excess))
    _within_caller(caller, data)
    created = _add_key(
        caller.organization_id,
        data["name"],
        data["kind"],
        data["scope_bits"],
        actor=audit.actor_of(caller),
        expires_at=data.get("expires_at", caller.expires_at),
        created_by=caller.identifier,
        allowed_ips=data.get("allowed_ips", caller.allowed_ips),
        rate_limit=data.get("rate_limit"),
        metadata=data.get("metadata"),
        enabled=data.get("enabled", True),
    )
    db.session.commit()
    return created


def update_key(caller: Caller, key: Key, data: dict) -> Key:
    """Rename, rescope and/or set the expiry of a key, as it is inside this transaction;
    refusals in the contract's order (422, 403, 409)."""
    with _locked(caller, key) as key:
        if data.get("kind", key.kind) != key.kind:
            raise invalid({"kind": ["The kind of a key cannot be changed."]})
        scope_bits = data.get("scope_bits", key.scope_bits)
        # A fixed kind's scopes are refused below, as immutable (409).
        if not is_immutable(key.kind) and (problem := misfit(key.kind, scope_bits)):
            raise invalid({"scopes": [problem]})
        _require_power_over(caller, key)
        excess = exceeding(scope_bits, caller.scope_bits)
        if excess:
            raise usage_counter.refused(caller, _scope_exceeds_caller(excess))
        _within_caller(caller, data)
        if is_immutable(key.kind) and scope_bits != key.scope_bits:
            raise ApiError(409, "immutable_key", f"The scopes of {key.kind} keys cannot change.")
        if key.replaced_by is not None and "expires_at" in data:
            ends = data["expires_at"]
            if ends is None or key.expires_at is None or ends > from_iso(key.expires_at):
                raise _already_rotated(key, "its end can be brought earlier, not later.")
        # Only what this request changes is written, each field with its value before.
        changes: dict[str, Any] = {}
        details: dict[str, list] = {}
        if data.get("name", key.name) != key.name:
            changes["name"] = data["name"]
            details["name"] = [key.name, data["name"]]
        if scope_bits != key.scope_bits:
            changes["scope_bits"] = scope_bits
            details["scopes"] = [list(to_names(key.scope_bits)), list(to_names(scope_bits))]
        if "expires_at" in data:
            expiry = None if data["expires_at"] is None else iso(data["expires_at"])
            if expiry != key.expires_at:
                changes["expires_at"] = data["expires_at"]
                details["expires_at"] = [key.expires_at, expiry]
        shown = {"expires_at": details["expires_at"][1]} if "expires_at" in details else {}
        for field in ("enabled", "allowed_ips", "metadata"):
            if data.get(field, getattr(key, field)) != getattr(key, field):
                changes[field] = shown[field] = data[field]
                details[field] = [getattr(key, field), data[field]]
        if "rate_limit" in data:
            before = key.rate_limit
            if data["rate_limit"] != before:
                limit = _rate_limit(data["rate_limit"])
                changes |= limit
                shown |= limit
                details["rate_limit"] = [before, data["rate_limit"]]
        if "metadata" in changes:
            _write_metadata(caller.organization_id, key.id, changes["metadata"])
        if changes:
            updated = max(utcnow(), from_iso(key.updated) + TICK)
            key = key._replace(**(changes | shown), updated=iso(updated))
            statement = _UPDATE.values(**changes, updated=updated)
            db.session.execute(statement, {"key": key.identifier})
            audit.record(
                "key.updated",
                organization_id=caller.organization_id,
                actor=audit.actor_of(caller),
                target=key.identifier,
                details=details,
                key=dump_key(key),
            )
        db.session.commit()
    return key


def delete_key(caller: Caller, key: Key) -> None:
    """Revoke a key at once and for good."""
    with _locked(caller, key) as key:
        _require_power_over(caller, key)
        db.session.execute(_DELETE, {"key": key.identifier})
        audit.record(
            "key.deleted",
            organization_id=caller.organization_id,
            actor=audit.actor_of(caller),
            target=key.identifier,
            key=dump_key(key),
        )
        db.session.commit()


def revoke_leaked(keys: list[str]) -> None:
    """Delete every key of `keys` that exists, whoever holds it, as reported leaked (holding
    a key is the right to end it); each one recorded as revoked by a leak report. Nothing
    says which existed."""
    for full_key in dict.fromkeys(keys):  # each key once
        if not keyformat.is_full_key(full_key):
            continue
        statement = (
            delete(_KEYS)
            .where(_KEYS.c.digest == keyformat.digest(full_key))
            .returning(_KEYS.c.organization_id, *queries.KEY_COLUMNS)
        )
        for organization_id, *row in db.session.execute(statement):
            key = queries.key_of_row(row)
            audit.record(
                "key.revoked",
                organization_id=organization_id,
                actor=audit.LEAK_REPORT,
                target=key.identifier,
                key=dump_key(key),
            )
    db.session.commit()


def rotate_key(caller: Caller, key: Key, data: dict) -> tuple[Key, str]:
    """A replacement with the key's name, kind, scopes and policy (enabled anew) as they
    are inside this transaction, and the old key's end (deleted now, or expiring after
    `grace_seconds` and naming its successor in `replaced_by`), written together or not at
    all. A second rotation of the same key waits for this one's lock, then finds it gone
    (404) or replaced (409 `already_rotated`), so that one rotation wins, whatever the
    grace. The replacement expires when the body says (null: never), else when the old key
    would have, if that is still ahead (a time-limited key never becomes permanent by a
    routine rotation, CONTRACT.md section 9), and never after a caller that expires."""
    with _locked(caller, key) as key:
        _require_power_over(caller, key)
        _within_caller(caller, data)
        if key.replaced_by is not None:
            raise _already_rotated(key, "rotate its successor instead.")
        now = utcnow()
        ends = None if key.expires_at is None else from_iso(key.expires_at)
        expires_at = data.get("expires_at", ends if ends is not None and ends > now else None)
        if "expires_at" not in data:
            expires_at = _earlier(expires_at, caller.expires_at)
        # Its addresses, where they lie inside the caller's; else the caller's.
        allowed_ips = key.allowed_ips
        if caller.allowed_ips and not (allowed_ips and _inside(allowed_ips, caller.allowed_ips)):
            allowed_ips = list(caller.allowed_ips)
        grace = data.get("grace_seconds", 0)
        if grace == 0:
            db.session.execute(_DELETE, {"key": key.identifier})
        actor = audit.actor_of(caller)
        replacement = _add_key(
            caller.organization_id,
            key.name,
            key.kind,
            key.scope_bits,
            actor=actor,
            expires_at=expires_at,
            created_by=caller.identifier,
            allowed_ips=allowed_ips,
            rate_limit=key.rate_limit,
            metadata=key.metadata,
        )
        if grace:
            until = now + timedelta(seconds=grace)
            sooner = until if ends is None else min(ends, until)
            old = {"expires_at": sooner, "replaced_by": replacement[0].identifier}
            db.session.execute(_UPDATE.values(**old), {"key": key.identifier})
            key = key._replace(expires_at=iso(sooner), replaced_by=old["replaced_by"])
        audit.record(
            "key.rotated",
            organization_id=caller.organization_id,
            actor=actor,
            target=key.identifier,
            details={
                "replacement": keyformat.shown(replacement[0].identifier),
                "grace_seconds": grace,
            },
            key=dump_key(key),
        )
        db.session.commit()
    return replacement


def create_organization(name: str) -> tuple[Organization, list[tuple[Key, str]]]:
    """A new organization with its two starting keys, written together or not at all."""
    organization = Organization(name=name, created=utcnow())
    db.session.add(organization)
    try:
        db.session.flush()
        keys = [
            _add_key(organization.id, key_name, kind, FIXED[kind], actor=audit.OPERATOR)
            for key_name, kind in STARTING_KEYS
        ]
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise OrganizationError(f'an organization named "{name}" already exists') from None
    return organization, keys


def mint_key(organization_name: str, data: dict) -> tuple[Key, str]:
    """The operator's key: any kind and scopes, in an existing organization."""
    organization_id = queries.organization_id(organization_name)
    if organization_id is None:
        raise OrganizationError(f'no organization is named "{organization_name}"')
    created = _add_key(
        organization_id,
        data["name"],
        data["kind"],
        data["scope_bits"],
        actor=audit.OPERATOR,
        expires_at=data.get("expires_at"),
    )
    db.session.commit()
    return created

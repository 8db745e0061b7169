"""The rules of the spec and the contract; the only code that changes keys (a use's
`last_used` is app/auth.py's). Its reads are app/queries.py's.

Every function takes the organization explicitly (the caller's, or the operator's choice
in the CLI): no query runs without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import bindparam, delete, update
from sqlalchemy.exc import IntegrityError

from app import audit, keyformat, queries
from app.credentials import Caller
from app.errors import ApiError, invalid
from app.extensions import db
from app.models import ApiKey, Organization
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
) -> tuple[Key, str]:
    """A new key in the session's transaction, with its key.created event."""
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
        expires_at=expires_at,
        created_by=created_by,
    )
    db.session.add(key)
    db.session.flush()  # its id
    shown = iso(now)
    expiry = None if expires_at is None else iso(expires_at)
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
        },
    )
    made = Key(key.id, identifier, name, kind, scope_bits, shown, shown, None, expiry, created_by)
    return made, full_key


def create_key(caller: Caller, data: dict) -> tuple[Key, str]:
    """A new key in the caller's organization, within the caller's scopes."""
    excess = exceeding(data["scope_bits"], caller.scope_bits)
    if excess:
        raise _scope_exceeds_caller(excess)
    created = _add_key(
        caller.organization_id,
        data["name"],
        data["kind"],
        data["scope_bits"],
        actor=audit.actor_of(caller),
        expires_at=data.get("expires_at"),
        created_by=caller.identifier,
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
            raise _scope_exceeds_caller(excess)
        if is_immutable(key.kind) and scope_bits != key.scope_bits:
            raise ApiError(409, "immutable_key", f"The scopes of {key.kind} keys cannot change.")
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
        if changes:
            updated = max(utcnow(), from_iso(key.updated) + TICK)
            shown = {"expires_at": details["expires_at"][1]} if "expires_at" in details else {}
            key = key._replace(**(changes | shown), updated=iso(updated))
            statement = _UPDATE.values(**changes, updated=updated)
            db.session.execute(statement, {"key": key.identifier})
            audit.record(
                "key.updated",
                organization_id=caller.organization_id,
                actor=audit.actor_of(caller),
                target=key.identifier,
                details=details,
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
            delete(ApiKey)
            .where(ApiKey.digest == keyformat.digest(full_key))
            .returning(ApiKey.organization_id, ApiKey.identifier)
        )
        for organization_id, identifier in db.session.execute(statement):
            audit.record(
                "key.revoked",
                organization_id=organization_id,
                actor=audit.LEAK_REPORT,
                target=identifier,
            )
    db.session.commit()


def rotate_key(caller: Caller, key: Key, data: dict) -> tuple[Key, str]:
    """A replacement with the key's name, kind and scopes as they are inside this
    transaction, and the old key's end (deleted now, or expiring after `grace_seconds`),
    written together or not at all. A second rotation of the same key waits for this one's
    lock, then finds it gone (404) or expiring, so a grace-0 rotation never leaves two
    replacements. The replacement expires when the body says (null: never), else when the
    old key would have, if that is still ahead: a time-limited key never becomes permanent
    by a routine rotation (CONTRACT.md section 9)."""
    with _locked(caller, key) as key:
        _require_power_over(caller, key)
        now = utcnow()
        ends = None if key.expires_at is None else from_iso(key.expires_at)
        grace = data.get("grace_seconds", 0)
        if grace == 0:
            db.session.execute(_DELETE, {"key": key.identifier})
        else:
            until = now + timedelta(seconds=grace)
            sooner = until if ends is None else min(ends, until)
            db.session.execute(_UPDATE.values(expires_at=sooner), {"key": key.identifier})
        actor = audit.actor_of(caller)
        replacement = _add_key(
            caller.organization_id,
            key.name,
            key.kind,
            key.scope_bits,
            actor=actor,
            expires_at=data.get("expires_at", ends if ends is not None and ends > now else None),
            created_by=caller.identifier,
        )
        audit.record(
            "key.rotated",
            organization_id=caller.organization_id,
            actor=actor,
            target=key.identifier,
            details={
                "replacement": keyformat.shown(replacement[0].identifier),
                "grace_seconds": grace,
            },
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

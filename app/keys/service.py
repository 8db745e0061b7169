"""The rules of the spec and of docs/design.md for a key's every change by a key: create, update,
rotate, delete, a leak report, a quota grant. Its reads are app/storage/queries.py's, its writes
app/keys/writes.py's; what the operator does is app/keys/operator.py's (a use's
`last_used` is app/access/auth.py's).

Every function takes the organization explicitly (the caller's, or the operator's choice
in the CLI): no query runs without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from flask import current_app

from app import audit
from app.domain import bindings, keyformat, reach
from app.domain.credentials import Caller, Identity
from app.domain.scopes import is_immutable, misfit, to_names
from app.domain.timestamps import TICK, from_iso, iso, utcnow
from app.extensions import db
from app.http.errors import ApiError, invalid
from app.keys import bounds
from app.keys.bodies import dump_key
from app.keys.writes import (
    UPDATE,
    add_key,
    quota_columns,
    rate_limit_columns,
    remove_key,
    write_metadata,
)
from app.organizations import policy as organization_policy
from app.quotas import service as quotas
from app.storage import identity_reads, pages, queries
from app.storage.identity_reads import HeldBy
from app.storage.queries import Key, Page


def _not_found() -> ApiError:
    return ApiError(404, "not_found", "No API key of your organization has this reference.")


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
        if current is None or not reach.of(caller).sees(current.identity_id):
            raise _not_found()
        yield current
    except BaseException:
        db.session.rollback()
        raise


def _by_shown(organization_id: int, shown: str) -> Key | None:
    """The organization's imported key shown as `shown`; None for none; 409
    `ambiguous_key`, naming each by its identifier, when several are shown so (keys of one
    format that begin alike)."""
    keys = queries.keys_shown(organization_id, shown)
    if len(keys) > 1:
        names = ", ".join(keyformat.shown(key.identifier) for key in keys)
        raise ApiError(
            409,
            "ambiguous_key",
            f"Several keys of your organization are shown as {shown}: name one by its "
            f"identifier ({names}), or by its full value.",
        )
    return keys[0] if keys else None


def key_named(organization_id: int, reference: str) -> Key | None:
    """The organization's key named by `reference`: its full value (made here, or made
    elsewhere and imported), its identifier, `<identifier>...`, or an imported key's shown
    form; None for any other."""
    if keyformat.is_full_key(reference):
        return queries.key_by_digest(organization_id, keyformat.digest(reference))
    identifier = reference.removesuffix(keyformat.SHOWN_SUFFIX)
    if keyformat.is_identifier(identifier):
        key = queries.key_by_identifier(organization_id, identifier)
        if key is not None:
            return key
    if reference.endswith(keyformat.SHOWN_SUFFIX) or reference.startswith(keyformat.SHOWN_DIGEST):
        key = _by_shown(organization_id, reference)
        if key is not None:
            return key
    if keyformat.is_foreign_key(reference, current_app.config["KEY_PREFIX"]):
        return queries.key_by_digest(organization_id, keyformat.digest(reference))
    return None


def find_key(caller: Caller, reference: str) -> Key:
    """The key within the caller's reach (app/domain/reach.py) named by `reference` (its
    full value, identifier or `<identifier>...`); 404 for any other, alike."""
    key = key_named(caller.organization_id, reference)
    if key is None or not reach.of(caller).sees(key.identity_id):
        raise _not_found()
    return key


def list_keys(caller: Caller, page: int, page_size: int, **filters: Any) -> Page[Key]:
    """One page of the keys within the caller's reach (`filters`: kind, state, unused_since,
    enabled, metadata, outside_policy, identity, as pages.keys_page takes them;
    outside_policy is judged by the organization's policy as it is now)."""
    if filters.get("outside_policy") is not None:
        lifetime = organization_policy.of(caller.organization_id).max_key_lifetime_days
        filters["lifetime_days"] = lifetime
    reached = reach.of(caller)
    if filters.get("identity") is not None:
        held = identity_reads.identity_named(caller.organization_id, filters["identity"])
        if held is None or not reached.sees(held.row_id):  # no key of it is within reach
            return Page(page, page_size, 0, [])
        filters["identity"] = held.row_id
    elif reached.identity_id is not None:
        filters["identity"] = reached.identity_id
    return pages.keys_page(caller.organization_id, page, page_size, **filters)


def create_key(caller: Caller, data: dict) -> tuple[Key, str]:
    """A new key in the caller's organization, within the caller's scopes, place, time,
    rate and quota (app/keys/bounds.py) and within the organization's policy
    (app/organizations/policy.py); where it names none of them, the policy's default
    (its time within the policy's lifetime) within the caller's, or the caller's."""
    held = bounds.held_by(caller)
    bounds.require_scopes(caller, held, data["scope_bits"])
    bounds.require_within(held, data)
    try:
        identity = bounds.identity_of_made(caller, data)
        bound_by = bounds.binding_of_made(caller, "")
        governed = organization_policy.govern(
            caller.organization_id, data, organization_policy.CREATE, caller.expires_at
        )
    except BaseException:
        db.session.rollback()  # the identity's lock, and the organization's for the count
        raise
    named = {
        "expires_at": data.get("expires_at", governed.expires_at),
        "rate_limit": data.get("rate_limit", governed.rate_limit),
        "quota": data.get("quota", governed.quota),
    }
    policy = bounds.inherited(held, {"allowed_ips": data.get("allowed_ips", ())} | named)
    created = add_key(
        caller.organization_id,
        data["name"],
        data["kind"],
        data["scope_bits"],
        actor=audit.actor_of(caller),
        created_by=caller.shown or caller.identifier,
        **policy,
        metadata=data.get("metadata"),
        enabled=data.get("enabled", True),
        actor_key=caller,
        identity=identity,
        bound_by=bound_by,
    )
    db.session.commit()
    return created


def update_key(caller: Caller, key: Key, data: dict) -> Key:
    """Rename, rescope and/or set the expiry of a key, as it is inside this transaction;
    refusals in the order docs/design.md gives (422, 403, 409)."""
    with _locked(caller, key) as key:
        if data.get("kind", key.kind) != key.kind:
            raise invalid({"kind": ["The kind of a key cannot be changed."]})
        scope_bits = data.get("scope_bits", key.scope_bits)
        # A fixed kind's scopes are refused below, as immutable (409).
        if not is_immutable(key.kind) and (problem := misfit(key.kind, scope_bits)):
            raise invalid({"scopes": [problem]})
        held = bounds.judging(caller, key)
        bounds.require_power_over(caller, held, key)
        bounds.require_scopes(caller, held, scope_bits)
        bounds.require_within(held, data)
        bounds.require_no_looser_maker(caller, key, data)
        identity, new = key.identity, None
        if "identity" in data:
            new = (
                None
                if data["identity"] is None
                else bounds.named_identity(caller, data["identity"])
            )
            if (new and new.shown) != key.identity:
                bounds.require_may_change_identity(caller)
                identity = new and new.shown
        organization_policy.govern(caller.organization_id, data, organization_policy.UPDATE)
        if is_immutable(key.kind) and scope_bits != key.scope_bits:
            raise ApiError(409, "immutable_key", f"The scopes of {key.kind} keys cannot change.")
        limits = {"rate_limit": key.rate_limit, "quota": key.quota}
        if key.replaced_by is not None and any(
            field in data and data[field] != limits[field] for field in limits
        ):
            raise _already_rotated(key, "its limits are its successor's: change those.")
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
                limit = rate_limit_columns(data["rate_limit"])
                changes |= limit
                shown |= limit
                details["rate_limit"] = [before, data["rate_limit"]]
        if "quota" in data and data["quota"] != key.quota:
            if data["quota"] is not None:
                quotas.keep_used(key, data["quota"]["period"])
            changes |= quota_columns(data["quota"])
            shown |= quota_columns(data["quota"])
            details["quota"] = [key.quota, data["quota"]]
        if identity != key.identity:
            changes["identity_id"] = shown["identity_id"] = None if new is None else new.row_id
            shown["identity"] = identity
            details["identity"] = [_external_id(key.identity), _external_id(identity)]
        if "metadata" in changes:
            write_metadata(caller.organization_id, key.id, changes["metadata"])
        if changes:
            updated = max(utcnow(), from_iso(key.updated) + TICK)
            key = key._replace(**(changes | shown), updated=iso(updated))
            statement = UPDATE.values(**changes, updated=updated)
            db.session.execute(statement, {"key": key.identifier})
            if "rate_limit" in details or "quota" in details:
                rebind(caller.organization_id, key)
            audit.record(
                "key.updated",
                organization_id=caller.organization_id,
                actor=audit.actor_of(caller),
                target=key.identifier,
                details=details,
                actor_key=caller,
                target_key=key,
                key=dump_key(key),
            )
        db.session.commit()
    return key


def delete_key(caller: Caller, key: Key) -> None:
    """Revoke a key at once and for good."""
    with _locked(caller, key) as key:
        bounds.require_power_over(caller, bounds.judging(caller, key), key)
        remove_key(key.identifier)
        audit.record(
            "key.deleted",
            organization_id=caller.organization_id,
            actor=audit.actor_of(caller),
            target=key.identifier,
            actor_key=caller,
            target_key=key,
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
    routine rotation: docs/design.md, "Expiry, rotation and lineage"); its place, time and rate
    within the caller's (app/keys/bounds.py)."""
    with _locked(caller, key) as key:
        held = bounds.judging(caller, key)
        bounds.require_power_over(caller, held, key)
        bounds.require_within(held, data)
        now = utcnow()
        ends = None if key.expires_at is None else from_iso(key.expires_at)
        expires_at = data.get("expires_at", ends if ends is not None and ends > now else None)
        policy = {"allowed_ips": key.allowed_ips, "rate_limit": key.rate_limit, "quota": key.quota}
        policy = bounds.inherited(held, policy | {"expires_at": expires_at})
        policy["expires_at"] = organization_policy.govern(
            caller.organization_id, data, organization_policy.ROTATE, policy["expires_at"]
        ).expires_at
        if key.replaced_by is not None:  # after the policy's 403, as section 4 orders them
            raise _already_rotated(key, "rotate its successor instead.")
        grace = data.get("grace_seconds", 0)
        held_by = None if key.identity_id is None else HeldBy(key.identity_id, key.identity)
        identity = bounds.identity_of_made(caller, {}, held_by)
        kept = bindings.makers(key.bound_by)
        bound_by = bounds.binding_of_made(caller, key.counter, kept)
        if grace == 0:
            remove_key(key.identifier)
        actor = audit.actor_of(caller)
        replacement = add_key(
            caller.organization_id,
            key.name,
            key.kind,
            key.scope_bits,
            actor=actor,
            created_by=caller.shown or caller.identifier,
            **policy,
            metadata=key.metadata,
            quota_counter=key.counter,  # the same holder's counts
            actor_key=caller,
            identity=identity,
            bound_by=bound_by,
        )
        if replacement[0].rate_limit != key.rate_limit or replacement[0].quota != key.quota:
            rebind(caller.organization_id, replacement[0])  # narrowed by its rotating caller
        if grace:
            until = now + timedelta(seconds=grace)
            sooner = until if ends is None else min(ends, until)
            old = {"expires_at": sooner, "replaced_by": replacement[0].identifier}
            db.session.execute(UPDATE.values(**old), {"key": key.identifier})
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
            actor_key=caller,
            target_key=key,
            key=dump_key(key),
        )
        db.session.commit()
    return replacement


def _external_id(identity: Identity | None) -> str | None:
    return None if identity is None else identity.external_id


def rebind(organization_id: int, key: Key) -> None:
    """The keys that `key` (or a key of its lineage) made, at any depth, bound by its limits
    as they are now: written in the transaction that changed them."""
    limited = bindings.Limited(
        key.counter,
        key.rate_limit_requests,
        key.rate_limit_seconds,
        key.quota_requests,
        key.quota_period,
    )
    for identifier, bound_by in queries.keys_bound(organization_id, key.counter):
        changed = bindings.changed(bound_by, limited)
        if changed is not None:
            db.session.execute(UPDATE.values(bound_by=changed), {"key": identifier})


def grant_quota(caller: Caller, key: Key, data: dict) -> Key:
    """More uses of a key's quota, or exactly so many left (app/quotas), for a caller with
    power over the key; recorded as key.quota."""
    bounds.require_power_over(caller, bounds.judging(caller, key), key)
    bounds.require_not_own_quota(caller, key)
    no_quota = quotas.NO_QUOTA
    held = key.identity
    if key.quota_requests is None and held and quotas.binding(key)[1] == bindings.IDENTITY:
        no_quota = (  # what binds it is its identity's quota
            "This key has no quota of its own: the quota that binds it is its "
            f"identity's, granted with POST /api/identities/{held.id}/quota."
        )
    before, after = quotas.grant(key, data, no_quota)
    audit.record(
        "key.quota",
        organization_id=caller.organization_id,
        actor=audit.actor_of(caller),
        target=key.identifier,
        details={**data, "remaining": [before, after]},
        actor_key=caller,
        target_key=key,
        key=dump_key(key),
    )
    db.session.commit()
    return key

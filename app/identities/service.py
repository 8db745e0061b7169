"""The rules of identities (docs/design.md, "Identities"), for an organization's sdk_integration
keys: create, list, read, update, delete (not while it holds keys), each change audited.
An identity's limits are read with each of its keys (app/storage/queries.py's holder), so
that a change binds them at once; its counts live where the limits count."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from app import audit
from app.domain import bindings, reach
from app.domain.credentials import Caller
from app.domain.scopes import SDK_INTEGRATION
from app.domain.timestamps import TICK, iso, utcnow
from app.extensions import db
from app.http.arguments import EXTERNAL_ID, EXTERNAL_ID_MAX_LENGTH
from app.http.errors import ApiError
from app.keys import bounds
from app.quotas import service as quotas
from app.storage import database, pages
from app.storage.models import ApiKey
from app.storage.models import Identity as IdentityRow
from app.storage.queries import Page

# A path names an identity by its id, or by its external id after this.
BY_EXTERNAL_ID = "external_id:"
_IDENTITIES = IdentityRow.__table__
_KEYS = ApiKey.__table__


class Identity(NamedTuple):
    """An identity as the service reads it."""

    row_id: int
    id: str
    external_id: str
    name: str
    metadata: dict[str, str]
    rate_limit_requests: int | None
    rate_limit_seconds: int | None
    quota_requests: int | None
    quota_period: str | None
    created: datetime
    updated: datetime

    @property
    def counter(self) -> str:
        """Where its limits count (bindings.identity_counter)."""
        return bindings.identity_counter(self.id)

    @property
    def rate_limit(self) -> dict[str, int] | None:
        if self.rate_limit_requests is None:
            return None
        return {"requests": self.rate_limit_requests, "seconds": self.rate_limit_seconds}

    @property
    def quota(self) -> dict[str, Any] | None:
        if self.quota_requests is None:
            return None
        return {"requests": self.quota_requests, "period": self.quota_period}


_COLUMNS = (
    _IDENTITIES.c.id,
    _IDENTITIES.c.public_id,
    _IDENTITIES.c.external_id,
    _IDENTITIES.c.name,
    _IDENTITIES.c.metadata,
    _IDENTITIES.c.rate_limit_requests,
    _IDENTITIES.c.rate_limit_seconds,
    _IDENTITIES.c.quota_requests,
    _IDENTITIES.c.quota_period,
    _IDENTITIES.c.created,
    _IDENTITIES.c.updated,
)
_ORDER = (_IDENTITIES.c.created, _IDENTITIES.c.public_id)


def require_manager(caller: Caller, reads: bool = False) -> None:
    """Only an organization's sdk_integration keys of no identity manage its identities; a
    key that belongs to an identity (of a managing kind) `reads` its own, and changes none:
    403 for the others."""
    if caller.identity is not None:
        if not reads:
            raise ApiError(
                403,
                "forbidden",
                "A key that belongs to an identity reads its own identity and changes none.",
            )
        return
    if caller.kind != SDK_INTEGRATION:
        raise ApiError(403, "forbidden", "Only sdk_integration keys may manage identities.")


def _not_found() -> ApiError:
    return ApiError(404, "not_found", "No identity of your organization has this id.")


def in_reach(caller: Caller, identity: Identity | None) -> Identity:
    """`identity`, when the caller reaches it (app/domain/reach.py: a key of an identity
    reaches its own alone); 404 for none and for any other, alike."""
    if identity is None or not reach.of(caller).sees(identity.row_id):
        raise _not_found()
    return identity


def _read(organization_id: int, *criteria: Any, lock: bool = False) -> Identity | None:
    query = select(*_COLUMNS).where(_IDENTITIES.c.organization_id == organization_id, *criteria)
    if lock:
        query = query.with_for_update()
        row = database.writing().execute(query).first()
    else:
        row = db.session.execute(query).first()
    return None if row is None else Identity(*row)


def named(organization_id: int, reference: str, lock: bool = False) -> Identity | None:
    """The organization's identity a path names: `id_...`, or `external_id:<value>`."""
    value = reference.removeprefix(BY_EXTERNAL_ID)
    if EXTERNAL_ID.match(value) is None or len(value) > EXTERNAL_ID_MAX_LENGTH:
        return None  # no identity has it (nor can a database be asked it: a NUL, say)
    if reference.startswith(BY_EXTERNAL_ID):
        criterion = _IDENTITIES.c.external_id == value
    else:
        criterion = _IDENTITIES.c.public_id == value
    return _read(organization_id, criterion, lock=lock)


def find_identity(caller: Caller, reference: str) -> Identity:
    """The identity within the caller's reach named by `reference`; 404 for any other."""
    return in_reach(caller, named(caller.organization_id, reference))


def key_count(identity: Identity) -> int:
    query = select(func.count()).select_from(_KEYS).where(_KEYS.c.identity_id == identity.row_id)
    return db.session.scalar(query) or 0


def dump_identity(identity: Identity, count: int | None = None) -> dict[str, Any]:
    """An identity as the API shows it (`count`: its keys, when already known)."""
    return {
        "id": identity.id,
        "external_id": identity.external_id,
        "name": identity.name,
        "metadata": identity.metadata,
        "rate_limit": identity.rate_limit,
        "quota": identity.quota,
        "quota_remaining": quotas.remaining(identity),
        "key_count": key_count(identity) if count is None else count,
        "created": iso(identity.created),
        "updated": iso(identity.updated),
    }


def list_identities(
    caller: Caller, page: int, page_size: int, external_id: str | None = None
) -> Page[dict[str, Any]]:
    """One page of the identities within the caller's reach (a key of an identity: its
    own alone), oldest first; of one external id."""
    reached = reach.of(caller)
    where = _IDENTITIES.c.organization_id == reached.organization_id
    if reached.identity_id is not None:
        where = where & (_IDENTITIES.c.id == reached.identity_id)
    if external_id is not None:
        where = where & (_IDENTITIES.c.external_id == external_id)
    in_order = select(*_COLUMNS).where(where).order_by(*_ORDER)

    def read(query: Any) -> list[dict[str, Any]]:
        return [dump_identity(Identity(*row)) for row in db.session.execute(query)]

    return pages.counted(_IDENTITIES, where, in_order, page, page_size, read)


def _taken(organization_id: int, external_id: str) -> ApiError:
    """409 `identity_exists`, naming the identity that has `external_id` (its `id`)."""
    holder = named(organization_id, BY_EXTERNAL_ID + external_id)
    held_by = "" if holder is None else f" ({holder.id})"
    return ApiError(
        409,
        "identity_exists",
        f"Another identity of your organization{held_by} has this external_id.",
        {"external_id": [f"Already the external_id of another identity{held_by}."]},
        members=None if holder is None else {"identity": holder.id},
    )


def _limit_columns(data: dict[str, Any]) -> dict[str, Any]:
    columns: dict[str, Any] = {}
    if "rate_limit" in data:
        limit = data["rate_limit"] or {}
        columns |= {
            "rate_limit_requests": limit.get("requests"),
            "rate_limit_seconds": limit.get("seconds"),
        }
    if "quota" in data:
        quota = data["quota"] or {}
        columns |= {"quota_requests": quota.get("requests"), "quota_period": quota.get("period")}
    return columns


def create_identity(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    """A new identity of the caller's organization; 409 `identity_exists` for an external
    id it has already."""
    now = utcnow()
    row = {
        "organization_id": caller.organization_id,
        "external_id": data["external_id"],
        "name": data.get("name", data["external_id"]),
        "metadata": data.get("metadata", {}),
        "rate_limit_requests": None,
        "rate_limit_seconds": None,
        "quota_requests": None,
        "quota_period": None,
        "created": now,
        "updated": now,
    } | _limit_columns(data)
    try:  # the unique (organization, external_id) decides, inside the transaction
        row_id, row["public_id"] = db.session.execute(
            insert(_IDENTITIES).returning(_IDENTITIES.c.id, _IDENTITIES.c.public_id), row
        ).one()
    except IntegrityError:
        db.session.rollback()
        raise _taken(caller.organization_id, data["external_id"]) from None
    identity = Identity(row_id, *(row[column.name] for column in _COLUMNS[1:]))
    shown = dump_identity(identity, 0)
    _record("identity.created", caller, identity, {"identity": shown})
    db.session.commit()
    return shown


def update_identity(caller: Caller, reference: str, data: dict[str, Any]) -> dict[str, Any]:
    """A partial update of the organization's identity, decided from the identity as it is
    inside this transaction (locked): its limits bind its keys from the commit on; a quota
    whose period changes keeps what was used."""
    try:
        identity = in_reach(caller, named(caller.organization_id, reference, lock=True))
        bounds.require_may_change_identity_limits(caller, data)
        changes = {
            field: data[field]
            for field in ("external_id", "name", "metadata")
            if field in data and data[field] != getattr(identity, field)
        }
        details = {field: [getattr(identity, field), value] for field, value in changes.items()}
        for field in ("rate_limit", "quota"):
            if field in data and data[field] != getattr(identity, field):
                details[field] = [getattr(identity, field), data[field]]
                changes |= _limit_columns({field: data[field]})
        if "quota" in details and data["quota"] is not None:
            quotas.keep_used(identity, data["quota"]["period"])
        if changes:
            updated = max(utcnow(), identity.updated + TICK)
            statement = update(_IDENTITIES).where(_IDENTITIES.c.id == identity.row_id)
            db.session.execute(statement.values(**changes, updated=updated))
            fields = {name: value for name, value in changes.items() if name in Identity._fields}
            identity = identity._replace(**fields, updated=updated)
            _record("identity.updated", caller, identity, details)
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise _taken(caller.organization_id, data.get("external_id", "")) from None
    except BaseException:
        db.session.rollback()
        raise
    return dump_identity(identity)


def delete_identity(caller: Caller, reference: str) -> None:
    """The organization's identity deleted; 409 `identity_in_use` while it holds keys."""
    try:
        identity = in_reach(caller, named(caller.organization_id, reference, lock=True))
        held = key_count(identity)
        if held:
            raise ApiError(
                409,
                "identity_in_use",
                f"This identity still holds {held} key{'s' if held != 1 else ''}: delete them "
                "or move them to another identity first.",
            )
        db.session.execute(delete(_IDENTITIES).where(_IDENTITIES.c.id == identity.row_id))
        _record("identity.deleted", caller, identity, {"identity": dump_identity(identity, 0)})
        db.session.commit()
    except BaseException:
        db.session.rollback()
        raise


def grant_quota(caller: Caller, reference: str, data: dict[str, Any]) -> dict[str, Any]:
    """More uses of an identity's quota (`add`), or exactly so many left (`set_remaining`),
    in its current period (app/quotas), shared by all of its keys; recorded as
    identity.quota. 409 `no_quota` for an identity without one."""
    identity = find_identity(caller, reference)
    no_quota = "This identity has no quota: give it one with PUT /api/identities/<id> first."
    before, after = quotas.grant(identity, data, no_quota)
    shown = dump_identity(identity)
    _record("identity.quota", caller, identity, {**data, "remaining": [before, after]}, shown)
    db.session.commit()
    return shown


def _record(
    action: str,
    caller: Caller,
    identity: Identity,
    details: dict[str, Any],
    shown: dict[str, Any] | None = None,
) -> None:
    audit.record(
        action,
        organization_id=caller.organization_id,
        actor=audit.actor_of(caller),
        target=identity.id,
        details=details,
        actor_key=caller,
        target_name=identity.name,
        identity=shown,
        target_identity=identity.row_id,
    )

"""Keys brought in and taken out (docs/design.md, "Import and export"): an import by an
organization's sdk_integration key (POST /api/keys/import) or by the operator (`flask keys import`),
and the operator's export (`flask keys export`): key objects with their digests, never a key.

An import is all or nothing, in one transaction: every entry is judged before any is
written (422 naming each refused entry and field, then the caller's ceiling, then 409 for a
key the service already knows, in any organization, without saying which), then each is
written with its `key.imported` event under the organization's policy, as a create is.

An imported key keeps the identifier it had when it was made here (a key of this service's
form, or an export's `identifier`) and that identifier is free; any other gets a random one
(keyformat.new_imported_identifier), which no part of the key's secret goes into. Its
shown form (`key` in every answer) is what docs/design.md, "Import and export" says; a path names it
by its identifier, `<identifier>...`, its full value, or its shown form while no other key of
the organization is shown alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask import current_app
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from app import audit
from app.domain import keyformat
from app.domain.credentials import Caller, Identity
from app.domain.scopes import SDK_INTEGRATION
from app.domain.timestamps import utcnow
from app.extensions import db
from app.http.errors import ApiError, invalid
from app.keys import bounds
from app.keys.bodies import dump_key
from app.keys.writes import Imported, add_key
from app.organizations import policy as organization_policy
from app.storage import database, identity_reads, queries
from app.storage.identity_reads import HeldBy
from app.storage.models import Identity as IdentityRow
from app.storage.models import Organization
from app.storage.queries import Key

_IDENTITIES = IdentityRow.__table__


def _entry(index: int) -> str:
    return f"keys[{index}]"


def _named(index: int, refusal: ApiError) -> ApiError:
    """`refusal` of one entry, its fields named as that entry's."""
    errors = {f"{_entry(index)}.{field}": texts for field, texts in (refusal.errors or {}).items()}
    detail = f"{_entry(index)}: {refusal.description}"
    return ApiError(refusal.code or 500, refusal.problem_code, detail, errors or None)


def require_importer(caller: Caller) -> None:
    """Only an organization's sdk_integration keys bring keys in: 403 `forbidden`."""
    if caller.kind != SDK_INTEGRATION:
        raise ApiError(403, "forbidden", "Only an sdk_integration key may import keys.")


def _made_as(data: dict) -> Imported:
    """How an entry is written: a key of this service's form keeps its identifier and
    shown form; another keeps the identifier an export gave it, else gets a random one, and
    is shown by its digest (keyformat.shown_digest), after its prefix if it has one (by its
    digest alone: the prefix the export showed), or as an export showed it when that was
    `<identifier>...` of that identifier."""
    full_key, digest = data["full_key"], data["digest"]
    identifier, given = data.get("identifier"), data["shown_as"]
    if full_key is not None and keyformat.is_full_key(full_key):
        identifier, shown = keyformat.identifier_of(full_key), None
    else:
        identifier = identifier or keyformat.new_imported_identifier()
        if full_key is not None:
            shown = keyformat.shown_foreign(full_key)
        elif given == keyformat.shown(identifier):
            shown = None
        else:  # the export's prefix, if it showed one; never what else it showed
            shown = keyformat.shown_digest(digest, keyformat.foreign_prefix(given or "", False))
    created = data.get("created") or utcnow()
    return Imported(identifier, digest, shown, created, data.get("last_used"))


def _judged(entries: list[dict]) -> list[Imported]:
    """Each entry's identifier, digest and shown form; 422 for keys that repeat one another
    or could never authenticate; 409 `key_exists` for keys (or kept identifiers) the
    service knows."""
    prefix = current_app.config["KEY_PREFIX"]
    errors: dict[str, list[str]] = {}
    first_of: dict[bytes, int] = {}
    for index, data in enumerate(entries):
        full_key = data["full_key"]
        native_form = full_key is not None and keyformat.has_native_form(full_key, prefix)
        if native_form and not keyformat.is_full_key(full_key):
            errors[f"{_entry(index)}.key"] = [
                f"Begins with this service's key prefix ({prefix}) but is not one of its "
                "keys (their shape and checksum): it could never authenticate here."
            ]
        earlier = first_of.setdefault(data["digest"], index)
        if earlier != index:
            errors[f"{_entry(index)}.key"] = [f"The same key as {_entry(earlier)}."]
    if errors:
        raise invalid(errors)
    made = [_made_as(data) for data in entries]
    known = queries.known_digests([key.digest for key in made])
    taken = queries.known_identifiers([key.identifier for key in made])
    exists = {
        _entry(index): [
            "This key is already known to the service."
            if key.digest in known
            else f"Its identifier {key.identifier} names, or named, another key."
        ]
        for index, key in enumerate(made)
        if key.digest in known or key.identifier in taken
    }
    if exists:
        raise ApiError(
            409,
            "key_exists",
            "The service already knows "
            + ", ".join(exists)
            + ": nothing was imported. Leave those entries out.",
            exists,
        )
    return made


def _write(
    organization_id: int,
    entries: list[dict],
    made: list[Imported],
    caller: Caller | None,
) -> list[Key]:
    """Every entry written with its key.imported event, in the session's transaction: a
    caller's within its ceiling and the organization's policy (as a create is), the
    operator's as given."""
    keys = []
    held = None if caller is None else bounds.held_by(caller)
    for index, (data, imported) in enumerate(zip(entries, made, strict=True)):
        named = {
            "expires_at": data.get("expires_at"),
            "rate_limit": data.get("rate_limit"),
            "quota": data.get("quota"),
            "allowed_ips": data.get("allowed_ips", ()),
        }
        identity, bound_by = None, []
        if caller is None and data.get("identity") is not None:
            identity = _identity(organization_id, data["identity"])
        if caller is not None and held is not None:
            try:
                bounds.require_scopes(caller, held, data["scope_bits"])
                bounds.require_within(held, data)
                identity = bounds.identity_of_made(caller, data)
                bound_by = bounds.binding_of_made(caller, "")
                governed = organization_policy.govern(
                    organization_id, data, organization_policy.CREATE, caller.expires_at
                )
            except ApiError as refusal:
                raise _named(index, refusal) from None
            named |= {
                "expires_at": data.get("expires_at", governed.expires_at),
                "rate_limit": data.get("rate_limit", governed.rate_limit),
                "quota": data.get("quota", governed.quota),
            }
            named = bounds.inherited(held, named)
        key, _ = add_key(
            organization_id,
            data["name"],
            data["kind"],
            data["scope_bits"],
            actor=audit.OPERATOR if caller is None else audit.actor_of(caller),
            created_by=None if caller is None else caller.shown or caller.identifier,
            **named,
            metadata=data.get("metadata"),
            enabled=data.get("enabled", True),
            actor_key=caller,
            identity=identity,
            bound_by=bound_by,
            imported=imported,
            # Counts of its own: an identifier kept from an export names no lineage here.
            quota_counter=keyformat.new_imported_identifier(),
        )
        keys.append(key)
    return keys


def _identity(organization_id: int, reference: str) -> HeldBy:
    """The operator's import: the organization's identity `reference` names (its id or
    external id), made with no limits when it has none such (audited as identity.created),
    so that an export's keys come in with their holders; their limits are set after
    (PUT /api/identities/<id>)."""
    held = identity_reads.identity_named(organization_id, reference, lock=True)
    if held is not None:
        return held
    now = utcnow()
    row = {
        "organization_id": organization_id,
        "external_id": reference,
        "name": reference,
        "metadata": {},
        "created": now,
        "updated": now,
    }
    statement = insert(_IDENTITIES).returning(_IDENTITIES.c.id, _IDENTITIES.c.public_id)
    row_id, public_id = db.session.execute(statement, row).one()
    audit.record(
        "identity.created",
        organization_id=organization_id,
        actor=audit.OPERATOR,
        target=public_id,
        details={"identity": {"id": public_id, "external_id": reference, "imported": True}},
    )
    return HeldBy(row_id, Identity(public_id, reference))


def _all_or_nothing(write: Any) -> Any:
    """`write()` committed, or nothing: a refusal rolls it back; two imports of one key at
    once: the second is 409 `key_exists`."""
    try:
        done = write()
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise ApiError(
            409, "key_exists", "A key of this import was imported meanwhile: nothing was imported."
        ) from None
    except BaseException:
        db.session.rollback()
        raise
    return done


def import_keys(caller: Caller, entries: list[dict]) -> list[Key]:
    """The caller's organization's new keys, brought in (POST /api/keys/import)."""
    made = _judged(entries)
    database.writing()  # SQLite: the write lock before the policy's reads
    return _all_or_nothing(lambda: _write(caller.organization_id, entries, made, caller))


def operator_import(by_organization: dict[str, list[dict]]) -> dict[str, list[Key]]:
    """The operator's import: each organization's entries (one it names that does not
    exist is made, without starting keys: its keys are these), bound by no key's rules,
    all in one transaction."""
    everything = [data for entries in by_organization.values() for data in entries]
    made = iter(_judged(everything))
    database.writing()

    def write() -> dict[str, list[Key]]:
        done = {}
        for name, entries in by_organization.items():
            organization_id = queries.organization_id(name)
            if organization_id is None:
                organization = Organization(name=name, created=utcnow())
                db.session.add(organization)
                db.session.flush()
                organization_id = organization.id
            own = [next(made) for _ in entries]
            done[name] = _write(organization_id, entries, own, None)
        return done

    return _all_or_nothing(write)


def exported(organization_name: str | None) -> Iterator[dict]:
    """Every key of an organization (None: of every organization), oldest first, as the
    API shows it, with its identifier, its organization and its SHA-256 digest
    (`key_sha256`, hexadecimal): never a full key. LookupError, at the call, for an unknown
    organization."""
    names = [name for name, _, _ in queries.organizations()]
    if organization_name is not None:
        if organization_name not in names:
            raise LookupError(f'no organization is named "{organization_name}"')
        names = [organization_name]

    def lines() -> Iterator[dict]:
        for name in names:
            organization_id = queries.organization_id(name)
            for key, digest in queries.exported_keys(organization_id):
                yield dump_key(key) | {
                    "identifier": key.identifier,
                    "organization": name,
                    "key_sha256": digest.hex(),
                }

    return lines()

"""What the operator writes with the command line and the first start: organizations with
their starting keys, a key of any kind (the way back in when every managing key is lost),
and the list and deletion of an organization's keys. Bound by no key's rules; recorded
in the audit log as `operator`."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy.exc import IntegrityError

from app import audit
from app.domain import keyformat
from app.domain.scopes import FIXED, SDK_INTEGRATION, TELEMETRY
from app.domain.timestamps import utcnow
from app.extensions import db
from app.keys.bodies import dump_key
from app.keys.service import key_named
from app.keys.writes import add_key, remove_key
from app.storage import pages, queries
from app.storage.models import Organization
from app.storage.queries import Key

# The keys every new organization starts with: (name, kind).
STARTING_KEYS = (("Telemetry", TELEMETRY), ("SDK Integration", SDK_INTEGRATION))


class OrganizationError(Exception):
    """An operator's request about organizations that cannot be carried out."""


def create_organization(name: str) -> tuple[Organization, list[tuple[Key, str]]]:
    """A new organization with its two starting keys, written together or not at all."""
    organization = Organization(name=name, created=utcnow())
    db.session.add(organization)
    try:
        db.session.flush()
        keys = [
            add_key(organization.id, key_name, kind, FIXED[kind], actor=audit.OPERATOR)
            for key_name, kind in STARTING_KEYS
        ]
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise OrganizationError(f'an organization named "{name}" already exists') from None
    return organization, keys


def mint_key(organization_name: str, data: dict) -> tuple[Key, str]:
    """The operator's key: any kind and scopes, in an existing organization."""
    organization_id = _organization_id(organization_name)
    created = add_key(
        organization_id,
        data["name"],
        data["kind"],
        data["scope_bits"],
        actor=audit.OPERATOR,
        expires_at=data.get("expires_at"),
    )
    db.session.commit()
    return created


def _organization_id(organization_name: str) -> int:
    organization_id = queries.organization_id(organization_name)
    if organization_id is None:
        raise OrganizationError(f'no organization is named "{organization_name}"')
    return organization_id


# How many keys the operator's list reads at a time.
_OPERATOR_PAGE = 200


def operator_keys(organization_name: str) -> Iterator[Key]:
    """Every key of an organization, oldest first, as the API lists them (the operator's
    CLI, for the day every managing key is lost); OrganizationError, at the call, for an
    unknown organization."""
    organization_id = _organization_id(organization_name)

    def every() -> Iterator[Key]:
        page = 1
        while True:
            found = pages.keys_page(organization_id, page, _OPERATOR_PAGE)
            yield from found.data
            if page * _OPERATOR_PAGE >= found.total_count:
                return
            page += 1

    return every()


def operator_delete(organization_name: str, reference: str) -> Key:
    """The operator deletes an organization's key (any key: the operator always can),
    recorded as key.deleted by the operator; the key as it was. OrganizationError for an
    unknown organization or key."""
    organization_id = _organization_id(organization_name)
    try:
        key = key_named(organization_id, reference)
        current = key and queries.locked_key(organization_id, key.identifier)
        if current is None:
            raise OrganizationError(
                f'organization "{organization_name}" has no key "{keyformat.masked(reference)}"'
            )
        remove_key(current.identifier)
        audit.record(
            "key.deleted",
            organization_id=organization_id,
            actor=audit.OPERATOR,
            target=current.identifier,
            target_key=current,
            key=dump_key(current),
        )
        db.session.commit()
    except BaseException:
        db.session.rollback()
        raise
    return current

"""What a request does when another one changed the same row under it: each write of a key
decides from the key as it is inside its own transaction, which holds the key locked
(docs/design.md, "Permissions"), never from the view's earlier read of it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import create_engine, delete, func, select, update
from sqlalchemy.exc import OperationalError

from app import bootstrap, create_app
from app.domain.credentials import Caller
from app.domain.scopes import ALL, to_bits
from app.domain.timestamps import iso, utcnow
from app.extensions import db
from app.http.errors import ApiError
from app.keys import operator, service
from app.storage import queries
from app.storage.database import upgrade_embedded
from app.storage.models import ApiKey, AuditEvent, Organization
from tests.databases import ON_POSTGRESQL


def _caller(key: ApiKey, scope_bits: int = ALL) -> Caller:
    return Caller(
        id=0,
        organization_id=key.organization_id,
        identifier="ak_test0000",
        kind="sdk_integration" if scope_bits == ALL else "custom",
        scope_bits=scope_bits,
    )


def _deleted_meanwhile(make_key) -> tuple[Caller, queries.Key]:
    """A key read by this request, then deleted by another one (its own connection)."""
    full_key = make_key()
    stored = db.session.scalars(db.select(ApiKey).where(ApiKey.name == "test key")).one()
    caller = _caller(stored)
    key = service.find_key(caller, full_key)
    assert key.id == stored.id
    with db.engine.begin() as other_request:
        other_request.execute(delete(ApiKey).where(ApiKey.id == key.id))
    return caller, key


def test_update_of_a_key_deleted_meanwhile_is_404(app, make_key):
    with app.app_context():
        caller, key = _deleted_meanwhile(make_key)
        try:
            service.update_key(caller, key, {"name": "renamed"})
        except ApiError as error:
            assert (error.code, error.problem_code) == (404, "not_found")
        else:
            raise AssertionError("the update of a deleted key succeeded")


def test_delete_of_a_key_deleted_meanwhile_is_404(app, make_key):
    with app.app_context():
        caller, key = _deleted_meanwhile(make_key)
        try:
            service.delete_key(caller, key)
        except ApiError as error:
            assert (error.code, error.problem_code) == (404, "not_found")
        else:
            raise AssertionError("the second delete succeeded")


def test_rotation_of_a_key_deleted_meanwhile_is_404_and_makes_nothing(app, make_key):
    with app.app_context():
        caller, key = _deleted_meanwhile(make_key)
        with pytest.raises(ApiError) as refused:
            service.rotate_key(caller, key, {})
        assert (refused.value.code, refused.value.problem_code) == (404, "not_found")
        assert db.session.scalar(select(func.count()).where(ApiKey.name == "test key")) == 0


SCOPES = ["site:read", "site:write"]


def _changed_meanwhile(
    make_key, caller_scopes: list[str] | None = None, **columns
) -> tuple[Caller, queries.Key]:
    """A key read by this request (its caller holding `caller_scopes`, or every scope),
    then changed by another one (its own connection)."""
    full_key = make_key(scopes=SCOPES)
    stored = db.session.scalars(db.select(ApiKey).where(ApiKey.name == "test key")).one()
    caller = _caller(stored, ALL if caller_scopes is None else to_bits(caller_scopes))
    key = service.find_key(caller, full_key)
    with db.engine.begin() as other_request:
        other_request.execute(update(ApiKey).where(ApiKey.id == key.id).values(**columns))
    return caller, key


def _stored(key: queries.Key) -> ApiKey:
    db.session.expire_all()
    return db.session.get(ApiKey, key.id)


def test_a_rename_keeps_the_scopes_another_request_removed_meanwhile(app, make_key):
    """A rename writes the name, never the scopes it read: it cannot give back a
    permission the operator has just taken away."""
    with app.app_context():
        narrowed = to_bits(["site:read"])
        caller, key = _changed_meanwhile(make_key, scope_bits=narrowed)
        service.update_key(caller, key, {"name": "renamed"})
        stored = _stored(key)
        assert (stored.name, stored.scope_bits) == ("renamed", narrowed)


def test_a_rescope_keeps_the_name_another_request_gave_meanwhile(app, make_key):
    with app.app_context():
        caller, key = _changed_meanwhile(make_key, name="renamed meanwhile")
        service.update_key(caller, key, {"scope_bits": to_bits(["site:read"])})
        stored = _stored(key)
        assert (stored.name, stored.scope_bits) == ("renamed meanwhile", to_bits(["site:read"]))


def test_bootstrap_that_loses_the_race_makes_nothing_and_prints_nothing(
    app, org, monkeypatch, capsys
):
    monkeypatch.setattr(queries, "has_organization", lambda: False)
    with app.app_context():
        operator.create_organization("default")
    assert bootstrap.ensure_default_organization(app) is False
    assert capsys.readouterr().out == ""


def test_an_in_memory_database_is_migrated_without_a_lock_file(tmp_path):
    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": "sqlite://"})
    upgrade_embedded(app)
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Organization)) == 0


WIDENED = to_bits([*SCOPES, "monitor:read"])


@pytest.mark.parametrize("write", ["delete", "rotate"])
def test_a_key_cannot_end_a_key_made_more_powerful_since_it_was_read(app, make_key, write):
    """The caller held every scope of the key when the view read it; another request has
    widened the key since: the caller has no power over it any more (section 3)."""
    with app.app_context():
        caller, key = _changed_meanwhile(make_key, SCOPES, scope_bits=WIDENED)
        with pytest.raises(ApiError) as refused:
            if write == "delete":
                service.delete_key(caller, key)
            else:
                service.rotate_key(caller, key, {})
        assert (refused.value.code, refused.value.problem_code) == (403, "forbidden")
        assert _stored(key).scope_bits == WIDENED
        assert db.session.scalar(select(func.count()).where(ApiKey.name == "test key")) == 1


def test_a_key_cannot_rename_a_key_made_more_powerful_since_it_was_read(app, make_key):
    with app.app_context():
        caller, key = _changed_meanwhile(make_key, SCOPES, scope_bits=WIDENED)
        with pytest.raises(ApiError) as refused:
            service.update_key(caller, key, {"name": "renamed"})
        assert (refused.value.code, refused.value.problem_code) == (403, "forbidden")
        assert _stored(key).name == "test key"


def test_a_rotation_copies_the_key_as_it_is_now(app, make_key):
    """Name, scopes and expiry changed after the view's read: the successor has the new ones
    (a rotation never gives back a scope just taken away, section 9)."""
    with app.app_context():
        ends = (utcnow() + timedelta(hours=2)).replace(microsecond=0)
        narrowed = to_bits(["site:read"])
        changes = {"name": "renamed meanwhile", "scope_bits": narrowed, "expires_at": ends}
        caller, key = _changed_meanwhile(make_key, **changes)
        successor, _ = service.rotate_key(caller, key, {})
        assert (successor.name, successor.scope_bits) == ("renamed meanwhile", narrowed)
        assert successor.expires_at == iso(ends)


def test_an_update_records_as_before_the_key_as_it_is_now(app, make_key):
    """The audit event's before-values are the key's when the update wrote (section 10),
    not the view's earlier read."""
    with app.app_context():
        caller, key = _changed_meanwhile(make_key, name="renamed meanwhile")
        service.update_key(caller, key, {"name": "renamed", "scope_bits": to_bits(["site:read"])})
        event = db.session.scalars(
            select(AuditEvent).where(AuditEvent.action == "key.updated")
        ).one()
        assert event.details == {
            "name": ["renamed meanwhile", "renamed"],
            "scopes": [SCOPES, ["site:read"]],
        }


def test_an_update_to_what_the_key_became_meanwhile_changes_nothing(app, make_key):
    """The view read the old name; the key already has the new one: nothing to write and
    no event (section 10 records changes, not requests)."""
    with app.app_context():
        caller, key = _changed_meanwhile(make_key, name="renamed")
        updated = service.update_key(caller, key, {"name": "renamed"})
        assert updated.name == "renamed" and updated.updated == key.updated
        updates = select(func.count()).where(AuditEvent.action == "key.updated")
        assert db.session.scalar(updates) == 0


def _impatient_writer(database_url: str):
    """A connection of another process that waits for no lock."""
    if ON_POSTGRESQL:
        return create_engine(database_url, connect_args={"options": "-c lock_timeout=100"})
    return create_engine(database_url, connect_args={"timeout": 0})


def test_the_locked_read_holds_off_other_writers_until_its_transaction_ends(
    app, make_key, database_url
):
    make_key()
    with app.app_context():
        stored = db.session.scalars(db.select(ApiKey).where(ApiKey.name == "test key")).one()
        db.session.rollback()  # the lookup above is not the transaction under test
        organization_id, identifier = stored.organization_id, stored.identifier
        locked = queries.locked_key(organization_id, identifier)
        assert locked is not None and locked.name == "test key"
        # A second locked read in the same transaction: the lock is already held.
        assert queries.locked_key(organization_id, identifier) == locked
        rename = update(ApiKey).where(ApiKey.identifier == identifier).values(name="other")
        other = _impatient_writer(database_url)
        try:
            with pytest.raises(OperationalError), other.begin() as connection:
                connection.execute(rename)
            db.session.rollback()  # the transaction ends: the lock with it
            with other.begin() as connection:
                assert connection.execute(rename).rowcount == 1
        finally:
            other.dispose()

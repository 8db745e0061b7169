"""What a request does when another one changed the same row under it."""

from __future__ import annotations

from sqlalchemy import delete, update

from app import bootstrap, create_app, queries
from app.credentials import Caller
from app.database import upgrade_embedded
from app.errors import ApiError
from app.extensions import db
from app.keys import service
from app.models import ApiKey, Organization
from app.scopes import ALL, to_bits


def _caller(key: ApiKey) -> Caller:
    return Caller(
        id=0,
        organization_id=key.organization_id,
        identifier="ak_test0000",
        kind="sdk_integration",
        scope_bits=ALL,
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


def _changed_meanwhile(make_key, **columns) -> tuple[Caller, queries.Key]:
    """A key read by this request, then changed by another one (its own connection)."""
    full_key = make_key(scopes=["site:read", "site:write"])
    stored = db.session.scalars(db.select(ApiKey).where(ApiKey.name == "test key")).one()
    caller = _caller(stored)
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
        service.create_organization("default")
    assert bootstrap.ensure_default_organization(app) is False
    assert capsys.readouterr().out == ""


def test_an_in_memory_database_is_migrated_without_a_lock_file(tmp_path):
    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": "sqlite://"})
    upgrade_embedded(app)
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Organization)) == 0

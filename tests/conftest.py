"""Fixtures: an app on a real, freshly migrated SQLite file per test, its client and CLI
runner, an organization with its starting keys, and a factory for more keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from app.database import upgrade_embedded
from app.extensions import db
from app.keys import service
from app.scopes import FIXED, to_bits


def _app(database: str, **config) -> Flask:
    return create_app(
        {"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{database}", **config}
    )


@pytest.fixture(scope="session")
def migrated_database(tmp_path_factory) -> str:
    """One database built by the migrations, copied for every test (fast and realistic)."""
    path = str(tmp_path_factory.mktemp("template") / "template.sqlite3")
    app = _app(path)
    upgrade_embedded(app)
    with app.app_context():
        db.engine.dispose()
    return path


@pytest.fixture
def database(migrated_database, tmp_path) -> str:
    path = str(tmp_path / "api-keys.sqlite3")
    with sqlite3.connect(migrated_database) as source, sqlite3.connect(path) as target:
        source.backup(target)
    source.close()
    target.close()
    return path


@pytest.fixture
def app_config() -> dict:
    """Configuration a test module may override."""
    return {}


@pytest.fixture
def app(database, app_config) -> Flask:
    app = _app(database, **app_config)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def client(app) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@dataclass
class Org:
    """An organization and the full values of its two starting keys."""

    name: str
    telemetry: str
    sdk: str


@pytest.fixture
def make_org(app) -> Callable[[str], Org]:
    def make(name: str) -> Org:
        with app.app_context():
            _, keys = service.create_organization(name)
        by_kind = {key.kind: full_key for key, full_key in keys}
        return Org(name, by_kind["telemetry"], by_kind["sdk_integration"])

    return make


@pytest.fixture
def org(make_org) -> Org:
    return make_org("acme")


@pytest.fixture
def other_org(make_org) -> Org:
    return make_org("globex")


@pytest.fixture
def make_key(app, org) -> Callable[..., str]:
    """Mint a key as the operator does; returns its full value."""

    def make(kind: str = "custom", scopes=("monitor:read",), name: str = "test key", org_name=None):
        bits = FIXED.get(kind) if kind != "custom" else to_bits(scopes)
        data = {"name": name, "kind": kind, "scope_bits": bits}
        with app.app_context():
            _, full_key = service.mint_key(org_name or org.name, data)
        return full_key

    return make

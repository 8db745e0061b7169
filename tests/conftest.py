"""Fixtures: an app on a real, freshly migrated database per test (a SQLite file, or
PostgreSQL when TEST_DATABASE_URL is set; see tests/databases.py), its client and CLI
runner, an organization with its starting keys, and a factory for more keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from app import create_app
from app.database import upgrade
from app.extensions import db
from app.keys import service
from app.scopes import FIXED, to_bits
from tests.databases import ON_POSTGRESQL, drop_database, empty_tables, new_database_url


def pytest_report_header(config) -> str:
    if ON_POSTGRESQL:
        return "database: PostgreSQL from TEST_DATABASE_URL (databases of the run's own)"
    return "database: SQLite (PostgreSQL tests skipped: TEST_DATABASE_URL is not set)"


def _app(url: str, **config) -> Flask:
    return create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": url, **config})


def _upgraded(url: str) -> None:
    app = _app(url)
    upgrade(app)
    with app.app_context():
        db.engine.dispose()


@pytest.fixture(scope="session")
def migrated_database(tmp_path_factory) -> Iterator[str]:
    """One database built by the migrations: a SQLite template copied for every test, or
    the run's PostgreSQL database, emptied after every test."""
    url = new_database_url(tmp_path_factory.mktemp("template"), "template.sqlite3")
    _upgraded(url)
    yield url
    drop_database(url)


@pytest.fixture
def database_url(migrated_database, tmp_path) -> Iterator[str]:
    """The test's own migrated database."""
    if ON_POSTGRESQL:
        yield migrated_database
        empty_tables(migrated_database)
        return
    path = str(tmp_path / "api-keys.sqlite3")
    template = make_url(migrated_database).database
    with sqlite3.connect(template) as source, sqlite3.connect(path) as target:
        source.backup(target)
    source.close()
    target.close()
    yield f"sqlite:///{path}"


@pytest.fixture
def database(database_url) -> str:
    """The path of the test's SQLite file, for tests about the file itself."""
    if ON_POSTGRESQL:
        pytest.skip("about the SQLite file: SQLite runs only")
    return make_url(database_url).database


@pytest.fixture
def new_database(tmp_path) -> Iterator[Callable[[], str]]:
    """URLs of brand new, empty databases (no schema); dropped after the test."""
    made: list[str] = []

    def make() -> str:
        made.append(new_database_url(tmp_path, f"new-{len(made)}.sqlite3"))
        return made[-1]

    yield make
    for url in made:
        drop_database(url)


@pytest.fixture
def sql(database_url) -> Iterator[Callable[..., list]]:
    """Run one SQL statement on the test's database, beside the app, and return its rows."""
    engine = create_engine(database_url, hide_parameters=True)

    def run(statement: str, **parameters) -> list:
        with engine.begin() as connection:
            result = connection.execute(text(statement), parameters)
            return result.all() if result.returns_rows else []

    yield run
    engine.dispose()


@pytest.fixture
def statements(app):
    """A recorder of the SQL statements the app sends while it is active."""

    @contextmanager
    def record():
        seen: list[str] = []

        def remember(conn, cursor, statement, parameters, context, executemany):
            seen.append(" ".join(statement.split()).upper())

        with app.app_context():
            engine = db.engine
        event.listen(engine, "before_cursor_execute", remember)
        try:
            yield seen
        finally:
            event.remove(engine, "before_cursor_execute", remember)

    return record


@pytest.fixture
def app_config() -> dict:
    """Configuration a test module may override."""
    return {}


@pytest.fixture
def app(database_url, app_config) -> Iterator[Flask]:
    app = _app(database_url, **app_config)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def make_app() -> Iterator[Callable[..., Flask]]:
    """Build more apps, with configuration of the test's choice; their engines are closed
    after the test."""
    apps: list[Flask] = []

    def make(**config) -> Flask:
        apps.append(create_app({"TESTING": True, **config}))
        return apps[-1]

    yield make
    for made in apps:
        with made.app_context():
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

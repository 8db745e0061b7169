"""Fixtures: an app on a real, freshly migrated database per test (a SQLite file, or
PostgreSQL when TEST_DATABASE_URL is set; see tests/databases.py), its client and CLI
runner, an organization with its starting keys, and a factory for more keys."""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from app import create_app
from app.domain.scopes import FIXED, to_bits
from app.extensions import db
from app.keys import operator
from app.storage import reads
from app.storage.database import upgrade
from app.usage import counter as usage_counter
from app.webhooks import sender
from tests.databases import (
    ABOVE_THE_DATABASE,
    ON_POSTGRESQL,
    drop_database,
    empty_tables,
    new_database_url,
)


def pytest_report_header(config) -> str:
    if ON_POSTGRESQL:
        return "database: PostgreSQL from TEST_DATABASE_URL (databases of the run's own)"
    return "database: SQLite (PostgreSQL tests skipped: TEST_DATABASE_URL is not set)"


def pytest_collection_modifyitems(config, items) -> None:
    """On PostgreSQL, the real-server modules whose subject is above the database are left
    to the SQLite pass (tests/databases.py's ABOVE_THE_DATABASE)."""
    if not ON_POSTGRESQL:
        return

    def above(item) -> bool:
        return item.path.relative_to(config.rootpath).as_posix() in ABOVE_THE_DATABASE

    left = [item for item in items if above(item)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if not above(item)]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter) -> Iterator[None]:
    """One line just before pytest's last (after its short summary): how many tests ran, on
    which database, and why any was skipped (a program missing on this machine, a service
    not configured), so that whoever ran the suite knows what it proved."""
    yield
    if terminalreporter.config.option.collectonly:
        return
    stats = terminalreporter.stats
    counts = {
        outcome: len([r for r in stats.get(outcome, []) if getattr(r, "when", "") != "teardown"])
        for outcome in ("passed", "failed", "xfailed", "xpassed")
    }
    counts["errors"] = len(stats.get("error", []))
    reasons: Counter[str] = Counter()
    for report in stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    ran = counts["passed"] + counts["failed"] + counts["xfailed"] + counts["xpassed"]
    shown = ", ".join(
        f"{count} {outcome}"
        for outcome, count in counts.items()
        if count or outcome in ("passed", "failed")
    )
    line = f"{ran} tests ran on {'PostgreSQL' if ON_POSTGRESQL else 'SQLite'} ({shown}); "
    if reasons:
        why = "; ".join(f"{count}: {reason}" for reason, count in reasons.most_common())
        line += f"{reasons.total()} skipped ({why})"
    else:
        line += "none skipped"
    if ON_POSTGRESQL:
        line += (
            f"; the tests of {len(ABOVE_THE_DATABASE)} real-server modules are the SQLite"
            " pass's (their subject is above the database: tests/databases.py)"
        )
    terminalreporter.write_line(line)


# The webhook sender's thread runs where a test asks for it (app_config); elsewhere tests
# drive its rounds themselves (tests/test_webhooks*.py).
NO_SENDER_THREAD = {"WEBHOOK_SENDER_ENABLED": False}


def _app(url: str, **config) -> Flask:
    return create_app(
        {"TESTING": True, "SQLALCHEMY_DATABASE_URI": url, **NO_SENDER_THREAD, **config}
    )


def _upgraded(url: str) -> None:
    app = _app(url)
    upgrade(app)
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of the test's own (tests/server/test_redis_down.py's OwnRedis), started
    and stopped by its PID."""
    from tests.server.test_redis_down import OwnRedis

    folder = tmp_path / "redis"
    folder.mkdir()
    server = OwnRedis(folder)
    server.start()
    yield server
    server.stop()


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
def sql(database_url, request) -> Iterator[Callable[..., list]]:
    """Run one SQL statement on the test's database, beside the app, and return its rows.
    The test's app, if it has one, is told of a change as a write of its own tells it: the
    generation of what checks read is bumped (app/access/seen.py), so that its next check
    reads the rows."""
    engine = create_engine(database_url, hide_parameters=True)
    app = request.getfixturevalue("app") if "app" in request.fixturenames else None

    def run(statement: str, **parameters) -> list:
        with engine.begin() as connection:
            result = connection.execute(text(statement), parameters)
            rows = result.all() if result.returns_rows else []
        if app is not None and not statement.lstrip().upper().startswith("SELECT"):
            app.extensions["limits"].bump()
        return rows

    yield run
    engine.dispose()


# A parameter as the drivers show it: psycopg's placeholder, or a value SQLite's trace has
# put in its place (a blob, a string, a number).
_PARAMETER = re.compile(r"%\(\w+\)S|X'[0-9A-F]*'|'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b")


@pytest.fixture
def statements(app):
    """A recorder of the SQL statements the app sends to the database while it is active,
    as the driver sees them (reads skip SQLAlchemy's execute events, app/storage/reads.py), minus
    transaction control (BEGIN, COMMIT, ROLLBACK)."""

    @contextmanager
    def record():
        seen: list[str] = []

        traced_last: list[str] = []

        def trace_sqlite(statement: str) -> None:
            # SQLite's trace repeats a statement for each trigger program it runs.
            if traced_last != [statement]:
                remember(statement)
            traced_last[:] = [statement]

        def remember(statement: str) -> None:
            statement = _PARAMETER.sub("?", " ".join(statement.split()).upper())
            if not statement.startswith(("BEGIN", "COMMIT", "ROLLBACK")):
                seen.append(statement)

        class RecordingCursor(psycopg.Cursor):
            def execute(self, query, *args, **kwargs):
                remember(query if isinstance(query, str) else query.as_string(self))
                return super().execute(query, *args, **kwargs)

        traced = []

        def trace(dbapi_connection, connection_record):
            if isinstance(dbapi_connection, sqlite3.Connection):
                dbapi_connection.set_trace_callback(trace_sqlite)
            else:
                dbapi_connection.cursor_factory = RecordingCursor
            traced.append(dbapi_connection)

        with app.app_context():
            engine = db.engine
        # Connections made from here on are traced: the pool's and this thread's reads'.
        reads.release()
        engine.dispose()
        event.listen(engine, "connect", trace)
        try:
            yield seen
        finally:
            event.remove(engine, "connect", trace)
            reads.release()
            engine.dispose()

    return record


@pytest.fixture(autouse=True)
def no_usage_thread_outlives_its_test() -> Iterator[None]:
    """Whatever application a test made (the fixtures', or its own create_app()), its usage
    thread ends with the test: none writes later, into another test's database, through an
    engine since disposed (a connection nobody closes: a ResourceWarning in a later test)."""
    yield
    usage_counter.stop_all()
    for sent in sender.stop_all():  # its thread's connections, which nobody else closes
        with sent.app_context():
            db.engine.dispose()


# Seconds before 00:00 UTC within which a test waits for the new day before it starts.
CALENDAR_MARGIN = 180


@pytest.fixture(autouse=True)
def clear_of_midnight() -> None:
    """No test runs across 00:00 UTC: a day's (and a week's, a month's) quota begins anew
    there, so a test that spends one use before it and counts the rest after would find
    them all left (a CI run at 23:59 did). A test that starts within CALENDAR_MARGIN of it
    waits for the new day: at most once in a run, and only in its last minutes."""
    left = 86_400 - time.time() % 86_400
    if left < CALENDAR_MARGIN:
        time.sleep(left + 1)


@pytest.fixture(autouse=True)
def own_counts(tmp_path, monkeypatch) -> None:
    """Each test's applications count their limits in a file of the test's own: the default
    (host://, app/access/counting) is the project's instance folder, which tests would share."""
    monkeypatch.setenv("RATELIMIT_STORAGE_URI", f"host://{tmp_path}/limits.counts")
    # And where they count while Redis does not answer.
    monkeypatch.setenv("RATELIMIT_FALLBACK_STORAGE_URI", f"host://{tmp_path}/fallback.counts")
    # Nor does any application of a test run a webhook sender thread unless the test asks
    # (its config says WEBHOOK_SENDER_ENABLED): one that outlived its engine's disposal
    # left a connection open, a ResourceWarning in a later test.
    monkeypatch.setenv("WEBHOOK_SENDER_ENABLED", "false")


@pytest.fixture
def app_config() -> dict:
    """Configuration a test module may override."""
    return {}


@pytest.fixture
def app(database_url, app_config) -> Iterator[Flask]:
    app = _app(database_url, **app_config)
    yield app
    usage_counter.stop(app)  # no batch written later, through a disposed engine
    sender.of(app).stop()  # no try sent later, through a disposed engine
    reads.release()  # this thread's connection, which dispose leaves open
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def make_app() -> Iterator[Callable[..., Flask]]:
    """Build more apps, with configuration of the test's choice; their engines are closed
    after the test."""
    apps: list[Flask] = []

    def make(**config) -> Flask:
        apps.append(create_app({"TESTING": True, **NO_SENDER_THREAD, **config}))
        return apps[-1]

    yield make
    reads.release()
    for made in apps:
        usage_counter.stop(made)
        sender.of(made).stop()
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
            _, keys = operator.create_organization(name)
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
            _, full_key = operator.mint_key(org_name or org.name, data)
        return full_key

    return make

"""The databases the suite runs on: SQLite files by default, PostgreSQL when the
TEST_DATABASE_URL environment variable names a server.

On PostgreSQL every run makes databases of its own (named ``apikeys_test_<random>``) on
that server and drops them when it ends; the database the URL names is only used to
create and drop them.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url

import app.storage.models  # noqa: F401 - the tables, in db.metadata
from app.config import normalized_database_url
from app.extensions import db

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL", "")
ON_POSTGRESQL = bool(TEST_DATABASE_URL)
BACKEND = "postgresql" if ON_POSTGRESQL else "sqlite"

# For tests whose rule is about the embedded SQLite file itself.
sqlite_only = pytest.mark.skipif(ON_POSTGRESQL, reason="about the SQLite file: SQLite runs only")
# For tests that need a PostgreSQL server whichever database the run is on.
needs_postgresql = pytest.mark.skipif(
    not ON_POSTGRESQL, reason="TEST_DATABASE_URL is not set: PostgreSQL tests skipped"
)

# Real-server modules whose subject is a layer above the database: what they send through it
# are the service functions' reads and writes that the in-process tests run on PostgreSQL
# too. The PostgreSQL pass leaves them to the SQLite pass, so that CI runs each test once
# where the database cannot change its outcome (docs/contributing.md has the measurement).
# Kept on both: what concerns the database across processes (first starts, races, killed
# workers, restarts, usage and quota counts, webhook leases), and whatever lets a client's
# arbitrary input reach it (the fuzz tests, hostile bytes), and the docs' commands.
# PostgreSQL only (needs_postgresql; the SQLite pass skips it, saying why): several hosts on
# one database, tests/server/test_hosts.py, as machines of their own share no SQLite file.
ABOVE_THE_DATABASE = {
    "tests/server/test_page.py": "the page in Chromium",
    "tests/server/test_gateway.py": "nginx's and Caddy's configurations",
    "tests/server/test_mcp.py": "the MCP clients' protocol",
    "tests/server/test_metrics.py": "Prometheus's scrapes",
    "tests/server/test_access_log.py": "gunicorn's access log",
    "tests/server/test_secrets_in_logs.py": "what the logs print",
    "tests/server/test_refusals.py": "gunicorn's refusals",
    "tests/server/test_generated_client.py": "a client generated from the document",
    "tests/server/test_introspection_client.py": "an OAuth client's introspection",
    "tests/server/test_extension_remote.py": "the Flask extension against a remote service",
    "tests/server/test_host_limits.py": "limits counted in the host's file",
    "tests/server/test_redis_limits.py": "limits counted in Redis",
    "tests/server/test_redis_down.py": "limits counted while Redis does not answer",
}


def _server() -> URL:
    url = make_url(normalized_database_url(TEST_DATABASE_URL))
    if url.get_backend_name() != "postgresql":
        raise pytest.UsageError("TEST_DATABASE_URL must name a PostgreSQL database")
    return url


def _administer(statement: str) -> None:
    """CREATE and DROP DATABASE run outside a transaction, on the URL's own database."""
    engine = create_engine(_server(), isolation_level="AUTOCOMMIT", hide_parameters=True)
    try:
        with engine.connect() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()


def new_postgresql_database() -> str:
    """An empty database of this run's own; its URL."""
    name = f"apikeys_test_{secrets.token_hex(6)}"
    _administer(f'CREATE DATABASE "{name}"')
    return _server().set(database=name).render_as_string(hide_password=False)


def drop_postgresql_database(url: str) -> None:
    name = make_url(url).database
    _administer(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def new_database_url(folder: Path, name: str) -> str:
    """A URL for a brand new, empty database: a file in `folder`, or a PostgreSQL database."""
    if ON_POSTGRESQL:
        return new_postgresql_database()
    return f"sqlite:///{folder / name}"


def drop_database(url: str) -> None:
    if make_url(url).get_backend_name() == "postgresql":
        drop_postgresql_database(url)


def empty_tables(url: str) -> None:
    """Remove every organization and key, keeping the schema (PostgreSQL's per-test reset)."""
    engine = create_engine(url, hide_parameters=True)
    try:
        with engine.begin() as connection:
            connection.execute(text("SET LOCAL lock_timeout = '10s'"))
            for table in reversed(db.metadata.sorted_tables):  # referring tables first
                connection.execute(table.delete())
    finally:
        engine.dispose()

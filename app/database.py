"""The database connection's settings, and the embedded SQLite schema kept up to date."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from flask import Flask
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url

from app.extensions import db

# alembic and Flask-Migrate are imported where they are used: a worker serving the API never
# needs them, and they weigh 10 MB per process (see bench/README.md).
if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"

# A PostgreSQL statement waits at most 5 s for another transaction's row lock and runs at
# most 10 s: past that, the request gets 503 and a retry, and its worker is free again.
# SQLite's equivalent is busy_timeout, below.
POSTGRESQL_TIMEOUTS = "-c lock_timeout=5000 -c statement_timeout=10000"


def _sqlite_pragmas(dbapi_connection, connection_record) -> None:
    """WAL lets readers run beside the writer; writers wait their turn instead of failing.

    Python's sqlite3 (in its legacy transaction mode, which SQLAlchemy uses) runs reads
    outside any transaction, each on the latest commit as at PostgreSQL's READ COMMITTED,
    and opens a transaction only before the first write: with this isolation level, as
    BEGIN IMMEDIATE, which takes the write lock at once, waiting up to busy_timeout for
    another process's writer. So a write never upgrades a read snapshot, the one case that
    fails with "database is locked" however long the timeout. Keep it so: no SAVEPOINT
    (begin_nested), and a transaction that reads before it writes begins with BEGIN
    IMMEDIATE itself (queries.locked_key, the read each write of a key decides from).
    """
    dbapi_connection.isolation_level = "IMMEDIATE"
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def engine_options(app: Flask) -> None:
    """PostgreSQL only (a dialect switch), before the engine is made:
    - a connection from the pool is tried first (pool_pre_ping): one a restarted server
      dropped is replaced before a request meets it (a SQLite file has no server to lose,
      and the ping would be a third statement per request);
    - READ COMMITTED for the writes, whatever the server's default: an UPDATE of a key
      another request changed meanwhile waits for it and proceeds (REPEATABLE READ would
      fail it with a serialization error); reads run in autocommit (app/reads.py);
    - its timeouts, unless the database URL (`?options=...`) or SQLALCHEMY_ENGINE_OPTIONS'
      connect_args already set options."""
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    if url.get_backend_name() != "postgresql":
        return
    options = {
        "pool_pre_ping": True,
        "isolation_level": "READ COMMITTED",
        **app.config["SQLALCHEMY_ENGINE_OPTIONS"],
    }
    connect_args = options.get("connect_args", {})
    if "options" not in url.query and "options" not in connect_args:
        options["connect_args"] = {**connect_args, "options": POSTGRESQL_TIMEOUTS}
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = options


def configure(app: Flask) -> None:
    """Set SQLite's pragmas on every new connection (a dialect switch: SQLite only)."""
    with app.app_context():
        engine: Engine = db.engine
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)


def register_migrations(app: Flask) -> None:
    """Bind Flask-Migrate (`flask db ...`, and the application migrations/env.py reads) to
    `app`, once, when migrations are first needed."""
    if "migrate" not in app.extensions:
        from flask_migrate import Migrate

        Migrate(app, db, directory=str(MIGRATIONS))


def _alembic_config() -> Config:
    from alembic.config import Config

    config = Config(str(MIGRATIONS / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["configure_logging"] = False  # leave the server's logging alone
    return config


@contextmanager
def _schema_lock(database: str | None):
    """One process at a time migrates a SQLite file (gunicorn starts its workers at once)."""
    if database is None:
        yield
        return
    with open(f"{database}.migrate-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def upgrade(app: Flask) -> None:
    """Bring the database's schema to the newest revision, as `flask db upgrade` does;
    leave alone one that a newer version of the service has already upgraded."""
    from alembic import command

    with app.app_context():
        url = db.engine.url
        in_memory = url.database in (None, "", ":memory:")
        sqlite_file = url.get_backend_name() == "sqlite" and not in_memory
        if sqlite_file:
            os.makedirs(os.path.dirname(url.database) or ".", exist_ok=True)
        with _schema_lock(url.database if sqlite_file else None):
            current, _, known = _schema_revisions(app)
            if not _newer_than_the_code(app, current, known):
                command.upgrade(_alembic_config(), "head")


class SchemaNotCurrent(RuntimeError):
    """The database's schema is older than the one this version of the service needs."""


def _schema_revisions(app: Flask) -> tuple[set[str], set[str], set[str]]:
    """The database's revisions, the code's heads, and every revision the code knows."""
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(_alembic_config())
    known = {script.revision for script in scripts.walk_revisions()}
    with app.app_context(), db.engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    return current, set(scripts.get_heads()), known


def _newer_than_the_code(app: Flask, current: set[str], known: set[str]) -> bool:
    """A revision this code does not know was written by a newer version of the service:
    during a rolling deploy, old workers keep serving beside the upgraded ones (every
    revision keeps the previous version working, see migrations/README)."""
    newer = sorted(current - known)
    if newer:
        app.logger.warning(
            "The database's schema is at revision %s, newer than this version of the "
            "service knows; serving on it.",
            ", ".join(newer),
        )
    return bool(newer)


def require_current_schema(app: Flask) -> None:
    """Refuse to run on a database that `flask --app app db upgrade` has not brought up to
    date: a clear message at start instead of failing requests later."""
    current, heads, known = _schema_revisions(app)
    if current == heads or _newer_than_the_code(app, current, known):
        return
    found = ", ".join(sorted(current)) or "no schema"
    raise SchemaNotCurrent(
        f"the database has {found}; this version needs revision {', '.join(sorted(heads))}:"
        " run `flask --app app db upgrade` first"
    )


def upgrade_embedded(app: Flask) -> None:
    """Apply pending migrations when the database is SQLite. Other databases are upgraded
    by the operator with `flask --app app db upgrade`, once per deployment, and are only
    checked here."""
    with app.app_context():
        embedded = db.engine.url.get_backend_name() == "sqlite"
    if embedded:
        upgrade(app)
    else:
        require_current_schema(app)

"""The database connection's settings, and the embedded SQLite schema kept up to date."""

from __future__ import annotations

import fcntl
import functools
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from flask import Flask
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url

from app.extensions import db

# alembic and Flask-Migrate are imported where they are used: a worker serving the API never
# needs them, and they weigh 10 MB per process (see bench/README.md).
if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"

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
    # Each commit waits for the disk, whatever the build's default: a committed delete of a
    # key survives a power cut (NORMAL would make writes cheaper and could lose it).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


# The statements that begin a SQLite write transaction: Python's sqlite3 begins one (BEGIN
# IMMEDIATE, above) before a data change; queries.locked_key begins its own.
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN")


class _Queue(threading.local):
    """Whether this thread holds the writers' queue through one of its connections."""

    held = False


_queue = _Queue()


class QueuedConnection(sqlite3.Connection):
    """A SQLite connection whose writers take turns in a queue of the operating system's
    before they ask for SQLite's write lock, and leave it at commit or rollback.

    SQLite has one writer per database. A connection that finds the write lock taken
    retries it from its busy handler, sleeping 1, 2, 5, 10 ... then 100 ms between tries:
    under 32 concurrent writes across 4 workers the lock stood free while the waiters
    slept, and the last of them waited half a second (bench/README.md, the writes). A
    blocking flock() on a file beside the database wakes the next waiter when the lock is
    let go, in the order they came. The queue only orders this service's writers; SQLite's
    lock still decides, and a writer outside the queue (the sqlite3 shell) is waited for by
    busy_timeout, as before. A thread that already holds the queue through another of its
    connections does not queue again, so that it cannot wait for itself."""

    queue: int | None = None  # the lock file's descriptor; None: an in-memory database
    queued = False

    def enter(self) -> None:
        """Wait for this connection's turn to write, unless it holds one already."""
        if self.queue is None or self.queued or self.in_transaction or _queue.held:
            return
        fcntl.flock(self.queue, fcntl.LOCK_EX)
        self.queued = _queue.held = True

    def leave(self) -> None:
        if self.queued:
            fcntl.flock(self.queue, fcntl.LOCK_UN)
            self.queued = _queue.held = False

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.leave()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.leave()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.leave()
            if self.queue is not None:
                os.close(self.queue)
                self.queue = None


def _enqueue(connection, cursor, statement: str, parameters, context, executemany) -> None:
    """Before a statement that begins a write: the writers' queue (QueuedConnection)."""
    if statement.lstrip()[:7].upper().startswith(_WRITES):
        dbapi_connection = connection.connection.dbapi_connection
        if isinstance(dbapi_connection, QueuedConnection):
            dbapi_connection.enter()


def insert(table, dialect: str):
    """An INSERT that can say ON CONFLICT, in the construct of `dialect` (the connection's
    dialect name): PostgreSQL's or SQLite's. Each is imported only where it is used: a
    worker on SQLite never loads PostgreSQL's dialect (2.4 MiB)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def engine_options(app: Flask) -> None:
    """Before the engine is made. SQLite: its connections are QueuedConnection. PostgreSQL:
    - a connection from the pool is tried first (pool_pre_ping): one a restarted server
      dropped is replaced before a request meets it (a SQLite file has no server to lose,
      and the ping would be a third statement per request);
    - READ COMMITTED for the writes, whatever the server's default: an UPDATE of a key
      another request changed meanwhile waits for it and proceeds (REPEATABLE READ would
      fail it with a serialization error); reads run in autocommit (app/storage/reads.py);
    - its timeouts, unless the database URL (`?options=...`) or SQLALCHEMY_ENGINE_OPTIONS'
      connect_args already set options."""
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    if url.get_backend_name() == "sqlite":
        options = app.config["SQLALCHEMY_ENGINE_OPTIONS"]
        connect_args = {"factory": QueuedConnection, **options.get("connect_args", {})}
        app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {**options, "connect_args": connect_args}
        return
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
    """Set SQLite's pragmas on every new connection, and queue its writers (a dialect
    switch: SQLite only)."""
    with app.app_context():
        engine: Engine = db.engine
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
            database = engine.url.database
            if database not in (None, "", ":memory:") and not database.startswith("file:"):
                lock = f"{os.path.abspath(database)}.write-lock"
                event.listen(engine, "connect", functools.partial(_open_queue, lock))
            event.listen(engine, "before_cursor_execute", _enqueue)


def _open_queue(lock: str, dbapi_connection, connection_record) -> None:
    if isinstance(dbapi_connection, QueuedConnection):
        dbapi_connection.queue = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


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


def writing() -> Connection:
    """db.session's connection, in a write transaction from here on: on SQLite, begun with
    BEGIN IMMEDIATE unless one is open already; on PostgreSQL, the transaction SQLAlchemy
    begins, whose locks are the statements' own (FOR UPDATE: queries.locked_key).

    SQLite has one writer per database and no FOR UPDATE: the transaction begins with BEGIN
    IMMEDIATE, which takes the write lock (waiting up to busy_timeout) before the
    first read, so that what it reads cannot change until COMMIT. Python's sqlite3 (legacy mode,
    app/storage/database.py) would begin the transaction only before the first INSERT, UPDATE or
    DELETE, after this read. SQLAlchemy's recipe for pysqlite (no sqlite3 transactions, a
    BEGIN on the engine's "begin" event, as migrations/env.py does) would begin every
    session transaction so, the read-only ones too (filtered pages, the audit log, the
    health check): under BEGIN IMMEDIATE they would queue behind writers; under BEGIN,
    a later write in one would fail to upgrade its snapshot. A transaction that has already
    written holds the lock (sqlite3 began it as BEGIN IMMEDIATE) and is not begun again.
    """
    connection = db.session.connection()
    on_sqlite = connection.dialect.name == "sqlite"
    if on_sqlite and not connection.connection.dbapi_connection.in_transaction:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    return connection

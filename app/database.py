"""The database connection's settings, and the embedded SQLite schema kept up to date."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from flask import Flask
from sqlalchemy import event
from sqlalchemy.engine import Engine

from app.extensions import db

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def _sqlite_pragmas(dbapi_connection, connection_record) -> None:
    """WAL lets readers run beside the writer; writers wait their turn instead of failing."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def configure(app: Flask) -> None:
    """Set SQLite's pragmas on every new connection (a dialect switch: SQLite only)."""
    with app.app_context():
        engine: Engine = db.engine
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)


def _alembic_config() -> Config:
    config = Config(str(MIGRATIONS / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["configure_logging"] = False  # leave the server's logging alone
    return config


@contextmanager
def _schema_lock(database: str | None):
    """One process at a time migrates a SQLite file (gunicorn starts its workers at once)."""
    if not database or database == ":memory:":
        yield
        return
    with open(f"{database}.migrate-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def upgrade_embedded(app: Flask) -> None:
    """Apply pending migrations when the database is SQLite; other databases are upgraded
    by the operator with `flask --app app db upgrade`, once per deployment."""
    with app.app_context():
        url = db.engine.url
        if url.get_backend_name() != "sqlite":
            return
        if url.database and url.database != ":memory:":
            os.makedirs(os.path.dirname(url.database) or ".", exist_ok=True)
        with _schema_lock(url.database):
            command.upgrade(_alembic_config(), "head")

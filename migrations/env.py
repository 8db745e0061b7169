"""Alembic's environment: the application's engine and metadata."""

import logging
from logging.config import fileConfig

from alembic import context
from flask import current_app
from sqlalchemy import event

from app.storage.database import register_migrations

config = context.config

# `flask db ...` configures logging from alembic.ini; a server or CLI command that
# upgrades the embedded database on start asks to keep its own logging untouched.
if config.attributes.get("configure_logging", True) and config.config_file_name:
    fileConfig(config.config_file_name, disable_existing_loggers=False)
logger = logging.getLogger("alembic.env")

# Flask-Migrate is bound when migrations are first needed (app/storage/database.py), whether they
# run from `flask db`, from a server's first start or from alembic's own API.
register_migrations(current_app._get_current_object())
target_db = current_app.extensions["migrate"].db


def run_migrations_offline():
    """Emit SQL for the database named by the application's URL, without connecting."""
    context.configure(
        url=target_db.engine.url,
        target_metadata=target_db.metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    """Run the migrations over a connection of the application's engine."""

    def process_revision_directives(context, revision, directives):
        # No empty revision when autogenerate finds no change.
        if getattr(config.cmd_opts, "autogenerate", False):
            script = directives[0]
            if script.upgrade_ops.is_empty():
                directives[:] = []
                logger.info("No changes in schema detected.")

    conf_args = dict(current_app.extensions["migrate"].configure_args)
    conf_args.setdefault("process_revision_directives", process_revision_directives)
    # SQLite alters tables by copying them ("batch" mode); other databases ignore it.
    conf_args.setdefault("render_as_batch", True)

    with target_db.engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _prepare_sqlite(connection)
            conf_args["transactional_ddl"] = True
        context.configure(connection=connection, target_metadata=target_db.metadata, **conf_args)
        try:
            with context.begin_transaction():
                context.run_migrations()
                if sqlite:
                    _check_foreign_keys(connection)
        finally:
            if sqlite:
                _restore_sqlite(connection)


def _prepare_sqlite(connection):
    """All of a migration in one transaction, without foreign key actions.

    A batch migration rebuilds a table by copying it, dropping it and renaming the copy:
    with foreign keys on, dropping `organizations` would be refused (or would cascade)
    because of the keys that refer to it, and Python's sqlite3 would run the DDL outside
    any transaction, leaving a half-done rebuild behind on failure. So: foreign keys off
    (only possible outside a transaction), sqlite3's own transaction handling off, and one
    BEGIN IMMEDIATE of ours around everything; the references are checked before COMMIT.
    """
    connection.connection.driver_connection.isolation_level = None
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    connection.commit()
    event.listen(connection, "begin", _begin_immediate)


def _begin_immediate(connection):
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _restore_sqlite(connection):
    """Back to the settings app/storage/database.py gives every connection (an in-memory database
    lives only as long as its one connection, so this one is kept, not discarded)."""
    event.remove(connection, "begin", _begin_immediate)
    connection.exec_driver_sql("PRAGMA foreign_keys=ON")
    connection.commit()
    connection.connection.driver_connection.isolation_level = "IMMEDIATE"


def _check_foreign_keys(connection):
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        tables = ", ".join(sorted({row[0] for row in broken}))
        raise RuntimeError(f"the migration leaves rows that refer to nothing, in: {tables}")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""Alembic's environment: the application's engine and metadata."""

import logging
from logging.config import fileConfig

from alembic import context
from flask import current_app

config = context.config

# `flask db ...` configures logging from alembic.ini; a server or CLI command that
# upgrades the embedded database on start asks to keep its own logging untouched.
if config.attributes.get("configure_logging", True) and config.config_file_name:
    fileConfig(config.config_file_name, disable_existing_loggers=False)
logger = logging.getLogger("alembic.env")

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
        context.configure(connection=connection, target_metadata=target_db.metadata, **conf_args)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""The first start: migrations (SQLite; other databases are checked), then, on a database
with no organization, `default` and its keys shown once. gunicorn runs it once in its
master process before any worker starts (gunicorn.conf.py's on_starting), `make dev` with
`flask --app app first-start`."""

from __future__ import annotations

import click
from flask import Flask

from app.database import upgrade_embedded
from app.extensions import db
from app.keys import service

NOTICE = "These keys are shown once and will not be shown again: store them now."


def describe_keys(keys) -> list[str]:
    """The lines that show freshly made keys, full values included, to the operator."""
    return [f"  {key.name} ({key.kind}): {full_key}" for key, full_key in keys]


def ensure_default_organization(app: Flask) -> bool:
    """Make organization `default` if none exists; True when this call made it.

    Several processes may race here; the unique organization name lets exactly one win.
    """
    with app.app_context():
        if service.has_organization():
            return False
        try:
            _, keys = service.create_organization("default")
        except service.OrganizationError:
            return False
    click.echo(
        "\n".join(['Created organization "default" with two keys.', *describe_keys(keys), NOTICE])
    )
    return True


def first_start(app: Flask) -> None:
    """Migrations (SQLite) or the schema check, then the `default` organization if none.
    The connections it opened are closed after it: gunicorn forks its workers from the
    process that ran it, and a connection must not cross a fork."""
    try:
        upgrade_embedded(app)
        ensure_default_organization(app)
    finally:
        with app.app_context():
            db.engine.dispose()

"""The first start: migrations (SQLite; other databases are checked), then, on a database
with no organization, `default` and its keys shown once. It is the command
`flask --app app first-start`, which gunicorn runs once before it starts any worker
(gunicorn.conf.py's on_starting) and `make dev` runs before Flask's server."""

from __future__ import annotations

import click
from flask import Flask

from app.access import counting
from app.keys import operator
from app.serving import hosts
from app.storage import queries
from app.storage.database import upgrade_embedded

NOTICE = "These keys are shown once and will not be shown again: store them now."
NOTICE_ONE = "This key is shown once and will not be shown again: store it now."


def describe_keys(keys) -> list[str]:
    """The lines that show freshly made keys, full values included, to the operator."""
    return [f"  {key.name} ({key.kind}): {full_key}" for key, full_key in keys]


def ensure_default_organization(app: Flask) -> bool:
    """Make organization `default` if none exists; True when this call made it.

    Several processes may race here; the unique organization name lets exactly one win.
    """
    with app.app_context():
        if queries.has_organization():
            return False
        try:
            _, keys = operator.create_organization("default")
        except operator.OrganizationError:
            return False
    click.echo(
        "\n".join(['Created organization "default" with two keys.', *describe_keys(keys), NOTICE])
    )
    return True


def first_start(app: Flask, workers: int = 1) -> None:
    """Before `workers` processes serve: a storage that would count the limits in each of
    them is refused; then migrations (SQLite) or the schema check, then this host recorded
    (refused when it would count in its own file beside another host), then the `default`
    organization if none."""
    counting.refuse_per_process(app.config["RATELIMIT_STORAGE_URI"], workers)
    upgrade_embedded(app)
    hosts.refuse_counting_apart(app)  # host:// while another host serves the database
    ensure_default_organization(app)

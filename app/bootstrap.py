"""The first start on a database with no organization makes `default` and shows its keys."""

from __future__ import annotations

import click
from flask import Flask

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

"""The operator's `flask keys import FILE` and `flask keys export` (docs/design.md, "Import and
export"): keys brought in from JSON lines, or written out as JSON lines with their digests, never a
full key. Registered with the other commands by app/cli.py."""

from __future__ import annotations

import json
import re

import click
from flask import current_app
from flask.cli import AppGroup
from marshmallow import ValidationError

from app.http.errors import ApiError, flatten
from app.keys import import_schemas, imports, schemas
from app.storage.database import SchemaNotCurrent, upgrade_embedded

# What every operator command shares (app/cli.py's too).


def organization_name(option: str, value: str) -> str:
    """An organization's name, by the rules of a key's name (one rule: schemas.Name)."""
    try:
        return schemas.Name(required=True).deserialize(value)
    except ValidationError as error:
        raise click.ClickException(f"{option}: {' '.join(error.messages)}") from None


def prepare_database() -> None:
    """Upgrade the embedded SQLite file; refuse, in one line, another un-upgraded database."""
    try:
        upgrade_embedded(current_app._get_current_object())
    except SchemaNotCurrent as error:
        raise click.ClickException(str(error)) from None


keys = AppGroup(
    "keys",
    help="Mint, list and delete keys as the operator; bring keys in from JSON lines, or "
    "write them out as JSON lines.",
)


def _entries(
    lines: click.utils.LazyFile, organization: str | None
) -> tuple[dict[str, list[dict]], dict[str, list[int]]]:
    """The file's keys by organization (`organization`, else each line's own), loaded, and
    the line of each; every refused line said, one a line, and nothing written."""
    by_organization: dict[str, list[dict]] = {}
    numbers: dict[str, list[int]] = {}
    refused = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            refused.append(f"line {number}: not a JSON object")
            continue
        name = organization or entry.get("organization")
        if not isinstance(name, str) or not name.strip():
            refused.append(f"line {number}: no organization: give --organization NAME")
            continue
        try:
            data = import_schemas.imported_key.load(entry)
        except ValidationError as error:
            messages = flatten(error.normalized_messages())
            refused += [f"line {number}: {field}: {' '.join(t)}" for field, t in messages.items()]
            continue
        by_organization.setdefault(name.strip(), []).append(data)
        numbers.setdefault(name.strip(), []).append(number)
    if refused:
        raise click.ClickException("nothing was imported:\n" + "\n".join(refused))
    return by_organization, numbers


@keys.command("import")
@click.argument("file", type=click.File("r"))
@click.option(
    "--organization",
    help="The organization every key goes to; without it, each line's `organization` "
    "(as `flask keys export` writes it). One that does not exist is made, without keys.",
)
def import_keys(file: click.utils.LazyFile, organization: str | None) -> None:
    """Bring in the keys of FILE (JSON lines, `-` for standard input): each line a key with
    its full `key` or its `key_sha256`, and a create's fields, as POST /api/keys/import
    takes them, any number of lines, all or none. The operator is bound by no key's rules."""
    if organization is not None:
        organization = organization_name("--organization", organization)
    by_organization, numbers = _entries(file, organization)
    if not by_organization:
        raise click.ClickException("the file holds no key: nothing was imported")
    lines = [number for each in numbers.values() for number in each]
    prepare_database()
    try:
        done = imports.operator_import(by_organization)
    except ApiError as refusal:
        said = [
            re.sub(r"keys\[(\d+)\]", lambda m: f"line {lines[int(m[1])]}", field)
            + ": "
            + " ".join(texts)
            for field, texts in (refusal.errors or {}).items()
        ]
        raise click.ClickException(
            "nothing was imported: " + "\n".join(said or [refusal.description])
        ) from None
    for name, made in done.items():
        noun = "key" if len(made) == 1 else "keys"
        click.echo(f'Imported {len(made)} {noun} into organization "{name}".')


@keys.command("export")
@click.option("--organization", help="The organization whose keys to write; without it, all.")
def export_keys(organization: str | None) -> None:
    """Write keys as JSON lines, oldest first: each as the API shows it, with its
    `identifier`, `organization` and SHA-256 digest (`key_sha256`), never a full key;
    `flask keys import` brings them in again."""
    if organization is not None:
        organization = organization_name("--organization", organization)
    prepare_database()
    try:
        for line in imports.exported(organization):
            click.echo(json.dumps(line))
    except LookupError as error:
        raise click.ClickException(str(error)) from None

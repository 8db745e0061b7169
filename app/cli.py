"""The operator's commands: `flask first-start`, `flask org create`, `flask org list`,
`flask org policy`, `flask keys create`, `flask keys list`, `flask keys delete`,
`flask keys import`, `flask keys export`, `flask audit export`."""

from __future__ import annotations

import json

import click
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext
from marshmallow import ValidationError

from app import audit
from app.audit import schemas as audit_schemas
from app.bootstrap import NOTICE, NOTICE_ONE, describe_keys, first_start
from app.domain.scopes import KINDS, SCOPES
from app.domain.timestamps import iso
from app.http.arguments import Timestamp
from app.http.errors import flatten
from app.keys import bodies, operator, schemas
from app.keys.commands import keys, organization_name, prepare_database
from app.organizations import policy as organization_policy
from app.organizations import schemas as organization_schemas
from app.storage import queries
from app.storage.database import register_migrations

org = AppGroup("org", help="Manage organizations.")
# `flask key ...`, the old name of `flask keys`' create, list and delete: still answers,
# unlisted.
key = AppGroup("key", hidden=True, help="The old name of `flask keys`.")
audit_log = AppGroup("audit", help="Read the audit log.")


def _one_line(error: ValidationError) -> str:
    """A refused input as one line: each field with its messages."""
    messages = flatten(error.normalized_messages())
    return " ".join(f"{field}: {' '.join(texts)}" for field, texts in messages.items())


def _show(heading: str, keys, as_json: bool, organization: str) -> None:
    if as_json:
        objects = [bodies.created_key(k, full_key) for k, full_key in keys]
        click.echo(json.dumps({"organization": organization, "keys": objects}))
    else:
        notice = NOTICE_ONE if len(keys) == 1 else NOTICE
        click.echo("\n".join([heading, *describe_keys(keys), notice]))


@click.command("first-start")
@click.option(
    "--workers", type=click.IntRange(min=1), default=1, help="How many processes will serve."
)
@with_appcontext
def first_start_command(workers: int) -> None:
    """Prepare the database as a server's first start does: migrations (SQLite), then
    organization `default` and its two keys, shown once, if there is no organization.
    Refuses limits counted per process when several `workers` will serve."""
    try:
        first_start(current_app._get_current_object(), workers)
    except RuntimeError as error:  # SchemaNotCurrent, or limits counted per process
        raise click.ClickException(str(error)) from None


@org.command("create")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def create_organization(name: str, as_json: bool) -> None:
    """Create organization NAME with its Telemetry and SDK Integration keys."""
    name = organization_name("name", name)
    prepare_database()
    try:
        organization, keys = operator.create_organization(name)
    except operator.OrganizationError as error:
        raise click.ClickException(str(error)) from None
    heading = f'Created organization "{organization.name}" with two keys.'
    _show(heading, keys, as_json, organization.name)


@org.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def list_organizations(as_json: bool) -> None:
    """List the organizations by name, with how many keys each has."""
    prepare_database()
    rows = [
        {"name": name, "keys": keys, "created": iso(created)}
        for name, created, keys in queries.organizations()
    ]
    if as_json:
        click.echo(json.dumps({"organizations": rows}))
        return
    if not rows:
        click.echo("There is no organization yet: flask --app app org create NAME makes one.")
    for row in rows:
        click.echo(f"{row['name']}\t{row['keys']} keys\tcreated {row['created']}")


# What clears a rule in `flask org policy`.
NONE = "none"


def _rule(option: str, text: str, rate: bool = False) -> int | dict | None:
    """A rule's value as the command line gives it: `none` (clear it), a whole number, or,
    for a rate, REQUESTS/SECONDS, for a quota REQUESTS/PERIOD; the schema then bounds it."""
    if text.strip().lower() == NONE:
        return None
    if option == "--default-quota":
        requests, _, period = text.partition("/")
        if not requests.strip().isdigit() or not period.strip():
            raise click.ClickException(
                f"{option}: give REQUESTS/PERIOD (say 1000/day; a period is day, week, "
                f"month or lifetime), or {NONE} to clear it."
            )
        return {"requests": int(requests), "period": period.strip().lower()}
    parts = text.split("/") if rate else [text]
    if len(parts) != (2 if rate else 1) or not all(part.strip().isdigit() for part in parts):
        shape = "REQUESTS/SECONDS (say 100/60)" if rate else "a whole number"
        raise click.ClickException(f"{option}: give {shape}, or {NONE} to clear it.")
    numbers = [int(part) for part in parts]
    return {"requests": numbers[0], "seconds": numbers[1]} if rate else numbers[0]


def _option(rule: str) -> str:
    """The option of `flask org policy` that sets `rule`."""
    return "--" + rule.replace("_", "-")


def _describe_policy(organization: organization_policy.Summary) -> list[str]:
    policy = organization.policy
    limit = policy.default_rate_limit
    rate = NONE if limit is None else f"{limit['requests']}/{limit['seconds']}"
    rate += "" if limit is None else f" ({limit['requests']} requests per {limit['seconds']} s)"
    quota = policy.default_quota
    shown = {
        "max_keys": policy.max_keys,
        "max_key_lifetime_days": policy.max_key_lifetime_days,
        "default_rate_limit": rate,
        "default_quota": None if quota is None else f"{quota['requests']}/{quota['period']}",
    }
    count = organization.key_count
    return [
        f'Organization "{organization.name}" holds {count} key{"" if count == 1 else "s"}. '
        "Its policy:",
        *(f"  {rule}: {NONE if value is None else value}" for rule, value in shown.items()),
    ]


@org.command("policy")
@click.argument("name")
@click.option(
    "--max-keys",
    metavar="N|none",
    help="The most keys the organization may hold (1 to 100000); none: no limit.",
)
@click.option(
    "--max-key-lifetime-days",
    metavar="DAYS|none",
    help="The most days a key may live from when it is made or its expiry is changed (1 to "
    "3650); a key made without an expiry gets the longest. none: no limit.",
)
@click.option(
    "--default-rate-limit",
    metavar="REQUESTS/SECONDS|none",
    help="The rate limit of a key made without naming one (say 100/60); none: no default.",
)
@click.option(
    "--default-quota",
    metavar="REQUESTS/PERIOD|none",
    help="The quota of a key made without naming one (say 1000/day; a period is day, week, "
    "month or lifetime); none: no default.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def organization_policy_command(
    name: str,
    max_keys: str | None,
    max_key_lifetime_days: str | None,
    default_rate_limit: str | None,
    default_quota: str | None,
    as_json: bool,
) -> None:
    """Show organization NAME's policy for its keys, changing the rules given first (the
    others stay). It applies to keys made or changed afterwards; GET
    /api/keys?outside_policy=true lists the keys outside it."""
    name = organization_name("name", name)
    given = {
        "max_keys": max_keys,
        "max_key_lifetime_days": max_key_lifetime_days,
        "default_rate_limit": default_rate_limit,
        "default_quota": default_quota,
    }
    changes = {
        rule: _rule(_option(rule), text, rate=rule == "default_rate_limit")
        for rule, text in given.items()
        if text is not None
    }
    try:
        changes = organization_schemas.policy_change.load(changes)
    except ValidationError as error:
        messages = flatten(error.normalized_messages())
        lines = (f"{_option(rule)}: {' '.join(texts)}" for rule, texts in messages.items())
        raise click.ClickException(" ".join(lines)) from None
    prepare_database()
    try:
        organization = organization_policy.set_policy(name, changes)
    except LookupError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps(organization_schemas.dump(organization)))
    else:
        click.echo("\n".join(_describe_policy(organization)))


@keys.command("create")
@click.option("--org", "organization", required=True, help="The organization's name.")
@click.option("--kind", required=True, help="One of: " + ", ".join(KINDS) + ".")
@click.option("--name", required=True, help="The key's display name.")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    help="A scope (repeat for several): " + ", ".join(SCOPES) + ".",
)
@click.option(
    "--expires-at", help="When the key stops working: an ISO 8601 time with Z or an offset."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def create_key(
    organization: str,
    kind: str,
    name: str,
    scopes: tuple[str, ...],
    expires_at: str | None,
    as_json: bool,
) -> None:
    """Mint a key in an organization, whatever keys it has left (recovery)."""
    organization = organization_name("--org", organization)
    given = {"name": name, "kind": kind} | ({"scopes": list(scopes)} if scopes else {})
    if expires_at is not None:
        given["expires_at"] = expires_at
    try:
        data = schemas.create_key.load(given)
    except ValidationError as error:
        raise click.ClickException(_one_line(error)) from None
    prepare_database()
    try:
        created = operator.mint_key(organization, data)
    except operator.OrganizationError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps(bodies.created_key(*created)))
    else:
        _show(f'Created a key in organization "{organization}".', [created], False, organization)


@keys.command("list")
@click.argument("organization")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def list_keys(organization: str, as_json: bool) -> None:
    """List an organization's keys, oldest first, as the API shows them (never a full key),
    for the day every managing key is lost."""
    organization = organization_name("ORGANIZATION", organization)
    prepare_database()
    try:
        keys = [bodies.dump_key(k) for k in operator.operator_keys(organization)]
    except operator.OrganizationError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps({"organization": organization, "keys": keys}))
        return
    for shown in keys:
        scopes = " ".join(shown["scopes"])
        used = shown["last_used"] or "never"
        click.echo(f"{shown['key']}\t{shown['kind']}\t{shown['name']}\t{scopes}\tlast used {used}")
    count = len(keys)
    click.echo(f'{count} {"key" if count == 1 else "keys"} in organization "{organization}".')


@keys.command("delete")
@click.argument("organization")
@click.argument("reference", metavar="KEY")
def delete_key(organization: str, reference: str) -> None:
    """Delete KEY (its identifier, shown value <identifier>... or full value) of an
    organization at once and for good, recorded in the audit log as the operator's."""
    organization = organization_name("ORGANIZATION", organization)
    prepare_database()
    try:
        deleted = operator.operator_delete(organization, reference)
    except operator.OrganizationError as error:
        raise click.ClickException(str(error)) from None
    shown = bodies.dump_key(deleted)
    click.echo(f'Deleted {shown["name"]} ({shown["key"]}, {shown["kind"]}) of "{organization}".')


@audit_log.command("export")
@click.option("--org", "organization", required=True, help="The organization's name.")
@click.option("--since", help="Only events at or after this ISO 8601 time (with Z or an offset).")
def export_audit(organization: str, since: str | None) -> None:
    """Print an organization's audit events as JSON lines, oldest first."""
    organization = organization_name("--org", organization)
    try:
        moment = None if since is None else Timestamp().deserialize(since)
    except ValidationError as error:
        raise click.ClickException(f"--since: {' '.join(error.messages)}") from None
    prepare_database()
    try:
        for event in audit.exported(organization, moment):
            click.echo(json.dumps(audit_schemas.event.dump(event)))
    except LookupError as error:
        raise click.ClickException(str(error)) from None


class Commands(AppGroup):
    """The application's commands. `flask db ...` (Flask-Migrate) is bound when it is asked
    for: it imports alembic, 10 MB that a worker serving the API never uses."""

    def __init__(self, app: Flask) -> None:
        super().__init__()
        self.app = app

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), "db"})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name == "db":
            register_migrations(self.app)
        return super().get_command(ctx, name)


def register(app: Flask) -> None:
    commands = Commands(app)
    commands.commands.update(app.cli.commands)
    app.cli = commands
    app.cli.add_command(org)
    for name in ("create", "list", "delete"):
        key.add_command(keys.commands[name])
    app.cli.add_command(key)
    app.cli.add_command(audit_log)
    app.cli.add_command(keys)
    app.cli.add_command(first_start_command)

"""The MCP server's tools (docs/design.md, "MCP"). Each is the twin of the REST operation of
the same name: it loads its arguments with the same marshmallow schemas, calls the same
service function and answers the same body, so that no rule exists twice. Its input and
output schemas are that operation's in the OpenAPI document (app/mcp/schemas.py reads
them), which the same schemas generate (app/openapi/document.py): the same enums and
bounds, never retyped.

Nothing here imports the MCP SDK (app/mcp/server.py does) or knows SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import current_app
from marshmallow import EXCLUDE, ValidationError
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException, InternalServerError

from app import idempotency
from app.domain.credentials import Caller
from app.http import errors
from app.identities import schemas as identity_schemas
from app.identities import service as identities
from app.keys import bodies, schemas, service
from app.mcp.schemas import IDEMPOTENCY_KEY, KEY
from app.usage import schemas as usage_schemas
from app.usage import service as usage_service

# A tool names its key `key` (an identity's tool its identity `identity`), where the REST
# path names it `reference` (app/mcp/schemas.py).
IDENTITY = "identity"
DELETED = "Deleted: the key no longer authenticates anything."


@dataclass(frozen=True)
class Tool:
    """A tool as tools/list shows it, and what tools/call runs."""

    name: str  # also the operationId of its REST twin
    title: str
    description: str
    call: Callable[[Caller, dict[str, Any]], dict | None]  # the REST body (None: no body)
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    # The result's text, when it is not the body as JSON.
    text: Callable[[dict], str] | None = None
    names: str = KEY  # what its arguments call the path's `reference`
    no_body: str = DELETED  # its answer's words when the REST answer has no body


def _reference(arguments: dict[str, Any]) -> str:
    """The key the arguments name (422 when they name none)."""
    return schemas.key_reference.load(arguments, unknown=EXCLUDE)[KEY]


def list_keys(caller: Caller, arguments: dict[str, Any]) -> dict:
    return bodies.dump_page(service.list_keys(caller, **schemas.list_arguments.load(arguments)))


def get_key(caller: Caller, arguments: dict[str, Any]) -> dict:
    reference = schemas.key_reference.load(arguments)[KEY]  # and nothing else
    return bodies.dump_key(service.find_key(caller, reference))


def _once(
    caller: Caller, name: str, arguments: dict[str, Any], work: Callable[[dict], dict]
) -> dict:
    """`work(arguments)`, as its REST twin with an Idempotency-Key runs it when the
    arguments carry `idempotency_key` (app/idempotency.py): a retry with the same arguments
    answers the first call's body; the request is the tool and its other arguments."""
    given = arguments.get(IDEMPOTENCY_KEY)
    arguments = {k: v for k, v in arguments.items() if k != IDEMPOTENCY_KEY}
    if given is None:
        return work(arguments)
    if not isinstance(given, str):
        raise errors.invalid({IDEMPOTENCY_KEY: ["Not a valid string."]})
    idempotency_key = idempotency.checked(given, IDEMPOTENCY_KEY)
    sent = f"mcp {name}\n{json.dumps(arguments, sort_keys=True)}".encode()

    def answered() -> idempotency.Answer:
        return idempotency.Answer(201, json.dumps(work(arguments)), {})

    return json.loads(idempotency.run(caller, idempotency_key, sent, answered).body)


def create_key(caller: Caller, arguments: dict[str, Any]) -> dict:
    def create(arguments: dict[str, Any]) -> dict:
        key, full_key = service.create_key(caller, schemas.create_key.load(arguments))
        return bodies.created_key(key, full_key)

    return _once(caller, "create_key", arguments, create)


def update_key(caller: Caller, arguments: dict[str, Any]) -> dict:
    key = service.find_key(caller, _reference(arguments))
    data = schemas.update_key.load(arguments)  # `key` is read-only there: ignored
    return bodies.dump_key(service.update_key(caller, key, data))


def rotate_key(caller: Caller, arguments: dict[str, Any]) -> dict:
    def rotate(arguments: dict[str, Any]) -> dict:
        key = service.find_key(caller, _reference(arguments))
        data = schemas.rotate_key.load({k: v for k, v in arguments.items() if k != KEY})
        return bodies.created_key(*service.rotate_key(caller, key, data))

    return _once(caller, "rotate_key", arguments, rotate)


def get_key_usage(caller: Caller, arguments: dict[str, Any]) -> dict:
    """The REST body, its totals first and only the buckets with uses: an agent reads the
    few days that say something, not a month of zeros."""
    reference = _reference(arguments)
    window = usage_schemas.usage_arguments.load({k: v for k, v in arguments.items() if k != KEY})
    body = usage_schemas.key_usage.dump(usage_service.key_usage(caller, reference, **window))
    buckets = [bucket for bucket in body["buckets"] if bucket["allowed"] or bucket["refused"]]
    return {"total": body.pop("total"), **body, "buckets": buckets}


def usage_text(body: dict) -> str:
    """get_key_usage's result as one sentence (the structured content holds the rest)."""
    total = body["total"]
    refused = sum(total["refused"].values())
    codes = ", ".join(f"{code} {count}" for code, count in sorted(total["refused"].items()))
    days = len(body["buckets"])
    unit = body["granularity"] + ("s" if days != 1 else "")
    return (
        f"{total['allowed']} allowed, {refused} refused{f' ({codes})' if codes else ''} "
        f"between {body['since']} and {body['until']}, on {days} {unit} with uses."
    )


def list_identities(caller: Caller, arguments: dict[str, Any]) -> dict:
    identities.require_manager(caller, reads=True)
    page = identities.list_identities(caller, **identity_schemas.list_arguments.load(arguments))
    return identity_schemas.identity_page.dump(page)


def delete_key(caller: Caller, arguments: dict[str, Any]) -> None:
    reference = schemas.key_reference.load(arguments)[KEY]
    service.delete_key(caller, service.find_key(caller, reference))


def _identity(arguments: dict[str, Any], alone: bool = False) -> tuple[str, dict[str, Any]]:
    """The identity the arguments name, and the others (422 when they name none, or, when
    it must come `alone`, name anything else)."""
    reference = arguments.get(IDENTITY)
    rest = {name: value for name, value in arguments.items() if name != IDENTITY}
    problems: dict[str, list[str]] = {}
    if not isinstance(reference, str):
        problems[IDENTITY] = [
            "Missing data for required field." if reference is None else "Not a valid string."
        ]
    if alone:
        problems |= {name: ["Unknown field."] for name in rest}
    if problems:
        raise errors.invalid(problems)
    return reference, rest


def get_identity(caller: Caller, arguments: dict[str, Any]) -> dict:
    identities.require_manager(caller, reads=True)
    reference, _ = _identity(arguments, alone=True)
    return identities.dump_identity(identities.find_identity(caller, reference))


def create_identity(caller: Caller, arguments: dict[str, Any]) -> dict:
    identities.require_manager(caller)
    return identities.create_identity(caller, identity_schemas.create_identity.load(arguments))


def update_identity(caller: Caller, arguments: dict[str, Any]) -> dict:
    identities.require_manager(caller)
    reference, rest = _identity(arguments)
    return identities.update_identity(
        caller, reference, identity_schemas.update_identity.load(rest)
    )


def delete_identity(caller: Caller, arguments: dict[str, Any]) -> None:
    identities.require_manager(caller)
    reference, _ = _identity(arguments, alone=True)
    identities.delete_identity(caller, reference)


def get_identity_usage(caller: Caller, arguments: dict[str, Any]) -> dict:
    identities.require_manager(caller, reads=True)
    reference, rest = _identity(arguments)
    identity = identities.find_identity(caller, reference)
    window = usage_schemas.usage_arguments.load(rest)
    counted = usage_service.identity_usage(identity.row_id, identity.id, **window)
    return usage_schemas.identity_usage.dump(counted)


TOOLS = (
    Tool(
        "list_keys",
        "List API keys",
        "The keys of your organization, oldest first, one page at a time (page, page_size), "
        "optionally of one kind, one state (active or expired), or unused since a time "
        "(never used, or last used before it). Keys are shown as `<identifier>...`, never "
        "in full.",
        list_keys,
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "get_key",
        "Get an API key",
        "One key of your organization, named by its identifier, its shown form "
        "`<identifier>...` or its full value.",
        get_key,
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "create_key",
        "Create an API key",
        "A new key in your organization, optionally expiring at `expires_at`. The answer "
        "carries the full key, once: it is never shown again, and it stays in this "
        "conversation, so prefer a `custom` key with only the scopes its user needs and an "
        "expiry. Give `idempotency_key` (a UUID) to retry safely: the same key with the same "
        "arguments within 24 hours answers the first call's key instead of making another.",
        create_key,
    ),
    Tool(
        "update_key",
        "Update an API key",
        "Change a key, a partial update of any of "
        + ", ".join(f"`{field}`" for field in sorted(schemas.UPDATABLE))
        + " (at least one; `expires_at`, `rate_limit`, `quota` or `identity` null: none). "
        "The scopes of telemetry and sdk_integration keys are fixed.",
        update_key,
        idempotent=True,
    ),
    Tool(
        "rotate_key",
        "Rotate an API key",
        "Replace a key with a new one of the same name, kind, scopes and policy. The new key "
        "expires at `expires_at` if given (null: never), else when the old key would have, "
        "if that is still ahead. The old key stops at once (`grace_seconds` 0, the default) "
        "or after `grace_seconds`, so its users can switch; a key already replaced cannot "
        "be rotated again (`already_rotated`). The answer carries the new full key, once, "
        "and it stays in this conversation. `idempotency_key` makes a retry safe, as for "
        "create_key.",
        rotate_key,
        destructive=True,
    ),
    Tool(
        "get_key_usage",
        "Get an API key's usage",
        "How often a key of your organization was checked, by UTC `granularity` (`hour` or "
        "`day`, the default) between `since` and `until` (default: the last 30 days; at most "
        "90): allowed, refused by code, the scopes checks named, and the key's scopes no "
        "check named (`unused_scopes`, null when no check named any): the totals first, then "
        "only the buckets with uses. Counts reach it within twice the service's "
        "USAGE_FLUSH_SECONDS.",
        get_key_usage,
        read_only=True,
        idempotent=True,
        text=usage_text,
    ),
    Tool(
        "list_identities",
        "List identities",
        "The identities of your organization (whoever holds keys, in its own terms: its "
        "`external_id`), oldest first, one page at a time, or the one with `external_id`: "
        "each with its limits, which bind all of its keys as one count, what is left of its "
        "quota, and how many keys it holds.",
        list_identities,
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "delete_key",
        "Delete an API key",
        "Revoke a key at once and for good: it no longer authenticates anything.",
        delete_key,
        destructive=True,
        idempotent=True,
    ),
    Tool(
        "get_identity",
        "Get an identity",
        "One identity of your organization, named by its `id` or as "
        "`external_id:<external_id>`: its limits, what is left of its quota, how many keys "
        "it holds.",
        get_identity,
        read_only=True,
        idempotent=True,
        names=IDENTITY,
    ),
    Tool(
        "create_identity",
        "Create an identity",
        "A new identity (whoever holds keys, in your organization's own terms: its "
        "`external_id`, unique in the organization), optionally with a `rate_limit` and a "
        "`quota` that bind every key it holds as one count.",
        create_identity,
        names=IDENTITY,
    ),
    Tool(
        "update_identity",
        "Update an identity",
        "Change an identity (`external_id`, `name`, `metadata`, `rate_limit`, `quota`): its "
        "limits bind its keys at once; a quota whose period changes keeps what was used.",
        update_identity,
        idempotent=True,
        names=IDENTITY,
    ),
    Tool(
        "delete_identity",
        "Delete an identity",
        "Delete an identity that holds no key (`identity_in_use` while it holds some).",
        delete_identity,
        destructive=True,
        idempotent=True,
        names=IDENTITY,
        no_body="Deleted: the identity is gone.",
    ),
    Tool(
        "get_identity_usage",
        "Get an identity's usage",
        "The usage of the keys an identity holds, added up, by UTC `granularity` (`hour` or "
        "`day`) between `since` and `until`, in the shape of get_key_usage's answer.",
        get_identity_usage,
        read_only=True,
        idempotent=True,
        names=IDENTITY,
    ),
)


def refusal(error: Exception) -> HTTPException | ValidationError:
    """The refusal the REST twin answers `error` with: the error itself when raised as a
    refusal, 503 when the database does not answer, else a fault of the service (500,
    logged as the REST answer's is)."""
    if isinstance(error, OperationalError | PoolTimeout):
        error = errors.database_unavailable(error) or error
    if isinstance(error, HTTPException | ValidationError):
        return error
    current_app.logger.error("An MCP tool call failed", exc_info=error)
    return InternalServerError()

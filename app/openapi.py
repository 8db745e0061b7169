"""The OpenAPI 3.1 document, generated once per app from its routes and the marshmallow
schemas of app/keys/schemas.py (apispec and its marshmallow plugin).

Each route of the url_map (but `static`, the docs blueprint that serves this document, and
the page blueprint, a client of the API rather than a part of it) must have an entry in
OPERATIONS: a route without one stops the document from being built, so the document
cannot fall behind the code. Bodies and list parameters come from
the schemas; this module adds what they cannot say: which statuses each operation
answers, with which problem codes, and which key it needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import metadata, version
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Flask
from marshmallow import Schema

from app import errors
from app.audit import schemas as audit_schemas
from app.checks import schemas as checks_schemas
from app.checks.views import ANY_METHOD
from app.keys import schemas
from app.leaks.schemas import LeakReport
from app.request_body import FORM
from app.scopes import CUSTOM, FIXED, KINDS, MANAGING_KINDS, SCOPES, SDK_INTEGRATION, to_names

OPENAPI_VERSION = "3.1.0"
# Endpoints that are not part of the API the document describes.
UNDOCUMENTED_BLUEPRINTS = frozenset({"docs", "page"})
UNDOCUMENTED_ENDPOINTS = frozenset({"static"})
UNDOCUMENTED_METHODS = frozenset({"HEAD", "OPTIONS"})

BASIC, BEARER = "basicAuth", "bearerAuth"
# A key may use the key-management endpoints when its kind is one of these; the
# security requirements name them as roles (OpenAPI 3.1 allows role names for any scheme).
MANAGING_ROLES = tuple(kind for kind in KINDS if kind in MANAGING_KINDS)

# The problem codes of the statuses that carry more than errors.CODES's default.
PROBLEM_CODES = {
    401: ("unauthorized", "expired_key"),
    403: ("forbidden", "scope_exceeds_caller"),
    409: ("immutable_key",),
}

# What each error status means, as the document says it.
ERROR_MEANINGS = {
    400: "The request is not HTTP the server can read, or its body is not a JSON object "
    "with unique member names.",
    401: "No key, a malformed Authorization header, or an unknown or deleted key "
    "(`unauthorized`); an expired key (`expired_key`).",
    403: "A telemetry key (`forbidden`), a key that lacks scopes of the key it would alter "
    "or revoke (`forbidden`), or scopes beyond the calling key's own "
    "(`scope_exceeds_caller`); on /mcp, any key but an sdk_integration key (`forbidden`).",
    404: "No key of the caller's organization has this reference.",
    409: "The scopes of a telemetry or sdk_integration key cannot change (`immutable_key`).",
    413: "The request body is larger than 64 KiB.",
    414: "The request line is longer than the server accepts.",
    415: "The request body is not sent as application/json.",
    417: "The request's Expect header cannot be met.",
    422: "A field or query parameter is refused; `errors` names each with its messages.",
    429: "An abuse limit refused the request; retry after `Retry-After` seconds.",
    431: "Too many request headers, or one too large.",
    500: "The server could not complete the request.",
    501: "The request's transfer coding is not supported.",
    503: "The database does not answer; retry after `Retry-After` seconds.",
}
RETRY_AFTER = {
    "description": "Whole seconds to wait before retrying.",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}
ERROR_HEADERS = {
    401: {
        "WWW-Authenticate": {
            "description": '`Basic realm="api"`; `Bearer realm="mcp"` on /mcp.',
            "required": True,
            "schema": {"type": "string"},
        }
    },
    429: {"Retry-After": RETRY_AFTER},
    503: {"Retry-After": RETRY_AFTER},
}

# Every request may meet these: gunicorn's refusals (app/gunicorn_errors.py), a fault,
# the database gone.
ANY_REQUEST = (400, 414, 417, 431, 500, 501, 503)
# Every /api/keys request may meet these too: authentication and the abuse limits.
KEYS_REQUEST = (*ANY_REQUEST, 401, 403, 429)
WITH_BODY = (413, 415, 422)


@dataclass(frozen=True)
class Operation:
    """What the schemas and the url_map do not say about one endpoint and method."""

    summary: str
    description: str
    status: int
    answer: str
    errors: tuple[int, ...]
    response: type[Schema] | dict | None = None
    body: type[Schema] | dict | None = None
    query: type[Schema] | None = None
    headers: dict | None = None
    secured: bool = True
    body_required: bool = True
    # Who may call it, when not every managing kind by either scheme.
    schemes: tuple[str, ...] = (BASIC, BEARER)
    roles: tuple[str, ...] = MANAGING_ROLES
    # Responses of its own, beside (or instead of) the shared error responses.
    responses: dict[int, dict] | None = None
    # The body as a form too (RFC 7662 clients send one), beside JSON.
    form: bool = False
    # Where one endpoint answers several methods alike, each method's own id.
    operation_id: str | None = None


_MANAGING = (
    "Needs a key of kind " + " or ".join(f"`{role}`" for role in MANAGING_ROLES) + " (a "
    "telemetry key gets 403)."
)
_LOCATION = {
    "Location": {
        "description": "The path of the new key: `/api/keys/<identifier>`.",
        "required": True,
        "schema": {"type": "string"},
    }
}

FORWARDED_HEADERS = {
    "X-Api-Key-Id": {
        "description": "The key's identifier.",
        "required": True,
        "schema": {"type": "string"},
    },
    "X-Api-Key-Kind": {
        "description": "The key's kind.",
        "required": True,
        "schema": {"type": "string", "enum": list(KINDS)},
    },
    "X-Api-Key-Scopes": {
        "description": "The key's scopes, space-separated, in the scope table's order.",
        "required": True,
        "schema": {"type": "string"},
    },
    "X-Api-Key-Organization": {
        "description": "The name of the key's organization.",
        "required": True,
        "schema": {"type": "string"},
    },
}
INTROSPECTION = {
    "type": "object",
    "description": "RFC 7662's answer: only `active` when it is false.",
    "properties": {
        "active": {"type": "boolean"},
        "scope": {
            "type": "string",
            "description": "The key's scopes, space-separated, in the scope table's order.",
        },
        "client_id": {"type": "string", "description": "The key's identifier."},
        "token_type": {"type": "string", "enum": ["api_key"]},
        "iat": {"type": "integer", "description": "When the key was made, Unix seconds."},
        "exp": {
            "type": "integer",
            "description": "When the key expires, Unix seconds; absent when it does not.",
        },
        "kind": {"type": "string", "enum": list(KINDS)},
        "name": {"type": "string"},
    },
    "required": ["active"],
    "additionalProperties": False,
}
JSON_RPC_MESSAGE = {
    "type": "object",
    "description": "A JSON-RPC 2.0 message: a request (with `id`), a notification, or an "
    "answer (`result` or `error`).",
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "method": {"type": "string"},
        "params": {"type": "object"},
        "result": {"type": "object"},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
    },
    "required": ["jsonrpc"],
}
# What the protocol (the SDK) answers, beside the service's own refusals.
MCP_RESPONSES = {
    202: {"description": "A notification or an answer, accepted; no body."},
    400: {
        "description": ERROR_MEANINGS[400] + " Or a JSON object that is no JSON-RPC message "
        "of the protocol (a JSON-RPC error).",
        "content": {
            errors.PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}},
            "application/json": {"schema": JSON_RPC_MESSAGE},
        },
    },
    406: {
        "description": "The request's Accept header does not take application/json.",
        "content": {"application/json": {"schema": JSON_RPC_MESSAGE}},
    },
}

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("keys.list_keys", "GET"): Operation(
        "List API keys",
        "The keys of the caller's organization, oldest first (ties by identifier), one page "
        "at a time, optionally of one kind. " + _MANAGING,
        200,
        "One page of keys, and how many there are in all.",
        (*KEYS_REQUEST, 422),
        response=schemas.KeyPage,
        query=schemas.ListArguments,
    ),
    ("keys.create_key", "POST"): Operation(
        "Create an API key",
        "A new key in the caller's organization. The response is the only one that carries "
        "the full `key`. " + _MANAGING + " Every scope of the new key (given for `custom`, "
        "fixed by the kind otherwise) must be held by the caller, else 403 "
        "`scope_exceeds_caller`.",
        201,
        "The new key, with its full value.",
        (*KEYS_REQUEST, *WITH_BODY),
        response=schemas.KeyOutput,
        body=schemas.CreateKey,
        headers=_LOCATION,
    ),
    ("keys.get_key", "GET"): Operation(
        "Get an API key",
        "One key of the caller's organization. " + _MANAGING,
        200,
        "The key.",
        (*KEYS_REQUEST, 404),
        response=schemas.KeyOutput,
    ),
    ("keys.update_key", "PUT"): Operation(
        "Update an API key",
        "Rename and/or rescope a key (a partial update: `name`, `scopes` or both). "
        + _MANAGING
        + " The caller must hold every scope of the key (else 403 `forbidden`) and every "
        "new scope (else 403 `scope_exceeds_caller`).",
        200,
        "The updated key.",
        (*KEYS_REQUEST, 404, *WITH_BODY, 409),
        response=schemas.KeyOutput,
        body=schemas.UpdateKey,
    ),
    ("keys.delete_key", "DELETE"): Operation(
        "Delete an API key",
        "Revoke a key at once and for good. "
        + _MANAGING
        + " The caller must hold every scope of the key (else 403 `forbidden`).",
        204,
        "Deleted: the key no longer works.",
        (*KEYS_REQUEST, 404),
    ),
    ("mcp.mcp", "POST"): Operation(
        "MCP server",
        "One JSON-RPC message of the Model Context Protocol over Streamable HTTP: stateless "
        "(no session), answered in JSON, for every protocol version the `mcp` SDK serves. "
        "Its tools are the twins of the key operations (see the README). Needs an "
        "`sdk_integration` key as a Bearer token: none, another scheme, or a bad key is 401 "
        '(`WWW-Authenticate: Bearer realm="mcp"`), another kind of key 403. The body is read '
        "as every JSON body is (415, 413, 400) before the protocol sees it.",
        200,
        "The JSON-RPC answer to a request: its result, or a JSON-RPC error.",
        (*ANY_REQUEST, 401, 403, 429, *WITH_BODY),
        response=JSON_RPC_MESSAGE,
        body=JSON_RPC_MESSAGE,
        schemes=(BEARER,),
        roles=(SDK_INTEGRATION,),
        responses=MCP_RESPONSES,
    ),
    ("keys.rotate_key", "POST"): Operation(
        "Rotate an API key",
        "Replace a key: a new key with its name, kind and scopes (the full value, once), "
        "and the old key deleted at once (`grace_seconds` 0, the default) or expiring "
        "`grace_seconds` from now (or sooner, if it already expires sooner), written "
        "together. The body is optional (no body needs no Content-Type). "
        + _MANAGING
        + " The caller must hold every scope of the key (else 403 `forbidden`). Works for "
        "immutable kinds and for expired keys.",
        201,
        "The replacement, with its full value.",
        (*KEYS_REQUEST, 404, *WITH_BODY),
        response=schemas.KeyOutput,
        body=schemas.RotateKey,
        body_required=False,
        headers=_LOCATION,
    ),
    ("audit.list_events", "GET"): Operation(
        "List audit events",
        "The organization's key events, newest first, one page at a time: every create, "
        "update, rotation, delete and leak-report revocation, by whom, from where. "
        + _MANAGING
        + " Only a key that holds every scope (an sdk_integration key, or a custom key with "
        "all eleven) may read it, else 403 `forbidden`.",
        200,
        "One page of events, and how many match in all.",
        (*KEYS_REQUEST, 422),
        response=audit_schemas.EventPage,
        query=audit_schemas.EventArguments,
    ),
    ("checks.introspect", "POST"): Operation(
        "Introspect an API key",
        "RFC 7662 token introspection, for a service that accepts this organization's keys: "
        "the key to check as `token`, in a form (`application/x-www-form-urlencoded`, as "
        'RFC 7662 clients send it) or a JSON object. `{"active": false}` and nothing else '
        "for any key that does not authenticate now (unknown, malformed, deleted, expired, "
        "of another organization); its facts for one that does. Checking is a use of the "
        "key (`last_used`). Counted per calling key under `RATELIMIT_INTROSPECT`. " + _MANAGING,
        200,
        "Whether the key authenticates now, and if it does, its facts.",
        (*KEYS_REQUEST, *WITH_BODY),
        response=INTROSPECTION,
        body=checks_schemas.Introspection,
        form=True,
    ),
    **{
        ("checks.forward_auth", method): Operation(
            "Forward auth",
            "For a gateway (nginx `auth_request`, Traefik `ForwardAuth`, Caddy "
            "`forward_auth`): any method, body ignored. Checks the request's own key (any "
            "kind, telemetry included) against every scope named in the query "
            "(`?scope=monitor:read&scope=site:read`; none: any valid key passes). 204 with "
            "the key's facts in headers for the gateway to pass upstream; 401 for no, bad, "
            "deleted or expired keys; 403 `forbidden` naming the missing scopes; 422 for a "
            "scope no key can hold. Checking is a use of the key. Counted per checked key "
            "under `RATELIMIT_INTROSPECT`.",
            204,
            "The key holds every scope named.",
            (*KEYS_REQUEST, 422),
            query=checks_schemas.ForwardAuthArguments,
            headers=FORWARDED_HEADERS,
            roles=KINDS,
            operation_id="forward_auth" if method == "GET" else f"forward_auth_{method.lower()}",
        )
        for method in ANY_METHOD
        if method not in UNDOCUMENTED_METHODS
    },
    ("leaks.revoke", "POST"): Operation(
        "Report leaked API keys",
        "For a secret scanner or a person who found keys where they should not be: no "
        "authentication, since holding a key is the right to end it. Every listed key that "
        "exists, of any organization, is deleted at once and recorded in its "
        "organization's audit log (`key.revoked`, actor `leak-report`). The answer is 202 "
        '`{"received": N}` whatever the keys were: it tells nothing about them. Each '
        "report counts toward the failed-authentication limit of its address.",
        202,
        "The report, received; N is the number of keys listed.",
        (*ANY_REQUEST, 429, *WITH_BODY),
        response={
            "type": "object",
            "properties": {"received": {"type": "integer", "minimum": 1, "maximum": 100}},
            "required": ["received"],
        },
        body=LeakReport,
        secured=False,
    ),
    ("health.healthz", "GET"): Operation(
        "Health",
        "200 when the database answers, 503 when it does not. No authentication.",
        200,
        "The database answers.",
        ANY_REQUEST,
        response={
            "type": "object",
            "properties": {"status": {"const": "ok"}},
            "required": ["status"],
        },
        secured=False,
    ),
}

LICENSE = metadata("api-keys-service")["License-Expression"]
INFO = {
    "description": "Create, list, read, update and delete API keys that carry permission "
    "scopes. Every request to `/api/keys` presents a key: as the user name of HTTP Basic "
    "authentication with an empty password, or as a Bearer token. Every error is "
    "`application/problem+json` (RFC 9457). A path answers 405 `method_not_allowed`, "
    "with `Allow`, to a method it does not list; an unknown path answers 404 `not_found`.",
    # The project's license, as its package metadata (pyproject.toml) gives it.
    "license": {"name": LICENSE, "identifier": LICENSE},
}
# The service that serves this document (a relative URL: wherever it runs).
SERVERS = [{"url": "/", "description": "This service"}]
SECURITY_SCHEMES = {
    BASIC: {
        "type": "http",
        "scheme": "basic",
        "description": "The key as the user name, with an empty password (`curl -u KEY:`).",
    },
    BEARER: {
        "type": "http",
        "scheme": "bearer",
        "description": "The key as a Bearer token.",
    },
}
PROBLEM = {
    "type": "object",
    "description": "An error, as RFC 9457 problem details.",
    "properties": {
        "type": {"type": "string", "description": "Always `about:blank`."},
        "title": {"type": "string", "description": "The HTTP status phrase."},
        "status": {"type": "integer", "description": "The HTTP status code."},
        "detail": {"type": "string", "description": "What went wrong, for people."},
        "code": {"type": "string", "description": "The stable machine name of the error."},
        "errors": {
            "type": "object",
            "description": "Each refused field or parameter, with its messages.",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
    },
    "required": ["type", "title", "status", "detail", "code"],
}
# What the key output's fields are beyond their marshmallow type (fields.Function carries
# none; the times are strings in the date-time format).
KEY_FIELDS = {
    "key": {
        "type": "string",
        "description": "`<identifier>...`; the full key in the create response only.",
    },
    "kind": {"type": "string", "enum": list(KINDS)},
    "scopes": {"type": "array", "items": {"type": "string", "enum": list(SCOPES)}},
    "immutable": {"type": "boolean"},
    "last_used": {"type": ["string", "null"], "format": "date-time"},
    "created": {"type": "string", "format": "date-time"},
    "updated": {"type": "string", "format": "date-time"},
    "expires_at": {
        "type": ["string", "null"],
        "format": "date-time",
        "description": "From this time on the key authenticates nothing; null: never.",
    },
    "created_by": {
        "type": ["string", "null"],
        "description": "`<identifier>...` of the key whose request made this one; null: the "
        "operator (CLI or first start).",
    },
}
EXPIRY_INPUT = {
    "type": ["string", "null"],
    "format": "date-time",
    "description": "A time in the future, with `Z` or an offset; null: never expires.",
}
# Read-only fields are not in the request schemas (a generated client offers no such
# argument), but a body that carries them back, as a client that edits a key it read does,
# is not refused.
READ_ONLY_INPUT = (
    "The read-only fields of a key ("
    + ", ".join(f"`{field}`" for field in sorted(schemas.READ_ONLY))
    + ") are accepted and ignored, whatever their values; any other unknown field is 422."
)
# The control characters names may not hold (C0, DEL, C1), as JSON Schema pattern escapes.
_CONTROL = "\\x00-\\x1f\\x7f-\\x9f"


def _name_input() -> dict[str, str]:
    """The name rule, made when the document is built (not when a worker starts): Python's
    other white space (what str.strip() removes) is found among 65,536 characters."""
    space = "".join(
        f"\\u{ord(c):04x}"
        for c in map(chr, range(0x10000))
        if c.isspace() and not (c < " " or "\x7f" <= c <= "\x9f")
    )
    return {
        "description": "1 to 200 characters after trimming surrounding white space (stored "
        "trimmed); no control characters.",
        # Something besides white space, and no control character.
        "pattern": f"^[^{_CONTROL}]*[^{_CONTROL}{space}][^{_CONTROL}]*$",
    }


def document(app: Flask) -> dict[str, Any]:
    """The document of `app`, built on first use and kept with the app."""
    if "openapi" not in app.extensions:
        app.extensions["openapi"] = build(app)
    return app.extensions["openapi"]


def documented_routes(app: Flask) -> set[tuple[str, str, str]]:
    """(OpenAPI path, method, endpoint) of every route the document must describe."""
    return {
        (openapi_path(rule.rule), method, rule.endpoint)
        for rule in app.url_map.iter_rules()
        if rule.endpoint not in UNDOCUMENTED_ENDPOINTS
        and rule.endpoint.partition(".")[0] not in UNDOCUMENTED_BLUEPRINTS
        for method in sorted(rule.methods - UNDOCUMENTED_METHODS)
    }


def openapi_path(rule: str) -> str:
    """`/api/keys/<reference>` as OpenAPI writes it: `/api/keys/{reference}`."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def build(app: Flask) -> dict[str, Any]:
    spec = APISpec(
        title="API Keys Service",
        version=version("api-keys-service"),
        openapi_version=OPENAPI_VERSION,
        plugins=[MarshmallowPlugin()],
        info=INFO,
        servers=SERVERS,
    )
    for name, scheme in SECURITY_SCHEMES.items():
        spec.components.security_scheme(name, scheme)
    spec.components.schema("Problem", PROBLEM)
    for status in ERROR_MEANINGS:
        spec.components.response(errors.CODES[status], _error(status))
    for schema in (
        schemas.KeyOutput,
        schemas.KeyPage,
        schemas.CreateKey,
        schemas.UpdateKey,
        schemas.RotateKey,
        audit_schemas.Event,
        audit_schemas.EventPage,
    ):
        spec.components.schema(schema.__name__, schema=schema)
    routes = documented_routes(app)
    # An operation of a blueprint switched off (MCP_ENABLED) describes nothing, nor is stale.
    registered = {op for op in OPERATIONS if op[0].partition(".")[0] in app.blueprints}
    stale = registered - {(endpoint, method) for _, method, endpoint in routes}
    if stale:
        raise ValueError(f"described, but no route of the app: {sorted(stale)}")
    paths: dict[str, dict[str, dict]] = {}
    for path, method, endpoint in sorted(routes):
        paths.setdefault(path, {})[method.lower()] = _operation(
            endpoint, OPERATIONS[endpoint, method], path
        )
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    document = spec.to_dict()
    _complete_schemas(document["components"]["schemas"])
    return document


def _complete_schemas(components: dict[str, dict]) -> None:
    """Say what the marshmallow schemas' fields cannot: every output field is always
    present, the computed ones with their types; input ignores read-only fields; and the
    rules the schemas check across fields (their `validates_schema` methods)."""
    components["KeyOutput"]["properties"].update(KEY_FIELDS)
    components["Event"]["properties"].update(audit_schemas.EVENT_FIELDS)
    for name in ("KeyOutput", "KeyPage", "Event", "EventPage"):
        components[name]["required"] = list(components[name]["properties"])
    name_input = _name_input()
    for name in ("CreateKey", "UpdateKey"):
        components[name]["properties"]["name"].update(name_input)
        components[name]["description"] = READ_ONLY_INPUT
    components["CreateKey"]["allOf"] = [
        _when_kind(CUSTOM, {"required": ["scopes"], "properties": {"scopes": {"minItems": 1}}}),
        *(
            _when_kind(kind, {"properties": {"scopes": _exactly(bits)}})
            for kind, bits in FIXED.items()
        ),
    ]
    # An update changes at least one field, said in words: a schema of anyOf alternatives is
    # one that client generators cannot make a model of. No key may be left without scopes.
    update = components["UpdateKey"]
    update["description"] = (
        "At least one of "
        + ", ".join(f"`{field}`" for field in sorted(schemas.UPDATABLE))
        + " (422 otherwise). "
        + READ_ONLY_INPUT
    )
    for name in ("CreateKey", "UpdateKey", "RotateKey"):
        components[name]["properties"]["expires_at"] = EXPIRY_INPUT
    update["properties"]["scopes"]["minItems"] = 1
    update["properties"]["kind"]["description"] = "Only the key's own kind (422 otherwise)."


def _when_kind(kind: str, then: dict) -> dict:
    return {"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]}, "then": then}


def _exactly(bits: int) -> dict:
    """An array of exactly these scopes, in any order, duplicates allowed."""
    names = to_names(bits)
    return {
        "items": {"enum": list(names)},
        "allOf": [{"contains": {"const": name}} for name in names],
    }


def _operation(endpoint: str, operation: Operation, path: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "operationId": operation.operation_id or endpoint.rpartition(".")[2],
        "summary": operation.summary,
        "description": operation.description,
        "tags": [endpoint.partition(".")[0]],
        "responses": {
            str(operation.status): _success(operation),
            **{
                str(status): {"$ref": f"#/components/responses/{errors.CODES[status]}"}
                for status in sorted(set(operation.errors))
            },
            **{str(status): answer for status, answer in (operation.responses or {}).items()},
        },
    }
    if operation.secured:
        result["security"] = [
            {scheme: [role]} for scheme in operation.schemes for role in operation.roles
        ]
    else:
        result["security"] = []
    parameters = [_path_parameter(name) for name in re.findall(r"{([^}]+)}", path)]
    if operation.query is not None:
        parameters.append({"in": "query", "schema": operation.query})
    if parameters:
        result["parameters"] = parameters
    if operation.body is not None:
        media_types = ("application/json", FORM) if operation.form else ("application/json",)
        result["requestBody"] = {
            "required": operation.body_required,
            "content": {media_type: {"schema": operation.body} for media_type in media_types},
        }
    return result


def _success(operation: Operation) -> dict[str, Any]:
    response: dict[str, Any] = {"description": operation.answer}
    if operation.response is not None:
        response["content"] = {"application/json": {"schema": operation.response}}
    if operation.headers:
        response["headers"] = operation.headers
    return response


def _error(status: int) -> dict[str, Any]:
    """The plain Problem schema, its `status` and `code` in words: a schema narrowed per
    status (allOf with a `const`) is one that client generators cannot type."""
    codes = PROBLEM_CODES.get(status, (errors.CODES[status],))
    response: dict[str, Any] = {
        "description": f"{ERROR_MEANINGS[status]} `status` {status}, `code` "
        + " or ".join(f"`{code}`" for code in codes)
        + ".",
        "content": {errors.PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    if status in ERROR_HEADERS:
        response["headers"] = ERROR_HEADERS[status]
    return response


def _path_parameter(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": "The key's identifier, its shown form `<identifier>...`, or the full key.",
        "schema": {"type": "string", "minLength": 1},
    }

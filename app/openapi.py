"""The OpenAPI 3.1 document, generated once per app from its routes and the marshmallow
schemas of app/keys/schemas.py (apispec and its marshmallow plugin).

Each route of the url_map (but `static` and the docs blueprint that serves this document)
must have an entry in OPERATIONS: a route without one stops the document from being
built, so the document cannot fall behind the code. Bodies and list parameters come from
the schemas; this module adds what they cannot say: which statuses each operation
answers, with which problem codes, and which key it needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Flask
from marshmallow import Schema

from app import errors
from app.keys import schemas
from app.scopes import CUSTOM, FIXED, KINDS, MANAGING_KINDS, SCOPES, to_names

OPENAPI_VERSION = "3.1.0"
# Endpoints that are not part of the API the document describes.
UNDOCUMENTED_BLUEPRINTS = frozenset({"docs"})
UNDOCUMENTED_ENDPOINTS = frozenset({"static"})
UNDOCUMENTED_METHODS = frozenset({"HEAD", "OPTIONS"})

BASIC, BEARER = "basicAuth", "bearerAuth"
# A key may use the key-management endpoints when its kind is one of these; the
# security requirements name them as roles (OpenAPI 3.1 allows role names for any scheme).
MANAGING_ROLES = tuple(kind for kind in KINDS if kind in MANAGING_KINDS)

# The problem codes of the statuses that carry more than errors.CODES's default.
PROBLEM_CODES = {403: ("forbidden", "scope_exceeds_caller"), 409: ("immutable_key",)}

# What each error status means, as the document says it.
ERROR_MEANINGS = {
    400: "The request is not HTTP the server can read, or its body is not a JSON object "
    "with unique member names.",
    401: "No key, a malformed Authorization header, or an unknown or deleted key.",
    403: "A telemetry key (`forbidden`), a key that lacks scopes of the key it would alter "
    "or revoke (`forbidden`), or scopes beyond the calling key's own "
    "(`scope_exceeds_caller`).",
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
            "description": 'Always `Basic realm="api"`.',
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
    body: type[Schema] | None = None
    query: type[Schema] | None = None
    headers: dict | None = None
    secured: bool = True


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

INFO = {
    "description": "Create, list, read, update and delete API keys that carry permission "
    "scopes. Every request to `/api/keys` presents a key: as the user name of HTTP Basic "
    "authentication with an empty password, or as a Bearer token. Every error is "
    "`application/problem+json` (RFC 9457). A path answers 405 `method_not_allowed`, "
    "with `Allow`, to a method it does not list; an unknown path answers 404 `not_found`.",
}
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
}
READ_ONLY_INPUT = {"description": "Read-only: accepted and ignored, whatever its value."}
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
    )
    for name, scheme in SECURITY_SCHEMES.items():
        spec.components.security_scheme(name, scheme)
    spec.components.schema("Problem", PROBLEM)
    for status in ERROR_MEANINGS:
        spec.components.response(errors.CODES[status], _error(status))
    for schema in (schemas.KeyOutput, schemas.KeyPage, schemas.CreateKey, schemas.UpdateKey):
        spec.components.schema(schema.__name__, schema=schema)
    routes = documented_routes(app)
    stale = set(OPERATIONS) - {(endpoint, method) for _, method, endpoint in routes}
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
    for name in ("KeyOutput", "KeyPage"):
        components[name]["required"] = list(components[name]["properties"])
    name_input = _name_input()
    for name in ("CreateKey", "UpdateKey"):
        components[name]["properties"]["name"].update(name_input)
        for field in sorted(schemas.READ_ONLY):
            components[name]["properties"][field] = READ_ONLY_INPUT
    components["CreateKey"]["allOf"] = [
        _when_kind(CUSTOM, {"required": ["scopes"], "properties": {"scopes": {"minItems": 1}}}),
        *(
            _when_kind(kind, {"properties": {"scopes": _exactly(bits)}})
            for kind, bits in FIXED.items()
        ),
    ]
    # An update changes the name, the scopes or both; no key may be left without scopes.
    update = components["UpdateKey"]
    update["anyOf"] = [{"required": ["name"]}, {"required": ["scopes"]}]
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
        "operationId": endpoint.rpartition(".")[2],
        "summary": operation.summary,
        "description": operation.description,
        "tags": [endpoint.partition(".")[0]],
        "responses": {
            str(operation.status): _success(operation),
            **{
                str(status): {"$ref": f"#/components/responses/{errors.CODES[status]}"}
                for status in sorted(set(operation.errors))
            },
        },
    }
    if operation.secured:
        result["security"] = [
            {scheme: [role]} for scheme in SECURITY_SCHEMES for role in MANAGING_ROLES
        ]
    else:
        result["security"] = []
    parameters = [_path_parameter(name) for name in re.findall(r"{([^}]+)}", path)]
    if operation.query is not None:
        parameters.append({"in": "query", "schema": operation.query})
    if parameters:
        result["parameters"] = parameters
    if operation.body is not None:
        result["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": operation.body}},
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
    codes = PROBLEM_CODES.get(status, (errors.CODES[status],))
    schema = {
        "allOf": [
            {"$ref": "#/components/schemas/Problem"},
            {
                "properties": {
                    "status": {"const": status},
                    "code": {"enum": list(codes)} if len(codes) > 1 else {"const": codes[0]},
                }
            },
        ]
    }
    response: dict[str, Any] = {
        "description": ERROR_MEANINGS[status],
        "content": {errors.PROBLEM_JSON: {"schema": schema}},
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

"""The OpenAPI 3.1 document, assembled once per app from its routes and what each view
carries (app/http/operations.py's `@documented`), with apispec and its marshmallow plugin.

Each route of the url_map (but `static`, the docs blueprint that serves this document, and
the page blueprint, a client of the API rather than a part of it) must carry its
operation: a route without one stops the document from being built, so the document
cannot fall behind the code. Bodies and list parameters come from the schemas.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import metadata, version
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Flask
from marshmallow import fields

from app.audit.schemas import EVENT_FIELDS
from app.http import errors
from app.http.operations import (
    BASIC,
    BEARER,
    ERROR_HEADERS,
    ERROR_MEANINGS,
    IDEMPOTENCY_KEY,
    IDEMPOTENT_REPLAYED,
    PROBLEM,
    PROBLEM_CODES,
    Operation,
    operation_of,
)
from app.http.request_body import FORM
from app.keys import json_schema
from app.webhooks.schemas import WEBHOOK_FIELDS

OPENAPI_VERSION = "3.1.0"
# Endpoints that are not part of the API the document describes (GET /metrics is
# Prometheus's text format for an operator's scraper, documented in docs/metrics.md).
UNDOCUMENTED_BLUEPRINTS = frozenset({"docs", "page", "metrics"})
UNDOCUMENTED_ENDPOINTS = frozenset({"static"})
UNDOCUMENTED_METHODS = frozenset({"HEAD", "OPTIONS"})

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
PROBLEM_SCHEMA = {
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
            "description": "Each refused field or parameter, with its messages (`_schema`: the "
            "body as a whole, such as an update that names nothing to change).",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
        "identity": {
            "type": "string",
            "description": "With 409 `identity_exists`: the `id` of the identity that has the "
            "external id.",
        },
    },
    "required": ["type", "title", "status", "detail", "code"],
}
# The outputs whose every field is always present.
OUTPUTS = (
    "KeyOutput",
    "KeyPage",
    "Event",
    "EventPage",
    "OrganizationOutput",
    "PolicyOutput",
    "EndpointOutput",
    "EndpointWithSecret",
    "EndpointList",
    "DeliveryOutput",
    "DeliveryPage",
)


def text(app: Flask) -> str:
    """The document of `app` as JSON, built and written on first use and kept with the app:
    every request for it sends the same text."""
    if "openapi" not in app.extensions:
        app.extensions["openapi"] = json.dumps(build(app))
    return app.extensions["openapi"]


def document(app: Flask) -> dict[str, Any]:
    """The document of `app`, read from its text."""
    return json.loads(text(app))


def documented_routes(app: Flask) -> set[tuple[str, str, str]]:
    """(OpenAPI path, method, endpoint) of every route the document must describe."""
    return {
        (openapi_path(rule.rule), method, rule.endpoint)
        for rule in app.url_map.iter_rules()
        if rule.endpoint not in UNDOCUMENTED_ENDPOINTS
        and rule.endpoint.partition(".")[0] not in UNDOCUMENTED_BLUEPRINTS
        for method in sorted(rule.methods - UNDOCUMENTED_METHODS)
    }


def _deep_object(converter: Any, field: fields.Field, **kwargs: Any) -> dict[str, Any]:
    """A Dict in a query (`metadata[name]=value`) is OpenAPI's deepObject, exploded."""
    return {"style": "deepObject", "explode": True} if isinstance(field, fields.Dict) else {}


def openapi_path(rule: str) -> str:
    """`/api/keys/<reference>` as OpenAPI writes it: `/api/keys/{reference}`."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def build(app: Flask) -> dict[str, Any]:
    spec = APISpec(
        title="API Keys Service",
        version=version("api-keys-service"),
        openapi_version=OPENAPI_VERSION,
        plugins=[plugin := MarshmallowPlugin()],
        info=INFO,
        servers=SERVERS,
    )
    plugin.converter.add_parameter_attribute_function(_deep_object)
    for name, scheme in SECURITY_SCHEMES.items():
        spec.components.security_scheme(name, scheme)
    spec.components.schema("Problem", PROBLEM_SCHEMA)
    for status in ERROR_MEANINGS:
        spec.components.response(errors.CODES[status], _error(status))
    paths: dict[str, dict[str, dict]] = {}
    for path, method, endpoint in sorted(documented_routes(app)):
        paths.setdefault(path, {})[method.lower()] = _operation(app, endpoint, method, path)
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    document = spec.to_dict()
    _complete_schemas(document["components"]["schemas"])
    return document


def _complete_schemas(components: dict[str, dict]) -> None:
    """Say what the marshmallow schemas' fields cannot: the computed output fields' types,
    every output field always present, and what the key inputs take."""
    components["KeyOutput"]["properties"].update(json_schema.OUTPUT_FIELDS)
    components["Event"]["properties"].update(EVENT_FIELDS)
    for name, properties in WEBHOOK_FIELDS.items():
        components[name]["properties"].update(properties)
    for name in OUTPUTS:
        components[name]["required"] = list(components[name]["properties"])
    json_schema.complete_inputs(components)


def _operation(app: Flask, endpoint: str, method: str, path: str) -> dict[str, Any]:
    """The operation the view of `endpoint` carries, for `method` of `path`."""
    operation = operation_of(app.view_functions[endpoint])
    if operation is None:
        raise KeyError(f"the view of {endpoint} documents no operation (app/http/operations.py)")
    name = endpoint.rpartition(".")[2]
    result: dict[str, Any] = {
        "operationId": (operation.operation_ids or {}).get(method, name),
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
    if operation.idempotent:
        parameters.append(IDEMPOTENCY_KEY)
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
    if operation.headers or operation.idempotent:
        replayed = IDEMPOTENT_REPLAYED if operation.idempotent else {}
        response["headers"] = {**(operation.headers or {}), **replayed}
    return response


def _error(status: int) -> dict[str, Any]:
    """The plain Problem schema, its `status` and `code` in words: a schema narrowed per
    status (allOf with a `const`) is one that client generators cannot type."""
    codes = PROBLEM_CODES.get(status, (errors.CODES[status],))
    response: dict[str, Any] = {
        "description": f"{ERROR_MEANINGS[status]} `status` {status}, `code` "
        + " or ".join(f"`{code}`" for code in codes)
        + ".",
        "content": {errors.PROBLEM_JSON: {"schema": PROBLEM}},
    }
    if status in ERROR_HEADERS:
        response["headers"] = ERROR_HEADERS[status]
    return response


# What each path parameter names.
PATH_PARAMETERS = {
    "endpoint_id": "The webhook endpoint's id (`ep_...`).",
    "delivery_id": "The delivery's id (`msg_...`), its `webhook-id`.",
}


def _path_parameter(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": PATH_PARAMETERS.get(
            name, "The key's identifier, its shown form `<identifier>...`, or the full key."
        ),
        "schema": {"type": "string", "minLength": 1},
    }

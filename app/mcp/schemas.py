"""The MCP tools' input and output schemas, read from the OpenAPI document (docs/design.md,
"MCP"): each tool's are its REST twin's, which the same marshmallow schemas generate
(app/openapi/document.py), so that no enum or bound is typed twice."""

from __future__ import annotations

import copy
from typing import Any

from app import idempotency
from app.keys import schemas

# The REST path names a key or an identity `reference`; a tool names it by what it is.
REFERENCE = "reference"
KEY = "key"
IDEMPOTENCY_KEY = "idempotency_key"  # the Idempotency-Key header, as a tool's argument
_ARGUMENT_OF = {idempotency.HEADER: IDEMPOTENCY_KEY}


def _operations(document: dict) -> dict[str, tuple[dict, list[dict]]]:
    """Each operation by its operationId, with the parameters of its path."""
    return {
        operation["operationId"]: (operation, path_item.get("parameters", []))
        for path_item in document["paths"].values()
        for operation in path_item.values()
        if isinstance(operation, dict) and "operationId" in operation
    }


def _inlined(schema: Any, components: dict[str, dict]) -> Any:
    """`schema` with every `#/components/schemas/...` reference replaced by its schema: a
    tool's schema stands alone."""
    if isinstance(schema, dict):
        reference = schema.get("$ref", "")
        if reference.startswith("#/components/schemas/"):
            return _inlined(components[reference.rpartition("/")[2]], components)
        return {name: _inlined(value, components) for name, value in schema.items()}
    if isinstance(schema, list):
        return [_inlined(value, components) for value in schema]
    return schema


def input_schema(document: dict, name: str, names: str = KEY) -> dict:
    """The REST operation's parameters and body as one object: the path's `reference` as
    `names` (`key`, or `identity`); the body's read-only fields left out (they are
    ignored)."""
    components = document["components"]["schemas"]
    operation, path_parameters = _operations(document)[name]
    schema: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    for parameter in [*path_parameters, *operation.get("parameters", [])]:
        field = names if parameter["name"] == REFERENCE else parameter["name"]
        field = _ARGUMENT_OF.get(field, field)
        described = {"description": parameter["description"]} if "description" in parameter else {}
        schema["properties"][field] = {**parameter["schema"], **described}
        if parameter.get("required"):
            schema["required"].append(field)
    if "requestBody" in operation:
        body = _inlined(
            operation["requestBody"]["content"]["application/json"]["schema"], components
        )
        for field, value in body["properties"].items():
            if field not in schemas.READ_ONLY:
                schema["properties"][field] = value
        schema["required"] += body.get("required", [])
        schema |= {k: v for k, v in body.items() if k in ("allOf", "anyOf", "oneOf")}
    schema["additionalProperties"] = False
    return copy.deepcopy(schema)


def output_schema(document: dict, name: str) -> dict | None:
    """The schema of the REST operation's success body; None when it has none (delete)."""
    operation, _ = _operations(document)[name]
    success = next(answer for status, answer in operation["responses"].items() if status[0] == "2")
    content = success.get("content", {}).get("application/json")
    if content is None:
        return None
    return copy.deepcopy(_inlined(content["schema"], document["components"]["schemas"]))

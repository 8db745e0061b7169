"""Every error body, built in one place as application/problem+json (RFC 9457)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from flask import Flask, Response, current_app
from marshmallow import ValidationError
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from app.domain import keyformat
from app.http.messages import plain

PROBLEM_JSON = "application/problem+json"
# Where marshmallow puts what is wrong with a body as a whole (no one field), and how a
# detail names it.
SCHEMA = "_schema"
WHOLE_BODY = "its body as a whole"

# The machine name of each status when nothing more precise is said.
CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    417: "expectation_failed",
    422: "validation_error",
    429: "rate_limited",
    431: "headers_too_large",
    500: "internal_error",
    501: "not_implemented",
    503: "unavailable",
}
DETAILS = {
    404: "No resource lives at this path.",
    405: "This path does not accept this method.",
    413: "The request body is larger than this server accepts (64 KiB by default).",
    500: "The server could not complete the request.",
}


class ApiError(HTTPException):
    """A refusal with its status, machine code, human detail and optional field errors."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        errors: Mapping[str, list[str]] | None = None,
        headers: Iterable[tuple[str, str]] = (),
        members: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(description=detail)
        self.code = status
        self.problem_code = code
        self.errors = errors
        self.headers = list(headers)
        # The problem document's members beside the standard ones (a quota's `limit`).
        self.members = members

    def get_headers(self, environ=None, scope=None) -> list[tuple[str, str]]:
        return [*super().get_headers(environ, scope), *self.headers]


def problem(body: dict, headers: Iterable[tuple[str, str]] = ()) -> Response:
    """The one place an error response is made, from its body (problem_document)."""
    return Response(
        json.dumps(body, separators=(",", ":")),
        body["status"],
        list(headers),
        mimetype=PROBLEM_JSON,
    )


def problem_document(
    status: int,
    code: str,
    detail: str,
    errors: Mapping[str, list[str]] | None = None,
    members: Mapping[str, str] | None = None,
) -> dict:
    """The one place an error body is made (gunicorn's own refusals use it too). No error
    repeats a key its request carried, wherever it sat (a member or parameter name, a
    value): key-shaped text in `detail` and `errors` is masked as log lines are."""
    body = {
        "type": "about:blank",
        "title": HTTP_STATUS_CODES.get(status, "Error"),
        "status": status,
        "detail": keyformat.masked(detail),
        "code": code,
    }
    if members:
        body.update(members)
    if errors:
        masked: dict[str, list[str]] = {}
        for field, messages in errors.items():
            said = masked.setdefault(keyformat.masked(field), [])
            said.extend(keyformat.masked(message) for message in messages)
        body["errors"] = masked
    return body


def flatten(messages: Mapping) -> dict[str, list[str]]:
    """marshmallow's nested messages as {field: [message, ...]}, in words that say what to
    do (app/http/messages.py); list items and members are named ("Item 2: ..."). What is
    wrong with a field's or an item's value as a whole (marshmallow's `_schema` inside it:
    `"rate_limit": 5`) is said of that field or item, never of `_schema`."""
    flat: dict[str, list[str]] = {}
    for field, value in messages.items():
        if isinstance(value, Mapping):
            for index, inner in flatten(value).items():
                head = "" if index == SCHEMA else f"Item {index}: "
                flat.setdefault(str(field), []).extend(head + m for m in inner)
        else:
            flat.setdefault(str(field), []).extend(plain(str(m)) for m in value)
    return flat


def invalid(errors: Mapping[str, list[str]]) -> ApiError:
    """A refused input: 422, naming each field and what is wrong with it (`_schema`, as
    marshmallow names it: the body as a whole). What a schema's ValidationError becomes,
    and what the service raises for a rule that needs the stored key (an update's kind and
    scopes)."""
    named = (WHOLE_BODY if field == SCHEMA else field for field in errors)
    detail = "The request is not valid: " + ", ".join(named) + "."
    return ApiError(422, "validation_error", detail, errors)


def refusal_document(error: HTTPException | ValidationError) -> dict:
    """The problem body of a raised refusal: what an HTTP answer carries, and what an MCP
    tool's refused call carries as its one text item (JSON, no structured content)."""
    if isinstance(error, ValidationError):
        error = invalid(flatten(error.normalized_messages()))
    status = error.code or 500
    code = getattr(error, "problem_code", None) or CODES.get(status, "error")
    said = isinstance(error, ApiError)  # descriptions written for users
    detail = error.description if said else DETAILS.get(status)
    return problem_document(
        status,
        code,
        detail or HTTP_STATUS_CODES.get(status, "Error"),
        getattr(error, "errors", None),
        getattr(error, "members", None),
    )


def handle_http_exception(error: HTTPException) -> Response:
    """Routing errors, 413, 429 and every ApiError share the problem shape; headers survive."""
    headers = [(k, v) for k, v in error.get_headers() if k.lower() != "content-type"]
    return problem(refusal_document(error), headers)


def handle_validation_error(error: ValidationError) -> Response:
    """A refused input: 422, naming each field and what is wrong with it."""
    return problem(refusal_document(error))


# A 503 for a database that does not answer: a client may retry in a second.
RETRY_SHORTLY = ("Retry-After", "1")
# SQLite reports a missing table or column as an OperationalError too.
SCHEMA_MISSING = ("no such table", "no such column")


def database_unavailable(error: OperationalError | PoolTimeout) -> ApiError | None:
    """The database did not answer (down, unreachable, locked past SQLite's busy timeout,
    or no pooled connection free within pool_timeout): 503, which a client may retry,
    rather than a fault of the service. None for a schema that lacks a table or column: no
    passing state, but a fault (500)."""
    cause = getattr(error, "orig", None) or error
    if str(cause).startswith(SCHEMA_MISSING):
        return None
    current_app.logger.error("the database did not answer: %s", type(cause).__name__)
    return ApiError(
        503,
        "unavailable",
        "The database does not answer; retry shortly.",
        headers=[RETRY_SHORTLY],
    )


def handle_database_unavailable(error: OperationalError | PoolTimeout) -> Response:
    unavailable = database_unavailable(error)
    if unavailable is None:
        raise error
    return handle_http_exception(unavailable)


def register(app: Flask) -> None:
    """On the app, not the blueprint: routing 404 and 405 never reach a blueprint."""
    app.register_error_handler(HTTPException, handle_http_exception)
    app.register_error_handler(ValidationError, handle_validation_error)
    app.register_error_handler(OperationalError, handle_database_unavailable)
    app.register_error_handler(PoolTimeout, handle_database_unavailable)

"""Reading a request's input: a JSON body (415 for another media type, 413 when too large,
400 when not a JSON object with unique member names, checked in this order before any
field is looked at), and the query string."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from flask import current_app, request

from app.http.errors import ApiError, invalid


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _DuplicateMember(ValueError):
    pass


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose member names are unique: with `{"name": "a", "name": "b"}` parsers
    disagree on which one counts (RFC 8259), so neither is taken."""
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _DuplicateMember
    return members


def json_object() -> dict[str, Any]:
    """The request body as a dict."""
    if request.mimetype != "application/json":
        raise ApiError(
            415, "unsupported_media_type", "The request body must be sent as application/json."
        )
    raw = request.get_data(cache=False)  # 413 past MAX_CONTENT_LENGTH
    try:
        body = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_members)
    except _DuplicateMember:
        raise ApiError(
            400, "bad_request", "The request body names the same member twice."
        ) from None
    except (ValueError, RecursionError):
        raise ApiError(400, "bad_request", "The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "The request body must be a JSON object.")
    return body


FORM = "application/x-www-form-urlencoded"


def form_or_json_object() -> dict[str, Any]:
    """The request body as a dict: a form (as RFC 7662 clients send one; a field given
    several times is the list of its values, which schemas refuse) or a JSON object."""
    if request.mimetype == "application/json":
        return json_object()
    if request.mimetype != FORM:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"The request body must be sent as {FORM} or application/json.",
        )
    form = request.form  # 413 past MAX_CONTENT_LENGTH
    return {name: values[0] if len(values) == 1 else values for name, values in form.lists()}


def has_body() -> bool:
    """Whether the request carries a body at all (a rotate may have none)."""
    return bool(request.content_length) or "Transfer-Encoding" in request.headers


_GIVEN_TWICE = "Given more than once: give each query parameter once."


def query_arguments() -> dict[str, Any]:
    """The query string for a schema, each name with its value; a name given several times
    is refused (422), naming it."""
    arguments = request.args.lists()
    twice = {name: [_GIVEN_TWICE] for name, values in arguments if len(values) > 1}
    if twice:
        raise invalid(twice)
    return {name: values[0] for name, values in request.args.lists()}


def larger_body(setting: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A view whose body may be larger than MAX_CONTENT_LENGTH: up to the configuration's
    `setting` bytes (413 past it), for what must come in one request (an import's 1,000
    keys)."""

    def allow(view: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(view)
        def allowed(*args: Any, **kwargs: Any) -> Any:
            request.max_content_length = current_app.config[setting]
            return view(*args, **kwargs)

        return allowed

    return allow

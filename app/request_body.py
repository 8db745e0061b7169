"""Reading a JSON request body: 415 for another media type, 413 when too large, 400 when
not a JSON object with unique member names. Checked in this order, before any field is
looked at."""

from __future__ import annotations

import json
from typing import Any

from flask import request

from app.errors import ApiError


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

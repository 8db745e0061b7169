"""The arguments every listing and command shares: a timestamp with an offset, and paging
(the keys' list, the audit log, the CLI's --since and --expires-at); and a rate limit, which
a key has and an organization's policy gives by default."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate

from app.domain import keyformat

# An offset whose `+` a query string turned into a space: "2026-11-27T09:00:00 01:00".
_SPACED_OFFSET = re.compile(r".*[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)? [0-9]{2}(:?[0-9]{2})?")


class Timestamp(fields.AwareDateTime):
    """An ISO 8601 time with `Z` or an offset (a time without one is refused: whose
    midnight would it be?), as stored: naive UTC."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(format="iso", **kwargs)
        self.error_messages["invalid_awareness"] = (
            "Has no offset: end it with Z (UTC) or an offset such as +01:00 (%2B01:00 in a "
            "query string)."
        )
        self.error_messages["invalid"] = (
            "Not an ISO 8601 time: write it as 2026-11-27T09:30:00Z (UTC), or with an "
            "offset such as +01:00 (%2B01:00 in a query string)."
        )

    def _deserialize(self, value, attr, data, **kwargs) -> datetime:
        if isinstance(value, str) and _SPACED_OFFSET.fullmatch(value):
            raise ValidationError(
                "A space stands where the offset's + should be: in a query string a + "
                "means a space, so write it as %2B, or give the time in UTC with Z."
            )
        moment = super()._deserialize(value, attr, data, **kwargs)
        try:
            return moment.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:  # 0001-01-01T00:00:00+00:01 is before the year 1 in UTC
            raise ValidationError("Not a time that exists in UTC.") from None


class QueryInteger(fields.Integer):
    """An integer in a query string: ASCII digits only, at most 18 of them; or a JSON
    integer, as an MCP tool's arguments carry it."""

    _PATTERN = re.compile(r"-?[0-9]{1,18}")
    MAX = 10**18 - 1  # stated, so that the OpenAPI document says it

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error_messages["invalid"] = "Must be a whole number, such as 2."

    def _deserialize(self, value, attr, data, **kwargs) -> int:
        if type(value) is int:  # not a bool
            return value
        if not isinstance(value, str) or not self._PATTERN.fullmatch(value):
            raise self.make_error("invalid")
        return int(value)


class PageArguments(Schema):
    """Paging, as every listing takes it."""

    page = QueryInteger(
        load_default=1,
        validate=[
            validate.Range(min=1, error="Pages start at 1."),
            validate.Range(max=QueryInteger.MAX, error="Past the last page there can be."),
        ],
    )
    page_size = QueryInteger(
        load_default=50,
        validate=validate.Range(min=1, max=200, error="A page holds from 1 to 200 items."),
    )


# A rate limit's bounds (docs/design.md, "Key policy").
MAX_RATE_REQUESTS = 1_000_000
MAX_RATE_SECONDS = 24 * 60 * 60


class RateLimit(Schema):
    """A key's own limit: `requests` uses per `seconds`."""

    requests = fields.Integer(
        strict=True, required=True, validate=validate.Range(min=1, max=MAX_RATE_REQUESTS)
    )
    seconds = fields.Integer(
        strict=True, required=True, validate=validate.Range(min=1, max=MAX_RATE_SECONDS)
    )


# An identity's external id (docs/design.md, "Identities"): the organization's own id for it.
EXTERNAL_ID_MAX_LENGTH = 255
EXTERNAL_ID = re.compile(r"[!-~](?:[ -~]*[!-~])?\Z")


# What a field of a person's text answers when it holds a key.
HOLDS_A_KEY = (
    "Holds a full API key: a key is never stored or shown as text. Revoke it if it was "
    "meant to stay secret, and write its shown form (<identifier>...) instead."
)


def holds_no_key(value: str) -> None:
    """A person's text (a name, an external id, metadata, a description) is stored and shown
    as written: one that holds a full key of this service is refused."""
    if keyformat.holds_full_key(value):
        raise ValidationError(HOLDS_A_KEY)


def external_id_field(**kwargs: Any) -> fields.String:
    """An identity's external id, or a reference to an identity (its id has the same form):
    1 to 255 printable ASCII characters, no space at either end, and no key in them."""
    return fields.String(
        validate=[
            holds_no_key,
            validate.Length(min=1, max=EXTERNAL_ID_MAX_LENGTH),
            validate.Regexp(
                EXTERNAL_ID,
                error="Must be printable ASCII characters, without a space at either end.",
            ),
        ],
        **kwargs,
    )


def identity_reference(**kwargs: Any) -> fields.String:
    """An identity a body or a query names: its `id`, or else its `external_id`."""
    description = {"description": "The identity's `id`, or else its `external_id`."}
    return external_id_field(metadata=description, **kwargs)

"""What GET /api/keys/<key>/usage, GET /api/identities/<id>/usage and the MCP tool
get_key_usage accept and show."""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from app.domain.timestamps import utcnow
from app.http.arguments import Timestamp
from app.usage.service import DAY, DEFAULT_WINDOW, GRANULARITIES, LONGEST_WINDOW, window


class UsageArguments(Schema):
    # The window's start (default: 30 days before `until`), down to its bucket's start.
    since = Timestamp()
    # The window's end (default: now), up to its bucket's end.
    until = Timestamp()
    granularity = fields.String(
        load_default=DAY,
        validate=validate.OneOf(list(GRANULARITIES), error="Must be one of: {choices}."),
    )

    @validates_schema
    def at_most_90_days(self, data: dict, **kwargs) -> None:
        until = data.get("until") or utcnow()
        try:
            since = data.get("since") or until - DEFAULT_WINDOW
            window(since, until, data["granularity"])
        except OverflowError:  # its whole buckets would begin before year 1 or end after 9999
            field = "since" if "since" in data else "until"
            message = "Too near the first or last day a time can have."
            raise ValidationError(message, field) from None
        if since >= until:
            raise ValidationError("Must be before until.", "since")
        if until - since > LONGEST_WINDOW:
            raise ValidationError("The window may span at most 90 days.", "since")


class Refused(fields.Dict):
    """Counts by refusal code."""

    def __init__(self, **kwargs) -> None:
        super().__init__(keys=fields.String(), values=fields.Integer(), **kwargs)


class Total(Schema):
    allowed = fields.Integer()
    refused = Refused()


class Bucket(Schema):
    start = fields.String()
    allowed = fields.Integer()
    refused = Refused()


class KeyUsage(Schema):
    key = fields.String()
    since = fields.String()
    until = fields.String()
    granularity = fields.String()
    total = fields.Nested(Total)
    buckets = fields.List(fields.Nested(Bucket))
    scopes = fields.Dict(keys=fields.String(), values=fields.Integer())
    unused_scopes = fields.List(fields.String(), allow_none=True)


class IdentityUsage(Schema):
    """An identity's usage: the sum of its keys' (the keys it holds now)."""

    identity = fields.String()
    since = fields.String()
    until = fields.String()
    granularity = fields.String()
    total = fields.Nested(Total)
    buckets = fields.List(fields.Nested(Bucket))
    scopes = fields.Dict(keys=fields.String(), values=fields.Integer())


usage_arguments = UsageArguments()
key_usage = KeyUsage()
identity_usage = IdentityUsage()

"""What a quota looks like in a key's body, and what POST /api/keys/<key>/quota takes."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from app.domain.periods import PERIODS

MAX_QUOTA_REQUESTS = 1_000_000_000


class Quota(Schema):
    """`{"requests": N, "period": "day"|"week"|"month"|"lifetime"}`."""

    requests = fields.Integer(
        strict=True, required=True, validate=validate.Range(min=1, max=MAX_QUOTA_REQUESTS)
    )
    period = fields.String(
        required=True,
        validate=validate.OneOf(PERIODS, error="Must be one of: {choices}."),
    )


class Grant(Schema):
    """`{"add": N}` more uses in the current period, or `{"set_remaining": N}`."""

    add = fields.Integer(strict=True, validate=validate.Range(min=1, max=MAX_QUOTA_REQUESTS))
    set_remaining = fields.Integer(
        strict=True, validate=validate.Range(min=0, max=MAX_QUOTA_REQUESTS)
    )

    @validates_schema
    def exactly_one(self, data: dict, **kwargs: Any) -> None:
        if len(data) != 1:
            raise ValidationError("Give either add or set_remaining, not both or neither.")


grant = Grant()

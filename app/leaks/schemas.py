"""What POST /api/revoke accepts."""

from __future__ import annotations

from marshmallow import Schema, fields, validate


class LeakReport(Schema):
    """The leaked keys, full values: 1 to 100 of them."""

    keys = fields.List(fields.String(), required=True, validate=validate.Length(min=1, max=100))


leak_report = LeakReport()

"""What POST /api/revoke accepts."""

from __future__ import annotations

from marshmallow import Schema, fields, validate


class Trimmed(fields.String):
    """A reported key without its surrounding white space: a key copied with its newline is
    still that key."""

    def _deserialize(self, value, attr, data, **kwargs) -> str:
        return super()._deserialize(value, attr, data, **kwargs).strip()


class LeakReport(Schema):
    """The leaked keys, full values: 1 to 100 of them."""

    keys = fields.List(Trimmed(), required=True, validate=validate.Length(min=1, max=100))


leak_report = LeakReport()

"""What GET /api/audit and the export accept and show."""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, post_load, validate

from app.audit import ACTIONS
from app.domain import keyformat
from app.domain.timestamps import iso
from app.http.arguments import PageArguments, Timestamp


def _key_reference(value: str) -> None:
    if value.startswith(keyformat.SHOWN_DIGEST):  # an imported key's shown form
        return
    if not keyformat.is_identifier(value.removesuffix(keyformat.SHOWN_SUFFIX)):
        raise ValidationError(
            'Must name a key: its identifier, or its shown form ending in "...", as the '
            "list of keys shows it."
        )


class EventArguments(PageArguments):
    # The events whose target is this key: its identifier or shown form.
    key = fields.String(validate=_key_reference)
    action = fields.String(validate=validate.OneOf(ACTIONS, error="Must be one of: {choices}."))
    # Events at or after this time.
    since = Timestamp()

    @post_load
    def shown_target(self, data: dict, **kwargs) -> dict:
        if "key" in data:
            key = data.pop("key")
            identifier = key.removesuffix(keyformat.SHOWN_SUFFIX)
            shown = key.startswith(keyformat.SHOWN_DIGEST)
            data["target"] = key if shown else keyformat.shown(identifier)
        return data


class Event(Schema):
    id = fields.Integer()
    at = fields.Function(lambda event: iso(event.at))
    action = fields.String()
    actor = fields.String()
    actor_name = fields.String(allow_none=True)
    actor_kind = fields.String(allow_none=True)
    target = fields.String()
    target_name = fields.String(allow_none=True)
    target_kind = fields.String(allow_none=True)
    client_address = fields.String(allow_none=True)
    details = fields.Dict()


class EventPage(Schema):
    page = fields.Integer()
    page_size = fields.Integer()
    total_count = fields.Integer()
    data = fields.List(fields.Nested(Event))


# What the document says of the fields beyond their marshmallow type.
EVENT_FIELDS = {
    "at": {"type": "string", "format": "date-time"},
    "action": {"type": "string", "enum": list(ACTIONS)},
    "actor": {
        "type": "string",
        "description": "`<identifier>...` of the acting key, `operator` or `leak-report`.",
    },
    "actor_name": {
        "type": ["string", "null"],
        "description": "The acting key's name when it acted; null for `operator` and "
        "`leak-report`, and for events recorded before names were kept.",
    },
    "actor_kind": {
        "type": ["string", "null"],
        "description": "The acting key's kind when it acted; null as for `actor_name`.",
    },
    "target": {"type": "string", "description": "`<identifier>...` of the key acted on."},
    "target_name": {
        "type": ["string", "null"],
        "description": "The target key's name as this event left it (a deleted or revoked "
        "key's last name); null for events recorded before names were kept.",
    },
    "target_kind": {
        "type": ["string", "null"],
        "description": "The target key's kind; null as for `target_name`.",
    },
    "client_address": {
        "type": ["string", "null"],
        "description": "The client's address as the abuse limits see it; null for the CLI.",
    },
    "details": {
        "type": "object",
        "description": "key.created: name, kind, scopes, expires_at; key.updated: each "
        "changed field as [before, after]; key.rotated: replacement and grace_seconds; "
        "otherwise {}.",
    },
}

event_arguments = EventArguments()
event = Event()
event_page = EventPage()

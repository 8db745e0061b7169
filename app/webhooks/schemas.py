"""What the webhook endpoints accept, and what an endpoint and a delivery look like."""

from __future__ import annotations

from typing import Any

from marshmallow import (
    Schema,
    ValidationError,
    fields,
    post_load,
    pre_load,
    validate,
    validates_schema,
)

from app.audit.outbox import EVENT_TYPES
from app.domain.timestamps import iso
from app.http.arguments import PageArguments
from app.keys.schemas import Flag, _printable
from app.webhooks import targets

DESCRIPTION_MAX_LENGTH = 500
# Sent back by clients that echo what they read; ignored on input.
READ_ONLY = frozenset({"id", "created", "updated", "failing_since", "secret"})
UPDATABLE = frozenset({"url", "events", "description", "enabled"})


class Url(fields.String):
    """A webhook's URL, checked for its form here, and its non-ASCII characters after the
    host percent-encoded (what is stored and requested); its scheme and where it resolves
    by the service (which knows WEBHOOK_ALLOW_PRIVATE)."""

    def _deserialize(self, value, attr, data, **kwargs) -> str:
        url = super()._deserialize(value, attr, data, **kwargs)
        try:
            targets.parse(url, allow_private=True)
        except targets.UnsafeTarget as error:
            raise ValidationError(str(error)) from None
        return targets.normalized(url)


def _events(**kwargs: Any) -> fields.List:
    event = fields.String(
        validate=validate.OneOf(EVENT_TYPES, error="Unknown event type; one of: {choices}.")
    )
    return fields.List(event, validate=validate.Length(min=1), **kwargs)


class _EndpointInput(Schema):
    """Ignores read-only fields; refuses any other unknown field (marshmallow's default)."""

    @pre_load
    def drop_read_only(self, data: dict, **kwargs: Any) -> dict:
        return {field: value for field, value in data.items() if field not in READ_ONLY}

    @post_load
    def fold_events(self, data: dict, **kwargs: Any) -> dict:
        if "events" in data:
            data["events"] = [event for event in EVENT_TYPES if event in data["events"]]
        return data


class CreateEndpoint(_EndpointInput):
    url = Url(required=True)
    events = _events(required=True)
    description = fields.String(
        load_default="",
        validate=[validate.Length(max=DESCRIPTION_MAX_LENGTH), _printable],
    )
    enabled = Flag(load_default=True)


class UpdateEndpoint(_EndpointInput):
    """A partial update: url, events, description, enabled, or several."""

    url = Url()
    events = _events()
    description = fields.String(validate=[validate.Length(max=DESCRIPTION_MAX_LENGTH), _printable])
    enabled = Flag()

    @validates_schema
    def something_to_update(self, data: dict, **kwargs: Any) -> None:
        if not UPDATABLE & data.keys():
            message = "An update needs one of: " + ", ".join(sorted(UPDATABLE)) + "."
            raise ValidationError({field: [message] for field in sorted(UPDATABLE)})


def _time(name: str) -> fields.Function:
    return fields.Function(
        lambda row: None if getattr(row, name) is None else iso(getattr(row, name))
    )


class EndpointOutput(Schema):
    id = fields.String(attribute="public_id")
    url = fields.String()
    events = fields.List(fields.String())
    description = fields.String()
    enabled = fields.Boolean()
    created = _time("created")
    updated = _time("updated")
    # Since when its deliveries fail (null: the last one succeeded); after 3 days it is
    # disabled.
    failing_since = _time("failing_since")


class EndpointWithSecret(EndpointOutput):
    """An endpoint made, or given a new secret: the only answers that carry it."""

    secret = fields.String()
    # Until when the secret it replaced still signs beside it (null: none does).
    previous_secret_expires_at = _time("previous_secret_until")


class EndpointList(Schema):
    data = fields.List(fields.Nested(EndpointOutput))


class DeliveryOutput(Schema):
    id = fields.String(attribute="public_id")
    event = fields.String(attribute="type")
    status = fields.String()
    tries = fields.Integer()
    last_status = fields.Integer(allow_none=True)
    last_error = fields.String(allow_none=True)
    last_attempt = _time("last_attempt")
    # When the next try is due (null once delivered or failed).
    next_attempt = fields.Function(
        lambda row: iso(row.next_attempt) if row.status == "pending" else None
    )
    created = _time("created")
    payload = fields.Function(lambda row: row.payload_object)


class DeliveryPage(Schema):
    page = fields.Integer()
    page_size = fields.Integer()
    total_count = fields.Integer()
    data = fields.List(fields.Nested(DeliveryOutput))


class DeliveryArguments(PageArguments):
    status = fields.String(
        validate=validate.OneOf(
            ("pending", "delivered", "failed"), error="Must be one of: {choices}."
        )
    )


create_endpoint = CreateEndpoint()
update_endpoint = UpdateEndpoint()
endpoint_output = EndpointOutput()
endpoint_with_secret = EndpointWithSecret()
endpoint_list = EndpointList()
delivery_output = DeliveryOutput()
delivery_page = DeliveryPage()
delivery_arguments = DeliveryArguments()


# What the document says of the fields beyond their marshmallow type.
_TIME = {"type": "string", "format": "date-time"}
_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
_EVENT_TYPES = {"type": "array", "items": {"type": "string", "enum": list(EVENT_TYPES)}}
_ENDPOINT = {
    "id": {"type": "string", "description": "`ep_` and random characters."},
    "url": {"type": "string", "format": "uri", "maxLength": targets.MAX_URL_LENGTH},
    "events": _EVENT_TYPES,
    "created": _TIME,
    "updated": _TIME,
    "failing_since": {
        **_NULLABLE_TIME,
        "description": "The first failed try since the last success (null: not failing); "
        "after 3 days the endpoint is disabled.",
    },
}
WEBHOOK_FIELDS = {
    "EndpointOutput": _ENDPOINT,
    "EndpointWithSecret": {
        **_ENDPOINT,
        "secret": {
            "type": "string",
            "description": "`whsec_` and 32 random bytes in base64: the signing secret, shown "
            "in this answer only.",
        },
        "previous_secret_expires_at": {
            **_NULLABLE_TIME,
            "description": "Until when the secret this one replaced still signs beside it.",
        },
    },
    "CreateEndpoint": {"events": _EVENT_TYPES},
    "UpdateEndpoint": {"events": _EVENT_TYPES},
    "DeliveryOutput": {
        "id": {"type": "string", "description": "`msg_...`: its `webhook-id` on every try."},
        "event": {"type": "string", "enum": list(EVENT_TYPES)},
        "status": {"type": "string", "enum": ["pending", "delivered", "failed"]},
        "last_status": {"type": ["integer", "null"]},
        "last_error": {"type": ["string", "null"]},
        "last_attempt": _NULLABLE_TIME,
        "next_attempt": {**_NULLABLE_TIME, "description": "Null once delivered or failed."},
        "created": _TIME,
        "payload": {
            "type": "object",
            "description": "The event as sent: `{type, timestamp, data: {key, actor, changes?}}`.",
        },
    },
}

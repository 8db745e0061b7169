"""What /api/identities takes and shows: an identity's fields follow the rules of the same
fields on a key (app/keys/schemas.py): a name, metadata, a rate limit and a quota."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, pre_load, validates_schema

from app.http.arguments import PageArguments, RateLimit, external_id_field
from app.keys.schemas import Name, metadata_field
from app.quotas.schemas import Quota

READ_ONLY = frozenset({"id", "quota_remaining", "key_count", "created", "updated"})
UPDATABLE = frozenset({"external_id", "name", "metadata", "rate_limit", "quota"})


def _external_id(**kwargs: Any) -> fields.String:
    description = {"description": "The organization's own id for the holder: unique in it."}
    return external_id_field(metadata=description, **kwargs)


class _IdentityInput(Schema):
    """Ignores read-only fields; refuses any other unknown field."""

    name = Name()
    metadata = metadata_field()
    rate_limit = fields.Nested(RateLimit, allow_none=True)
    quota = fields.Nested(Quota, allow_none=True)

    @pre_load
    def drop_read_only(self, data: dict, **kwargs: Any) -> dict:
        return {field: value for field, value in data.items() if field not in READ_ONLY}


class CreateIdentity(_IdentityInput):
    external_id = _external_id(required=True)


class UpdateIdentity(_IdentityInput):
    """A partial update: each field named is replaced, the others stay."""

    external_id = _external_id()

    @validates_schema
    def something_to_update(self, data: dict, **kwargs: Any) -> None:
        if not UPDATABLE & data.keys():
            raise ValidationError("An update needs one of: " + ", ".join(sorted(UPDATABLE)) + ".")


class ListArguments(PageArguments):
    external_id = _external_id()


class Identity(Schema):
    """An identity as the API shows it (service.dump_identity builds it)."""

    id = fields.String()
    external_id = fields.String()
    name = fields.String()
    metadata = fields.Dict(keys=fields.String(), values=fields.String())
    rate_limit = fields.Dict(allow_none=True)
    quota = fields.Dict(allow_none=True)
    quota_remaining = fields.Integer(
        allow_none=True,
        metadata={"description": "What is left of its quota in the current period."},
    )
    key_count = fields.Integer(metadata={"description": "How many keys it holds."})
    created = fields.String()
    updated = fields.String()


class IdentityPage(Schema):
    page = fields.Integer()
    page_size = fields.Integer()
    total_count = fields.Integer()
    data = fields.List(fields.Nested(Identity))


identity_page = IdentityPage()
create_identity = CreateIdentity()
update_identity = UpdateIdentity()
list_arguments = ListArguments()

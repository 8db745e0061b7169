"""What /api/forward-auth and /api/introspect accept."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.scopes import SCOPES


class ForwardAuthArguments(Schema):
    """The scopes a gateway requires, each as `?scope=...` (none: any valid key)."""

    scope = fields.List(
        fields.String(validate=validate.OneOf(SCOPES, error="Unknown scope; one of: {choices}.")),
        load_default=list,
    )


class Introspection(Schema):
    """The key to check, as RFC 7662's `token`; its optional `token_type_hint` is
    accepted and, there being one type of token here, ignored."""

    token = fields.String(required=True)
    token_type_hint = fields.String()


forward_auth_arguments = ForwardAuthArguments()
introspection = Introspection()

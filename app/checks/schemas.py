"""What /api/forward-auth and /api/introspect accept."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

from marshmallow import Schema, ValidationError, fields, validate

from app.scopes import SCOPES


class ForwardAuthArguments(Schema):
    """The scopes a gateway requires, each as `?scope=...` (none: any valid key)."""

    scope = fields.List(
        fields.String(validate=validate.OneOf(SCOPES, error="Unknown scope; one of: {choices}.")),
        load_default=list,
    )


def _without_zone(address: IPv4Address | IPv6Address) -> None:
    """A zone (`fe80::1%eth0`) names an interface of the asker's host, no client's address."""
    if getattr(address, "scope_id", None):
        raise ValidationError("Not a valid IP address.")


class Introspection(Schema):
    """The key to check, as RFC 7662's `token`; its optional `token_type_hint` is
    accepted and, there being one type of token here, ignored; `client_ip`, the address
    the key is used from, for a key with allowed_ips."""

    token = fields.String(required=True)
    token_type_hint = fields.String()
    # The address the checked key is used from, for its allowed_ips (CONTRACT.md section 15).
    client_ip = fields.IP(validate=_without_zone)


forward_auth_arguments = ForwardAuthArguments()
introspection = Introspection()

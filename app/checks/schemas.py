"""What /api/forward-auth and /api/introspect accept."""

from __future__ import annotations

import functools
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import parse_qsl

from marshmallow import Schema, ValidationError, fields, validate
from werkzeug.datastructures import MultiDict

from app.domain.scopes import SCOPES, to_bits


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
    # The address the checked key is used from, for its allowed_ips (docs/design.md, "Key policy").
    client_ip = fields.IP(validate=_without_zone)


forward_auth_arguments = ForwardAuthArguments()
introspection = Introspection()


@functools.lru_cache(maxsize=256)
def required_scopes(query_string: bytes) -> int:
    """The scopes (bits) a forward auth query string requires, as ForwardAuthArguments loads
    its arguments (parsed as werkzeug parses request.args): loaded once per distinct query
    string, since a gateway sends the same few on every request (bench/README.md); a
    ValidationError is raised each time, never kept."""
    args = MultiDict(
        parse_qsl(query_string.decode(), keep_blank_values=True, errors="werkzeug.url_quote")
    )
    arguments = {name: args.getlist(name) for name in args}
    return to_bits(forward_auth_arguments.load(arguments)["scope"])

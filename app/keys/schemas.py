"""marshmallow schemas: what create, update and list accept, and what a key looks like."""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
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

from app.domain import addresses, keyformat
from app.domain.scopes import FIXED, KINDS, SCOPES, is_immutable, misfit, to_bits, to_names
from app.domain.timestamps import utcnow
from app.http.arguments import (
    PageArguments,
    RateLimit,
    Timestamp,
    holds_no_key,
    identity_reference,
)
from app.quotas import service as quotas
from app.quotas.schemas import Quota
from app.storage.pages import ACTIVE, EXPIRED

# Sent back by clients that echo what they read; ignored on input.
READ_ONLY = frozenset(
    {
        "key",
        "identifier",
        "immutable",
        "last_used",
        "created",
        "updated",
        "created_by",
        "replaced_by",
        "quota_remaining",
        "quota_bound_by",
    }
)
# What an update may change: at least one of them.
UPDATABLE = frozenset(
    {
        "name",
        "scopes",
        "expires_at",
        "enabled",
        "allowed_ips",
        "rate_limit",
        "metadata",
        "quota",
        "identity",
    }
)
# A rotated key keeps working at most 30 days beside its replacement.
MAX_GRACE_SECONDS = 30 * 24 * 60 * 60
NAME_MAX_LENGTH = 200
# A key's policy (docs/design.md, "Key policy").
MAX_ALLOWED_IPS = 50
MAX_METADATA_MEMBERS = 20
METADATA_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}\Z")
METADATA_VALUE_MAX_LENGTH = 500
# The metadata as forward auth sends it (X-Api-Key-Metadata), so that nginx's and Caddy's
# default header buffers carry it (docs/design.md, "Promises kept by default").
MAX_METADATA_BYTES = 2048
# What a name may not hold, as pattern escapes that Python's re and JSON Schema both read
# (app/keys/json_schema.py documents the same rule from these): C0 and C1 control characters
# and DEL; Unicode's bidirectional embeddings, overrides and isolates, which make a name
# display as something else ("exe.txt" for "txt.exe"). The joiners and variation selectors
# of emoji sequences are not among them.
CONTROLS = "\\x00-\\x1f\\x7f-\\x9f"
BIDI_CONTROLS = "\\u202a-\\u202e\\u2066-\\u2069"
# Lone surrogates too, which no database can store (and JSON Schema cannot name).
_UNPRINTABLE = re.compile(f"[{CONTROLS}\\ud800-\\udfff]")
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")


def _printable(value: str) -> None:
    """A person's text: no control character, no bidirectional control, no full key."""
    holds_no_key(value)
    if _UNPRINTABLE.search(value):
        raise ValidationError("Must not contain control characters.")
    if _BIDI.search(value):
        raise ValidationError("Must not contain bidirectional embeddings, overrides or isolates.")


class Name(fields.String):
    """A display name, a key's or an organization's: stored without surrounding white
    space."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            validate=[
                validate.Length(min=1, error="Must not be empty (white space alone is empty)."),
                validate.Length(max=NAME_MAX_LENGTH, error="Too long: at most {max} characters."),
                _printable,
            ],
            **kwargs,
        )

    def _deserialize(self, value, attr, data, **kwargs) -> str:
        return super()._deserialize(value, attr, data, **kwargs).strip()


def _kind(**kwargs: Any) -> fields.String:
    return fields.String(
        validate=validate.OneOf(KINDS, error="Must be one of: {choices}."), **kwargs
    )


def _scopes(**kwargs: Any) -> fields.List:
    scope = fields.String(
        validate=validate.OneOf(SCOPES, error="Unknown scope; one of: {choices}.")
    )
    return fields.List(scope, **kwargs)


class Expiry(Timestamp):
    """When a key stops working: a time in the future, or null for never."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_none=True, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs) -> datetime:
        moment = super()._deserialize(value, attr, data, **kwargs)
        if moment <= utcnow():
            raise ValidationError("Must be in the future.")
        return moment


class Flag(fields.Boolean):
    """true or false, and nothing else (marshmallow's Boolean takes 1, "yes", "on"...); in
    a query string, the words `true` and `false`."""

    def _deserialize(self, value, attr, data, **kwargs) -> bool:
        if type(value) is bool:
            return value
        raise self.make_error("invalid")


class QueryFlag(Flag):
    """A Flag as a query string or a tool's arguments give it: `true`, `false`, or a
    JSON boolean."""

    def _deserialize(self, value, attr, data, **kwargs) -> bool:
        if value in ("true", "false") and type(value) is str:
            return value == "true"
        return super()._deserialize(value, attr, data, **kwargs)


class Network(fields.String):
    """An IPv4 or IPv6 address or CIDR network, normalised: `10.0.0.7` is `10.0.0.7/32`,
    `::ffff:10.0.0.0/104` is `10.0.0.0/8` (app/domain/addresses.py); a network with host bits set
    is refused, as a likely mistake."""

    def _deserialize(self, value, attr, data, **kwargs) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            return str(addresses.network(text))
        except ValueError as error:
            if "host bits" in str(error):
                raise ValidationError(
                    "Has host bits set: give the network's own address (10.0.0.0/8)."
                ) from None
            raise ValidationError("Not an IPv4 or IPv6 address or CIDR network.") from None


def _allowed_ips(**kwargs: Any) -> fields.List:
    return fields.List(Network(), validate=validate.Length(max=MAX_ALLOWED_IPS), **kwargs)


def _metadata_name() -> fields.String:
    return fields.String(
        validate=validate.Regexp(
            METADATA_NAME, error="Names are 1 to 40 characters from A-Z a-z 0-9 _ . -."
        )
    )


def _metadata_value() -> fields.String:
    return fields.String(validate=[validate.Length(max=METADATA_VALUE_MAX_LENGTH), _printable])


def metadata_json(metadata: Mapping[str, str]) -> str:
    """The metadata as compact ASCII JSON: X-Api-Key-Metadata's value, whatever its text."""
    if not metadata:
        return "{}"
    return json.dumps(metadata, separators=(",", ":"), ensure_ascii=True)


def _fits_a_header(metadata: Mapping[str, str]) -> None:
    size = len(metadata_json(metadata))
    if size > MAX_METADATA_BYTES:
        raise ValidationError(
            f"Is {size} bytes as forward auth sends it in X-Api-Key-Metadata (compact JSON, "
            f"a non-ASCII character as \\uXXXX: six bytes); at most {MAX_METADATA_BYTES}."
        )


def metadata_field(**kwargs: Any) -> fields.Dict:
    return fields.Dict(
        keys=_metadata_name(),
        values=_metadata_value(),
        validate=[validate.Length(max=MAX_METADATA_MEMBERS), _fits_a_header],
        metadata={
            "description": f"At most {MAX_METADATA_MEMBERS} members, and at most "
            f"{MAX_METADATA_BYTES} bytes as compact ASCII JSON (X-Api-Key-Metadata), where a "
            "non-ASCII character takes six."
        },
        **kwargs,
    )


class _Policy(Schema):
    """What create and update take of a key's policy."""

    enabled = Flag()
    allowed_ips = _allowed_ips()
    rate_limit = fields.Nested(RateLimit, allow_none=True)
    metadata = metadata_field()
    quota = fields.Nested(Quota, allow_none=True)
    # The identity that holds the key (docs/design.md, "Identities"); null: none.
    identity = identity_reference(allow_none=True)

    @post_load
    def fold_networks(self, data: dict, **kwargs: Any) -> dict:
        if "allowed_ips" in data:
            data["allowed_ips"] = list(dict.fromkeys(data["allowed_ips"]))  # each once
        return data


class _KeyInput(_Policy):
    """Ignores read-only fields; refuses any other unknown field (marshmallow's default)."""

    @pre_load
    def drop_read_only(self, data: dict, **kwargs: Any) -> dict:
        return {field: value for field, value in data.items() if field not in READ_ONLY}

    @post_load
    def fold_scopes(self, data: dict, **kwargs: Any) -> dict:
        if "scopes" in data:
            data["scope_bits"] = to_bits(data.pop("scopes"))
        return data


class CreateKey(_KeyInput):
    name = Name(required=True)
    kind = _kind(required=True)
    scopes = _scopes()
    expires_at = Expiry()

    @validates_schema
    def scopes_fit_kind(self, data: dict, **kwargs: Any) -> None:
        kind, scopes = data["kind"], data.get("scopes")
        bits = FIXED.get(kind, 0) if scopes is None else to_bits(scopes)
        problem = misfit(kind, bits)
        if problem:
            raise ValidationError(problem, "scopes")

    @post_load
    def fold_scopes(self, data: dict, **kwargs: Any) -> dict:
        data = super().fold_scopes(data, **kwargs)
        data.setdefault("scope_bits", FIXED.get(data["kind"]))
        return data


class UpdateKey(_KeyInput):
    """A partial update: name, scopes, expires_at, the policy's fields, or several. `kind`
    may be sent, unchanged."""

    name = Name()
    scopes = _scopes()
    expires_at = Expiry()
    kind = _kind()

    @validates_schema
    def something_to_update(self, data: dict, **kwargs: Any) -> None:
        if not UPDATABLE & data.keys():
            # Of the body as a whole (errors' `_schema`), said once.
            raise ValidationError("An update needs one of: " + ", ".join(sorted(UPDATABLE)) + ".")


class RotateKey(Schema):
    """What a rotation may say: how long the old key keeps working, and when the new one
    expires."""

    grace_seconds = fields.Integer(
        strict=True, load_default=0, validate=validate.Range(min=0, max=MAX_GRACE_SECONDS)
    )
    expires_at = Expiry()


_METADATA_MEMBER = re.compile(r"metadata\[(.*)\]", re.DOTALL)


class ListArguments(PageArguments):
    kind = _kind()
    state = fields.String(
        validate=validate.OneOf((ACTIVE, EXPIRED), error="Must be one of: {choices}.")
    )
    # Keys never used, or last used before this time.
    unused_since = Timestamp()
    enabled = QueryFlag()
    # Keys outside (true) or within (false) the organization's policy as it is now: those
    # that expire later than its max_key_lifetime_days allows from now, or never.
    outside_policy = QueryFlag()
    # The keys of one identity (its id, or else its external id).
    identity = identity_reference()
    # `metadata[<name>]=<value>` in a query string (pre_load gathers them); an object in an
    # MCP tool's arguments. Keys with every member given.
    metadata = fields.Dict(keys=_metadata_name(), values=_metadata_value())

    @pre_load
    def gather_metadata(self, data: dict, **kwargs: Any) -> dict:
        members = {
            match[1]: value
            for name, value in data.items()
            if (match := _METADATA_MEMBER.fullmatch(name))
        }
        if not members:
            return data
        others = {name: value for name, value in data.items() if name[:9] != "metadata["}
        return others | {"metadata": members}


class KeyReference(Schema):
    """The key an MCP tool names, as a path names it in /api/keys/<reference>: its
    identifier, its shown form or its full value."""

    key = fields.String(required=True)


class KeyOutput(Schema):
    """A key as list, get and update show it: `key` is `<identifier>...`."""

    key = fields.Function(lambda key: key.shown or keyformat.shown(key.identifier))
    identifier = fields.String(
        metadata={
            "description": "The key's public identifier, which paths and lists name it by: "
            "a native key's first characters, before its secret; an imported key's own "
            "`imported_...`. Never a secret."
        }
    )
    name = fields.String()
    kind = fields.String()
    scopes = fields.Function(lambda key: list(to_names(key.scope_bits)))
    immutable = fields.Function(lambda key: is_immutable(key.kind))
    last_used = fields.String(allow_none=True)  # times come as shown (timestamps.iso)
    created = fields.String()
    updated = fields.String()
    expires_at = fields.String(allow_none=True)
    created_by = fields.Function(
        lambda key: None if key.created_by is None else keyformat.shown_name(key.created_by)
    )
    enabled = fields.Boolean()
    allowed_ips = fields.List(fields.String())
    rate_limit = fields.Function(operator.attrgetter("rate_limit"))
    metadata = fields.Dict(keys=fields.String(), values=fields.String())
    replaced_by = fields.Function(
        lambda key: None if key.replaced_by is None else keyformat.shown(key.replaced_by)
    )
    quota = fields.Function(operator.attrgetter("quota"))
    quota_remaining = fields.Function(lambda key: quotas.binding(key)[0])
    quota_bound_by = fields.Function(lambda key: quotas.binding(key)[1])
    identity = fields.Function(
        lambda key: None if key.identity is None else key.identity._asdict(),
        metadata={"description": "The identity that holds the key: its `id` and `external_id`."},
    )


class KeyPage(Schema):
    page = fields.Integer()
    page_size = fields.Integer()
    total_count = fields.Integer()
    data = fields.List(fields.Nested(KeyOutput))


# Built once: schemas hold no per-request state.
create_key = CreateKey()
update_key = UpdateKey()
rotate_key = RotateKey()
list_arguments = ListArguments()
# What an empty query string loads to (the defaults), loaded once: most list requests
# have none, and loading it cost a list page 2% of its time (bench/README.md).
list_defaults = MappingProxyType(list_arguments.load({}))
key_reference = KeyReference()
key_output = KeyOutput()
key_page = KeyPage()

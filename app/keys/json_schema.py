"""What the OpenAPI document says of the key schemas (app/keys/schemas.py) beyond what
their marshmallow fields give: the computed output fields' types, the name rule as a
pattern, and the rules the schemas check across fields (their `validates_schema` methods)."""

from __future__ import annotations

from app.domain.periods import PERIODS
from app.domain.scopes import CUSTOM, FIXED, KINDS, SCOPES, to_names
from app.keys.schemas import BIDI_CONTROLS, CONTROLS, READ_ONLY, UPDATABLE

# What the key output's fields are beyond their marshmallow type (fields.Function carries
# none; the times are strings in the date-time format).
OUTPUT_FIELDS = {
    "key": {
        "type": "string",
        "description": "`<identifier>...`; the full key in the create response only.",
    },
    "kind": {"type": "string", "enum": list(KINDS)},
    "scopes": {"type": "array", "items": {"type": "string", "enum": list(SCOPES)}},
    "immutable": {"type": "boolean"},
    "last_used": {"type": ["string", "null"], "format": "date-time"},
    "created": {"type": "string", "format": "date-time"},
    "updated": {"type": "string", "format": "date-time"},
    "expires_at": {
        "type": ["string", "null"],
        "format": "date-time",
        "description": "From this time on the key authenticates nothing; null: never.",
    },
    "created_by": {
        "type": ["string", "null"],
        "description": "`<identifier>...` of the key whose request made this one; null: the "
        "operator (CLI or first start).",
    },
    "rate_limit": {
        "type": ["object", "null"],
        "properties": {
            "requests": {"type": "integer", "minimum": 1},
            "seconds": {"type": "integer", "minimum": 1},
        },
        "required": ["requests", "seconds"],
        "additionalProperties": False,
        "description": "`requests` uses of the key per `seconds`; null: no limit of its own.",
    },
    "replaced_by": {
        "type": ["string", "null"],
        "description": "`<identifier>...` of the key that replaced this one by rotation; "
        "null: not rotated.",
    },
    "quota": {
        "type": ["object", "null"],
        "properties": {
            "requests": {"type": "integer", "minimum": 1},
            "period": {"type": "string", "enum": list(PERIODS)},
        },
        "required": ["requests", "period"],
        "additionalProperties": False,
        "description": "`requests` allowed uses per UTC calendar `period` (a day from 00:00, "
        "a week from Monday, a month from its 1st; `lifetime`: never renewed); null: none.",
    },
    "quota_remaining": {
        "type": ["integer", "null"],
        "minimum": 0,
        "description": "The fewest uses left in the current period of the quotas that bind "
        "the key (its own, its makers', its identity's: each use spends them all); null: "
        "none binds it.",
    },
    "quota_bound_by": {
        "type": ["string", "null"],
        "enum": ["key", "maker", "identity", None],
        "description": "Whose quota `quota_remaining` is: the key's own, a key's that made "
        "it, or its identity's; null: no quota binds it.",
    },
}
EXPIRY_INPUT = {
    "type": ["string", "null"],
    "format": "date-time",
    "description": "A time in the future, with `Z` or an offset; null: never expires.",
}
# Read-only fields are not in the request schemas (a generated client offers no such
# argument), but a body that carries them back, as a client that edits a key it read does,
# is not refused.
READ_ONLY_INPUT = (
    "The read-only fields of a key ("
    + ", ".join(f"`{field}`" for field in sorted(READ_ONLY))
    + ") are accepted and ignored, whatever their values; any other unknown field is 422."
)
# What names may not hold: app/keys/schemas.py's rule, in the same escapes.
_REFUSED = CONTROLS + BIDI_CONTROLS


def complete_inputs(components: dict[str, dict]) -> None:
    """The request schemas' names, expiries and read-only fields, and the cross-field rules
    of CreateKey and UpdateKey."""
    name_input = _name_input()
    for name in ("CreateKey", "UpdateKey"):
        components[name]["properties"]["name"].update(name_input)
        components[name]["description"] = READ_ONLY_INPUT
    components["CreateKey"]["allOf"] = [
        _when_kind(CUSTOM, {"required": ["scopes"], "properties": {"scopes": {"minItems": 1}}}),
        *(
            _when_kind(kind, {"properties": {"scopes": _exactly(bits)}})
            for kind, bits in FIXED.items()
        ),
    ]
    # An update changes at least one field, said in words: a schema of anyOf alternatives is
    # one that client generators cannot make a model of. No key may be left without scopes.
    update = components["UpdateKey"]
    update["description"] = (
        "At least one of "
        + ", ".join(f"`{field}`" for field in sorted(UPDATABLE))
        + " (422 otherwise). "
        + READ_ONLY_INPUT
    )
    for name in ("CreateKey", "UpdateKey", "RotateKey"):
        components[name]["properties"]["expires_at"] = EXPIRY_INPUT
    update["properties"]["scopes"]["minItems"] = 1
    update["properties"]["kind"]["description"] = "Only the key's own kind (422 otherwise)."


def _name_input() -> dict[str, str]:
    """The name rule, made when the document is built (not when a worker starts): Python's
    other white space (what str.strip() removes) is found among 65,536 characters."""
    space = "".join(
        f"\\u{ord(c):04x}"
        for c in map(chr, range(0x10000))
        if c.isspace() and not (c < " " or "\x7f" <= c <= "\x9f")
    )
    return {
        "description": "1 to 200 characters after trimming surrounding white space (stored "
        "trimmed); no control characters, no bidirectional controls.",
        # Something besides white space, and nothing refused.
        "pattern": f"^[^{_REFUSED}]*[^{_REFUSED}{space}][^{_REFUSED}]*$",
    }


def _when_kind(kind: str, then: dict) -> dict:
    return {"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]}, "then": then}


def _exactly(bits: int) -> dict:
    """An array of exactly these scopes, in any order, duplicates allowed."""
    names = to_names(bits)
    return {
        "items": {"enum": list(names)},
        "allOf": [{"contains": {"const": name}} for name in names],
    }

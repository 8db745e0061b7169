"""What POST /api/keys/import and `flask keys import` take (docs/design.md, "Import and export"):
keys made elsewhere, or exported from here, each with a create's fields (schemas.py's CreateKey)
and its full key or SHA-256 digest; and what the import answers."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from datetime import datetime
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

from app.domain import keyformat
from app.domain.timestamps import utcnow
from app.http.arguments import Timestamp
from app.http.errors import SCHEMA, flatten, invalid
from app.keys.schemas import READ_ONLY, CreateKey, KeyOutput

# The most keys one import request brings in.
MAX_IMPORTED = 1000
# What an import entry ignores of an export line (read-only there too). Its `key`, `identifier`,
# `created` and `last_used` are what the key was; `organization` is for the operator's
# command, which reads it before the schema.
IMPORT_IGNORED = (READ_ONLY - {"key", "identifier", "created", "last_used"}) | {"organization"}
_HEX_DIGEST = re.compile(r"[0-9A-Fa-f]{64}\Z")
_PRINTABLE_KEY = re.compile(
    f"[\\x20-\\x7e]{{{keyformat.MIN_FOREIGN_LENGTH},{keyformat.MAX_FOREIGN_LENGTH}}}\\Z"
)
# A key as an export shows it: `<identifier>...`, 8 characters and `...`, or `imported:`
# and 8 hexadecimal digits.
_SHOWN_FORM = re.compile(r"(?:[\x20-\x7e]{1,64}\.\.\.|imported:[0-9a-f]{8})\Z")
_IDENTIFIER_FORM = "[A-Za-z0-9_]{8,64}"


def sha256_digest(text: str) -> bytes | None:
    """A SHA-256 digest written as 64 hexadecimal digits, or as base64 (standard or URL-safe,
    padded or not: other key services export it so); None for anything else."""
    if _HEX_DIGEST.match(text):
        return bytes.fromhex(text)
    padded = text + "=" * (-len(text) % 4)
    for altchars in (b"+/", b"-_"):
        try:
            decoded = base64.b64decode(padded, altchars=altchars, validate=True)
        except ValueError:
            continue
        if len(decoded) == 32:
            return decoded
    return None


class Moment(Timestamp):
    """When something happened: not later than now."""

    def _deserialize(self, value, attr, data, **kwargs) -> datetime:
        moment = super()._deserialize(value, attr, data, **kwargs)
        if moment > utcnow():
            raise ValidationError("Must not be in the future.")
        return moment


class ImportedKey(CreateKey):
    """One key brought in: the full key (`key`, any format of 16 to 256 printable ASCII
    characters) or its SHA-256 digest (`key_sha256`), a create's fields, and when it was
    made and last used. With the digest, `key` may be the shown form an export gives,
    and `identifier` the identifier it had, kept when free. An expiry in the past is taken:
    the key comes in expired, as it was."""

    key = fields.String()
    key_sha256 = fields.String()
    identifier = fields.String(
        validate=validate.Regexp(
            f"{_IDENTIFIER_FORM}\\Z", error="An identifier is 8 to 64 of A-Z a-z 0-9 _."
        )
    )
    expires_at = Timestamp(allow_none=True)
    created = Moment()
    last_used = Moment(allow_none=True)
    # `identity` (CreateKey's: an identity's id or external id), or as an export shows it,
    # {"id", "external_id"}: by its external id, the organization's own and the same in
    # every service, where its id is this service's.

    @pre_load
    def drop_read_only(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, Mapping):  # refused by the schema, naming the entry
            return data
        kept = {field: value for field, value in data.items() if field not in IMPORT_IGNORED}
        identity = kept.get("identity")
        if isinstance(identity, dict) and isinstance(identity.get("external_id"), str):
            kept["identity"] = identity["external_id"]
        return kept

    @validates_schema
    def one_key(self, data: dict, **kwargs: Any) -> None:
        key, written = data.get("key"), data.get("key_sha256")
        if key is None and written is None:
            raise ValidationError(
                "Give the full key (`key`) or its SHA-256 digest (`key_sha256`).", "key"
            )
        if written is not None:
            digest = sha256_digest(written)
            if digest is None:
                raise ValidationError(
                    "A SHA-256 digest: 64 hexadecimal digits, or its 32 bytes in base64.",
                    "key_sha256",
                )
            if key is None or _SHOWN_FORM.match(key):
                return
            if not _PRINTABLE_KEY.match(key) or keyformat.digest(key) != digest:
                raise ValidationError("Is not the key whose digest key_sha256 gives.", "key")
            return
        if not _PRINTABLE_KEY.match(key):
            raise ValidationError(
                f"A key is {keyformat.MIN_FOREIGN_LENGTH} to {keyformat.MAX_FOREIGN_LENGTH} "
                "printable ASCII characters.",
                "key",
            )
        if keyformat.is_shown_form(key):  # a name of a key, which no door takes for a key
            raise ValidationError("Is a key's shown form (<identifier>...), not a key.", "key")
        identifier = data.get("identifier")
        if identifier and keyformat.is_full_key(key) and keyformat.identifier_of(key) != identifier:
            raise ValidationError("Is not the identifier of this key.", "identifier")

    @post_load
    def digested(self, data: dict, **kwargs: Any) -> dict:
        """`digest`, `full_key` (None: the digest alone) and `shown_as` (the shown form an
        export gave, or None) in place of `key` and `key_sha256`."""
        key, written = data.pop("key", None), data.pop("key_sha256", None)
        data["shown_as"] = None
        if written is not None:
            data["digest"] = sha256_digest(written)
            if key is not None and _SHOWN_FORM.match(key):
                data["shown_as"], key = key, None
        else:
            data["digest"] = keyformat.digest(key)
        data["full_key"] = key
        return data


class ImportKeys(Schema):
    keys = fields.List(
        fields.Nested(ImportedKey),
        required=True,
        validate=validate.Length(min=1, max=MAX_IMPORTED),
    )


def entry_errors(messages: Mapping, name: Any = "keys[{}]") -> dict[str, list[str]]:
    """marshmallow's messages of a list of entries as `keys[3].kind`: each entry and field
    named (`keys[3]` alone: the entry as a whole)."""
    named: dict[str, list[str]] = {}
    for index, inner in messages.items():
        entry = name.format(index)
        if not isinstance(inner, Mapping):
            named[entry] = [str(m) for m in inner]
            continue
        for field, texts in flatten(inner).items():
            place = entry if field == SCHEMA else f"{entry}.{field}"
            named.setdefault(place, []).extend(texts)
    return named


def load_import(body: dict) -> list[dict]:
    """An import's entries, loaded; 422 naming each refused entry and field."""
    try:
        return import_keys.load(body)["keys"]
    except ValidationError as error:
        messages = error.normalized_messages()
        entries = messages.pop("keys", None)
        errors = flatten(messages)
        if isinstance(entries, Mapping):
            errors |= entry_errors(entries)
        elif entries is not None:
            errors["keys"] = [str(m) for m in entries]
        raise invalid(errors) from None


class ImportedKeys(Schema):
    """What an import answers: how many keys came in, and each as the API shows it."""

    imported = fields.Integer()
    keys = fields.List(fields.Nested(KeyOutput))


import_keys = ImportKeys()
imported_key = ImportedKey()

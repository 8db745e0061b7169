"""A key's bodies as the API sends them (get, update, list, create), built directly from
the key: `dump_key` gives what `schemas.key_output.dump` gives, field for field and in its
order, and `dump_page` what `schemas.key_page.dump` gives (KeyOutput and KeyPage, in
app/keys/schemas.py, remain the document's and the test's reference)."""

from __future__ import annotations

from typing import Any

from app.domain import keyformat
from app.domain.scopes import is_immutable, to_names
from app.quotas import service as quotas
from app.storage.queries import Key, Page


def dump_key(key: Key) -> dict:
    """What `key_output.dump(key)` gives, field for field and in its order, in one
    function: a list page dumps 50 keys, and marshmallow's per-field machinery cost it
    twice the whole page (bench/README.md). tests/test_dump.py checks both give the same
    bodies, for keys with every field set and with none: a field added to KeyOutput fails
    there until it is added here."""
    quota = key.quota
    left, bound_by = quotas.binding(key)
    return {
        "key": key.shown or keyformat.shown(key.identifier),
        "identifier": key.identifier,
        "name": key.name,
        "kind": key.kind,
        "scopes": list(to_names(key.scope_bits)),
        "immutable": is_immutable(key.kind),
        "last_used": key.last_used,
        "created": key.created,
        "updated": key.updated,
        "expires_at": key.expires_at,
        "created_by": None if key.created_by is None else keyformat.shown_name(key.created_by),
        "enabled": key.enabled,
        "allowed_ips": key.allowed_ips,
        "rate_limit": key.rate_limit,
        "metadata": key.metadata,
        "replaced_by": None if key.replaced_by is None else keyformat.shown(key.replaced_by),
        "quota": quota,
        "quota_remaining": left,
        "quota_bound_by": bound_by,
        "identity": None if key.identity is None else key.identity._asdict(),
    }


def dump_page(page: Page[Key]) -> dict:
    """What `key_page.dump(page)` gives: get, update and list send these two."""
    return {
        "page": page.page,
        "page_size": page.page_size,
        "total_count": page.total_count,
        "data": [dump_key(key) for key in page.data],
    }


def created_key(key: Any, full_key: str) -> dict:
    """The create response: the only body that carries the full key."""
    return dump_key(key) | {"key": full_key}

"""What many tests check of a key object: its fields, in their order (docs/api.md,
"Responses"), and the bound of its metadata."""

import json

KEY_FIELDS = (
    "key",
    "identifier",
    "name",
    "kind",
    "scopes",
    "immutable",
    "last_used",
    "created",
    "updated",
    "expires_at",
    "created_by",
    "enabled",
    "allowed_ips",
    "rate_limit",
    "metadata",
    "replaced_by",
    "quota",
    "quota_remaining",
    "quota_bound_by",
    "identity",
)

# A key's metadata as forward auth sends it in X-Api-Key-Metadata (compact ASCII JSON) is at
# most this many bytes, so that every gateway's default header buffers carry it.
METADATA_BYTES = 2048


def metadata_header(metadata: dict[str, str]) -> str:
    """X-Api-Key-Metadata's value for `metadata`, written here as docs/api.md says it."""
    return json.dumps(metadata, separators=(",", ":"), ensure_ascii=True)


def metadata_of(size: int) -> dict[str, str]:
    """Metadata whose X-Api-Key-Metadata is exactly `size` bytes (at least 1,800), mostly
    non-ASCII characters, which JSON writes as \\uXXXX, six bytes for one character."""
    metadata = {f"team.{n}": "Ωmega café " * 20 for n in range(4)}
    left = size - len(metadata_header(metadata)) - len(',"pad":""')
    metadata["pad"] = "é" * (left // 6) + "x" * (left % 6)
    assert len(metadata_header(metadata)) == size
    return metadata

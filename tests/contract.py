"""What CONTRACT.md fixes and many tests check: the fields of a key object, in its order."""

KEY_FIELDS = (
    "key",
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
)

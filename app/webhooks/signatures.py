"""Signing as the Standard Webhooks specification says, so that its official libraries
verify a delivery unchanged: `webhook-id` (the delivery's id, the same on every try),
`webhook-timestamp` (Unix seconds of this try) and `webhook-signature`, one `v1,<base64
HMAC-SHA256 of "id.timestamp.body">` per secret in use, separated by spaces (two while a
replaced secret still signs)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"  # noqa: S105  # nosec B105 - the prefix, not a secret
SECRET_BYTES = 32


def new_secret() -> str:
    """A signing secret: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the secret's bytes."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(message_id: str, timestamp: int, body: bytes, keys: list[str]) -> dict[str, str]:
    """The three headers of one try, signed by every secret of `keys`."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(key, message_id, timestamp, body) for key in keys),
    }

"""A log line holds no key made elsewhere either: any token a key could be (16 or more of
`A-Z a-z 0-9 - . _ ~ +`) is written as an imported key is shown, unless it is a word or
one of the service's own public names; the line stays readable."""

from __future__ import annotations

import hashlib
import secrets
from urllib.parse import quote

import pytest

from app.domain import keyformat
from app.domain.lines import Lines

LINES = Lines("ak_")


def digest_form(token: str) -> str:
    return "imported:" + hashlib.sha256(token.encode()).hexdigest()[:8]


@pytest.mark.parametrize(
    "token",
    [
        secrets.token_urlsafe(24),
        secrets.token_hex(16),
        secrets.token_urlsafe(12),  # 16 characters, the shortest key taken
        "1234567890123456",
        "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
        secrets.token_hex(20) + "==",
        "ABCDEFGHJKLMNPQR2345",  # capitals with a digit: no setting's name
    ],
    ids=["base64url", "hex", "shortest", "digits", "uuid", "padded", "base32"],
)
def test_a_token_is_written_as_an_imported_key_is_shown(token):
    for line in (f"GET /x/{token} HTTP/1.1", f"GET /x?k={token}&n=2", f'"agent {token}"'):
        masked = LINES.masked(line)
        assert token.rstrip("=") not in masked
        assert keyformat.shown_foreign(token) in masked, masked


def test_a_prefixed_token_keeps_its_prefix_only():
    token = "sk_live_" + secrets.token_hex(16)
    masked = LINES.masked(f"User-Agent: {token}")
    assert masked == f"User-Agent: sk_live_{hashlib.sha256(token.encode()).hexdigest()[:4]}..."


def test_an_escaped_token_is_read_decoded():
    token = secrets.token_urlsafe(24)
    for written in (quote(token, safe=""), "".join(f"%{b:02X}" for b in token.encode())):
        masked = LINES.masked(f"GET /api/keys/{written} HTTP/1.1")
        assert f"GET /api/keys/{digest_form(token)} HTTP/1.1" == masked


@pytest.mark.parametrize(
    "line",
    [
        '127.0.0.1 [01/Dec/2026:20:10:30 +0000] "GET /api/keys/ak_NZQrKUHvTA1n HTTP/1.1" 200',
        "GET /api/keys/ak_NZQrKUHvTA1n.../usage?since=2026-12-01T20%3A10%3A30Z",
        "GET /api/keys/imported_NZQrKUHvTA1n/usage",
        "GET /v1/revocable_token_types",
        "GET /api/identities/id_AbCd-EfGh_IjKlMn/keys",
        "GET /api/webhooks/ep_AbCd-EfGh_IjKlMn/deliveries/msg_AbCd-EfGh_IjKlMnOpQrStUv",
        '"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0.0.0 Safari/537.36"',
        'File "/srv/.venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py", line 1',
        "sqlalchemy.exc.IntegrityError: duplicate key value violates unique constraint",
        "imported:0123abcd and sk_live_1a2b... are shown forms",
        "WEBHOOK_ALLOW_PRIVATE is on, RATELIMIT_STORAGE_URI is redis://127.0.0.1:6379/0",
        "Set RATELIMIT_STORAGE_URI=redis://... on every host.",
    ],
)
def test_the_words_of_a_log_are_left_as_written(line):
    assert LINES.masked(line) == line


def test_an_identifier_of_another_prefix_is_masked_but_this_services_are_kept():
    """KEY_PREFIX says which identifiers are the service's: one of 16 or more characters
    under another prefix could be a key made elsewhere."""
    identifier = "acme_live_NZQrKUHvTA1n"
    assert LINES.masked(f"/api/keys/{identifier}...") == f"/api/keys/{digest_form(identifier)}..."
    assert Lines("acme_live_").masked(f"/api/keys/{identifier}...") == f"/api/keys/{identifier}..."
    assert LINES.masked("/api/keys/ak_NZQrKUHvTA1n...") == "/api/keys/ak_NZQrKUHvTA1n..."


def test_a_native_key_keeps_its_identifier():
    identifier, key = keyformat.new_key("ak_")
    assert LINES.masked(f"GET /api/keys/{key}_backup") == f"GET /api/keys/{identifier}..._backup"

"""Keys derived from a secret, and short texts sealed under one, with the standard library
alone (hashlib, hmac): the stored answers of retried writes (app/idempotency.py).

- `hkdf_sha256`: HKDF with HMAC-SHA256, as RFC 5869 defines it.
- `seal`: encrypt-then-MAC under two keys derived from the one given. The text is XORed
  with a SHAKE256 stream of the stream key and a random 16-byte nonce; the tag is an
  HMAC-SHA256 of the nonce, the associated data (with its length) and the ciphertext.
  `unseal` checks the tag in constant time before it decrypts anything.

Why not the cryptography package's AES-GCM: its bindings, loaded by the first request with
an Idempotency-Key, held 8 MiB in every worker that served one (bench/README.md, "A
worker's memory"); hashlib and hmac are loaded already.
"""

from __future__ import annotations

import hashlib
import hmac
import os

NONCE_BYTES = 16
TAG_BYTES = 32
_HASH = "sha256"
_HASH_BYTES = 32


class Unopened(ValueError):
    """A sealed text that does not open: another key, other associated data, or changed."""


def hkdf_sha256(secret: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """`length` bytes (at most 255 hashes) of HKDF-SHA256 of `secret` (RFC 5869)."""
    pseudorandom = hmac.digest(salt or bytes(_HASH_BYTES), secret, _HASH)
    output, block = b"", b""
    for counter in range(1, -(-length // _HASH_BYTES) + 1):
        block = hmac.digest(pseudorandom, block + info + bytes([counter]), _HASH)
        output += block
    return output[:length]


def _keys(key: bytes) -> tuple[bytes, bytes]:
    """The stream key and the tag key, apart, from one key."""
    return hmac.digest(key, b"stream", _HASH), hmac.digest(key, b"tag", _HASH)


def _xored(text: bytes, stream_key: bytes, nonce: bytes) -> bytes:
    stream = hashlib.shake_256(stream_key + nonce).digest(len(text))
    mixed = int.from_bytes(text, "big") ^ int.from_bytes(stream, "big")
    return mixed.to_bytes(len(text), "big")


def _tag(tag_key: bytes, nonce: bytes, associated: bytes, ciphertext: bytes) -> bytes:
    told = nonce + len(associated).to_bytes(8, "big") + associated + ciphertext
    return hmac.digest(tag_key, told, _HASH)


def seal(key: bytes, plain: bytes, associated: bytes) -> bytes:
    """`plain` sealed under `key`, bound to `associated`: nonce, ciphertext, tag."""
    stream_key, tag_key = _keys(key)
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = _xored(plain, stream_key, nonce)
    return nonce + ciphertext + _tag(tag_key, nonce, associated, ciphertext)


def unseal(key: bytes, sealed: bytes, associated: bytes) -> bytes:
    """What `seal(key, plain, associated)` sealed; Unopened for anything else."""
    if len(sealed) < NONCE_BYTES + TAG_BYTES:
        raise Unopened("too short to be sealed")
    stream_key, tag_key = _keys(key)
    nonce, tag = sealed[:NONCE_BYTES], sealed[-TAG_BYTES:]
    ciphertext = sealed[NONCE_BYTES:-TAG_BYTES]
    if not hmac.compare_digest(tag, _tag(tag_key, nonce, associated, ciphertext)):
        raise Unopened("the tag does not match")
    return _xored(ciphertext, stream_key, nonce)

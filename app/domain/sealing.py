"""Keys derived from a secret, and short texts sealed under one: the stored answers of
retried writes (app/idempotency.py).

- `hkdf_sha256`: HKDF with HMAC-SHA256, as RFC 5869 defines it (the standard library's
  hmac; tests/test_sealing.py checks the RFC's test vector).
- `seal`: XChaCha20-Poly1305 (an AEAD: the text encrypted and authenticated with its
  associated data) from PyNaCl, the Python Cryptographic Authority's binding of
  libsodium, with a random 24-byte nonce; `unseal` opens only what the same key and
  associated data sealed.

Why PyNaCl rather than the cryptography package's AES-GCM: the same kind of well-kept
primitive, and 2.2 MiB in a worker where cryptography's bindings held 8 MiB (bench/README.md,
"A worker's memory"). It is imported by the first seal or unseal, so that a worker that
never serves an Idempotency-Key does not carry it.
"""

from __future__ import annotations

import hmac
import os

NONCE_BYTES = 24
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


def seal(key: bytes, plain: bytes, associated: bytes) -> bytes:
    """`plain` sealed under the 32-byte `key`, bound to `associated`: nonce, then the
    ciphertext with its tag."""
    from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_encrypt as encrypt

    nonce = os.urandom(NONCE_BYTES)
    return nonce + encrypt(plain, associated, nonce, key)


def unseal(key: bytes, sealed: bytes, associated: bytes) -> bytes:
    """What `seal(key, plain, associated)` sealed; Unopened for anything else."""
    from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_decrypt as decrypt
    from nacl.exceptions import CryptoError

    try:
        return decrypt(sealed[NONCE_BYTES:], associated, sealed[:NONCE_BYTES], key)
    except (CryptoError, ValueError, TypeError) as error:
        raise Unopened("the sealed answer does not open") from error

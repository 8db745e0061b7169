"""The key format: making a key, its identifier, checksum, SHA-256 digest and shown form.

A key is ``<identifier><secret><checksum>``:

- identifier: the configured prefix (default ``ak_``) and 12 random base62 characters
  (71 bits): public, unique, what lists show and paths name;
- secret: 32 random base62 characters (190 bits), never stored;
- checksum: 6 base62 characters of the CRC-32 of everything before it, so that a mistyped
  or made-up key is refused without asking the database.

The secret and checksum have a fixed length, so a key splits from its end: changing the
prefix never breaks the keys made before.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import zlib
from urllib.parse import unquote

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
IDENTIFIER_RANDOM_LENGTH = 12
SECRET_LENGTH = 32
CHECKSUM_LENGTH = 6
TAIL_LENGTH = SECRET_LENGTH + CHECKSUM_LENGTH
MIN_IDENTIFIER_LENGTH = 8
MAX_IDENTIFIER_LENGTH = 64
# What list and get responses append to an identifier in place of the secret.
SHOWN_SUFFIX = "..."

_MAX_PREFIX = MAX_IDENTIFIER_LENGTH - IDENTIFIER_RANDOM_LENGTH
PREFIX_PATTERN = re.compile(f"[A-Za-z0-9_]{{1,{_MAX_PREFIX}}}")
_IDENTIFIER = re.compile(f"[A-Za-z0-9_]{{{MIN_IDENTIFIER_LENGTH},{MAX_IDENTIFIER_LENGTH}}}")
_FULL_KEY = re.compile(
    f"[A-Za-z0-9_]{{{MIN_IDENTIFIER_LENGTH + TAIL_LENGTH},{MAX_IDENTIFIER_LENGTH + TAIL_LENGTH}}}"
)


def _base62(number: int, width: int) -> str:
    chars = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        chars.append(ALPHABET[digit])
    return "".join(reversed(chars))


def _random(width: int) -> str:
    return _base62(secrets.randbelow(62**width), width)


# Every base62 number of two digits, by value: a checksum (six digits of a CRC-32, which is
# below 62**6) is three lookups, a quarter of the work of _base62 on every request.
_PAIRS = [high + low for high in ALPHABET for low in ALPHABET]


def _checksum(body: str) -> str:
    high, rest = divmod(zlib.crc32(body.encode("ascii")), 62**4)
    middle, low = divmod(rest, 62**2)
    return _PAIRS[high] + _PAIRS[middle] + _PAIRS[low]


def new_key(prefix: str) -> tuple[str, str]:
    """A fresh key: (identifier, full key value)."""
    identifier = prefix + _random(IDENTIFIER_RANDOM_LENGTH)
    body = identifier + _random(SECRET_LENGTH)
    return identifier, body + _checksum(body)


def is_full_key(value: str) -> bool:
    """True when `value` has the shape and checksum of a full key."""
    return (
        _FULL_KEY.fullmatch(value) is not None
        and _checksum(value[:-CHECKSUM_LENGTH]) == value[-CHECKSUM_LENGTH:]
    )


def digest(full_key: str) -> bytes:
    """The SHA-256 digest of a full key: the only form in which a key is stored."""
    return hashlib.sha256(full_key.encode("ascii")).digest()


def identifier_of(full_key: str) -> str:
    """The identifier part of a well-formed full key."""
    return full_key[:-TAIL_LENGTH]


def is_identifier(value: str) -> bool:
    """True when `value` has the shape of an identifier."""
    return _IDENTIFIER.fullmatch(value) is not None


def shown(identifier: str) -> str:
    """The form in which list and get responses show a key."""
    return identifier + SHOWN_SUFFIX


_MAX_UNESCAPES = 4
_CANDIDATE = re.compile(f"[A-Za-z0-9_]{{{MIN_IDENTIFIER_LENGTH + TAIL_LENGTH},}}")


def _masked_literally(text: str) -> str:
    return _CANDIDATE.sub(lambda match: shown(identifier_of(match.group())), text)


def masked(text: str) -> str:
    """`text` with everything as long as a key shown as `<identifier>...` (for log lines).

    The checksum is not asked: a mistyped key is still nearly all secret. A key written
    with percent-escapes (`ak%5F...`, even escaped twice), as a raw request line may hold
    it, is found too: such a line is shown decoded, then masked.
    """
    decoded = text
    for _ in range(_MAX_UNESCAPES):
        decoded, undecoded = unquote(decoded), decoded
        if decoded == undecoded:
            break
    if decoded != text and _CANDIDATE.search(decoded):
        return _masked_literally(decoded)
    return _masked_literally(text)

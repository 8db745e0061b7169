"""The key format: making a key, its identifier, checksum, SHA-256 digest and shown form.

A key is ``<identifier><secret><checksum>``:

- identifier: the configured prefix (default ``ak_``) and 12 random base62 characters
  (71 bits): public, unique, what lists show and paths name;
- secret: 32 random base62 characters (190 bits), never stored;
- checksum: 6 base62 characters of the CRC-32 of everything before it, so that a mistyped
  or made-up key is refused without asking the database.

The secret and checksum have a fixed length, so a key splits from its end: changing the
prefix never breaks the keys made before.

A key made elsewhere and imported is any 16 to 256 printable ASCII
characters: it is looked up by its digest like a native key, without a checksum to refuse it
first (the failed-authentication limit per address is what bounds guessing). It has an
identifier of its own, ``imported_`` and 12 random base62 characters, drawn here and never
derived from the key. It is shown by its digest, never by a part of its secret: a key with
a prefix (FOREIGN_PREFIX: one or two words of 2 to 8 lower case letters, each ended by `_`
or `-`, 12 characters at most, then 16 or more: `sk_live_`, `ghp_`, `xoxb-`) as that prefix,
the first 4 hexadecimal digits of its SHA-256 digest and ``...``; any other as
``imported:`` and the first 8 hexadecimal digits of its digest.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import zlib
from urllib.parse import quote, unquote

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
IDENTIFIER_RANDOM_LENGTH = 12
SECRET_LENGTH = 32
CHECKSUM_LENGTH = 6
TAIL_LENGTH = SECRET_LENGTH + CHECKSUM_LENGTH
MIN_IDENTIFIER_LENGTH = 8
MAX_IDENTIFIER_LENGTH = 64
# The prefix of the keys this service makes unless KEY_PREFIX says another.
DEFAULT_PREFIX = "ak_"
# What list and get responses append to an identifier in place of the secret.
SHOWN_SUFFIX = "..."

_MAX_PREFIX = MAX_IDENTIFIER_LENGTH - IDENTIFIER_RANDOM_LENGTH
PREFIX_PATTERN = re.compile(f"[A-Za-z0-9_]{{1,{_MAX_PREFIX}}}")
_IDENTIFIER = re.compile(f"[A-Za-z0-9_]{{{MIN_IDENTIFIER_LENGTH},{MAX_IDENTIFIER_LENGTH}}}")
_FULL_KEY = re.compile(
    f"[A-Za-z0-9_]{{{MIN_IDENTIFIER_LENGTH + TAIL_LENGTH},{MAX_IDENTIFIER_LENGTH + TAIL_LENGTH}}}"
)


# Keys made elsewhere: any format of this many printable ASCII characters.
MIN_FOREIGN_LENGTH = 16
MAX_FOREIGN_LENGTH = 256
_FOREIGN_KEY = re.compile(f"[\\x20-\\x7e]{{{MIN_FOREIGN_LENGTH},{MAX_FOREIGN_LENGTH}}}")
IMPORTED_PREFIX = "imported_"
# An imported key's shown form: this and so many hexadecimal digits of its digest, or its
# prefix and so many of them, then `...`.
SHOWN_CHARACTERS = 8
SHOWN_DIGEST = "imported:"
SHOWN_AFTER_PREFIX = 4
# What counts as a key's prefix, the public head of a key made elsewhere, at most so long
# and followed by at least MIN_FOREIGN_LENGTH characters.
FOREIGN_PREFIX = re.compile(r"(?:[a-z]{2,8}[_-]){1,2}")
MAX_FOREIGN_PREFIX = 12


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


def has_native_form(value: str, prefix: str) -> bool:
    """True when `value` begins with this service's configured key prefix: a key of this
    service or none, its shape and checksum alone decide (a mistyped or cut key, refused
    unread); no key made elsewhere is taken with that prefix."""
    return value.startswith(prefix)


# The ids this service gives identities, webhook endpoints and deliveries (a prefix, then
# base64url characters): public, so logs write them as they are, and never a key.
PUBLIC_IDS = r"(?:id|ep)_[A-Za-z0-9_-]{16}|msg_[A-Za-z0-9_-]{24}"
_PUBLIC_ID = re.compile(PUBLIC_IDS)


def is_foreign_key(value: str, prefix: str) -> bool:
    """True when `value` may be a key made elsewhere (16 to 256 printable ASCII characters)
    and is not one of this service's form: neither a well-formed key, nor one with its shape
    and `prefix` and a wrong checksum, nor a key's shown form (`<identifier>...`: a name
    of a key, never a key), nor one of the service's public ids."""
    return (
        _FOREIGN_KEY.fullmatch(value) is not None
        and not has_native_form(value, prefix)
        and not is_full_key(value)
        and not is_shown_form(value)
        and _PUBLIC_ID.fullmatch(value) is None
    )


def is_presentable(value: str, prefix: str) -> bool:
    """True when `value` is worth one indexed read: a well-formed key of this service, or
    one that may have been made elsewhere and imported."""
    return is_full_key(value) or is_foreign_key(value, prefix)


def new_imported_identifier() -> str:
    """A fresh identifier for an imported key whose own cannot serve: random, never derived
    from the key."""
    return IMPORTED_PREFIX + _random(IDENTIFIER_RANDOM_LENGTH)


def foreign_prefix(text: str, whole: bool = True) -> str:
    """The prefix of a key made elsewhere (FOREIGN_PREFIX), or "" when it has none. `text`
    is the key (`whole`), or only its head, as an older shown form kept it."""
    found = FOREIGN_PREFIX.match(text)
    if found is None or found.end() > MAX_FOREIGN_PREFIX:
        return ""
    if whole and len(text) - found.end() < MIN_FOREIGN_LENGTH:
        return ""
    return found.group()


def shown_digest(key_digest: bytes, prefix: str = "") -> str:
    """How an imported key is shown, from its digest and its prefix ("": none)."""
    if prefix:
        return prefix + key_digest.hex()[:SHOWN_AFTER_PREFIX] + SHOWN_SUFFIX
    return SHOWN_DIGEST + key_digest.hex()[:SHOWN_CHARACTERS]


def shown_foreign(full_key: str) -> str:
    """How an imported key of a foreign format is shown: by its digest, after its prefix
    if it has one; never a part of its secret."""
    return shown_digest(digest(full_key), foreign_prefix(full_key))


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


def shown_name(name: str) -> str:
    """How a key named by another key's row (`created_by`) is shown: the name is its
    identifier, or an imported key's shown form, kept as it is shown."""
    if name.startswith(SHOWN_DIGEST) or name.endswith(SHOWN_SUFFIX):
        return name
    return shown(name)


_SHOWN_FORM = re.compile(f"[A-Za-z0-9_]{{1,{MAX_IDENTIFIER_LENGTH}}}{re.escape(SHOWN_SUFFIX)}")


def is_shown_form(value: str) -> bool:
    """True when `value` is written as lists show a key, `<identifier>...` (or as the docs
    write a placeholder, `ak_...`): a name of a key, never a key (nor a key with dots after
    it)."""
    return _SHOWN_FORM.fullmatch(value) is not None and not is_full_key(
        value.removesuffix(SHOWN_SUFFIX)
    )


# --- masking: no piece of a secret in a log line ------------------------------------------

_WORD = "A-Za-z0-9_"
# A full key is at least this long: a shorter run of word characters cannot hold one.
_LONGEST_FREE_RUN = MIN_IDENTIFIER_LENGTH + TAIL_LENGTH - 1
_RUN = re.compile(f"[{_WORD}]{{{_LONGEST_FREE_RUN + 1},}}")
# The same, where some characters may be written as percent-escapes (once or more).
_ESCAPED_RUN = re.compile(f"(?:[{_WORD}]|%[0-9A-Fa-f]{{2}}){{{_LONGEST_FREE_RUN + 1},}}")
_WORDS = re.compile(f"([{_WORD}]+)")
_MAX_UNESCAPES = 4
# Where the secret of a key made here may start: after a prefix and 12 random base62
# characters, before 32 + 6 base62 characters whose checksum's first digit is 0-4 (a
# CRC-32 is below 62**6 / 13): 92% of the places in random text are not.
_SHORTEST_IDENTIFIER = 1 + IDENTIFIER_RANDOM_LENGTH
_SECRET_START = re.compile(
    f"(?<=[0-9A-Za-z]{{{IDENTIFIER_RANDOM_LENGTH}}})"
    f"(?=[0-9A-Za-z]{{{SECRET_LENGTH}}}[0-4][0-9A-Za-z]{{{CHECKSUM_LENGTH - 1}}})"
)
_VALUES = {pair: value for value, pair in enumerate(_PAIRS)}
# A secret drawn with `secrets` has fewer different characters than this about once in
# 4 * 10**12 keys (and is then masked all the same, as unrecognised): runs of digits, of
# one letter, of hex, are not tried as secrets.
_MIN_DISTINCT = 12
# A run not recognised as keys keeps at most this head: an identifier is at least 8
# characters, so the head holds at most 7 of a secret that starts in the run.
_KEPT_HEAD = MIN_IDENTIFIER_LENGTH + 7
# What one line may spend finding its keys, counted in CRC-32s of a candidate key (a
# place tried costs about 4 of them), about 1.8 ms: past it, every long run left is
# masked as unrecognised, so that a line made to be slow to mask is masked fast instead.
# 2,048 (0.45 ms) was spent by two keys glued together under a long configured prefix,
# whose second identifier was then not shown (tests/test_masking.py's property).
_WORK_PER_LINE = 8192
_PLACE_COST = 4


def _unrecognised(run: str) -> str:
    """A run with no key found in it: if it could hold one, a head too short to hold 8 of a
    secret."""
    if len(run) <= _LONGEST_FREE_RUN:
        return run
    return run[: min(len(run) - TAIL_LENGTH, _KEPT_HEAD)] + SHOWN_SUFFIX


class _Line:
    """One line's masking, with what is left of its budget of work."""

    def __init__(self) -> None:
        self.work_left = _WORK_PER_LINE

    def keys_in(self, run: str) -> list[tuple[int, int]] | None:
        """Where each key in `run` starts and where its secret starts, by the secrets' order
        (overlaps included); None when the line's budget is spent."""
        data = run.encode("ascii")
        found = []
        for place in _SECRET_START.finditer(run, _SHORTEST_IDENTIFIER):
            tail = place.start()
            body_end = tail + SECRET_LENGTH
            starts = range(max(0, tail - MAX_IDENTIFIER_LENGTH), tail - _SHORTEST_IDENTIFIER + 1)
            plausible = len(set(run[tail:body_end])) >= _MIN_DISTINCT
            self.work_left -= _PLACE_COST + (len(starts) if plausible else 0)
            if self.work_left < 0:
                return None
            if not plausible:
                continue
            checksum = run[body_end : body_end + CHECKSUM_LENGTH]
            value = (_VALUES[checksum[:2]] * 62**2 + _VALUES[checksum[2:4]]) * 62**2
            value += _VALUES[checksum[4:]]
            crcs = [zlib.crc32(data[start:body_end]) for start in starts]
            if value in crcs:
                found.append((starts[crcs.index(value)], tail))
        return found

    def run(self, run: str) -> str:
        """`run` (word characters only) with every key's secret shown as `...`."""
        if len(run) <= _LONGEST_FREE_RUN:
            return run
        keys = self.keys_in(run)
        if keys is None:
            return _unrecognised(run)
        pieces, done = [], 0
        for start, tail in keys:
            if start > done:
                pieces.append(_unrecognised(run[done:start]))
                done = start
            pieces += (run[done:tail], SHOWN_SUFFIX)
            done = tail + TAIL_LENGTH
        pieces.append(_unrecognised(run[done:]))
        return "".join(pieces)

    def written(self, match: re.Match) -> str:
        """A run as the line writes it, percent-escapes and all, masked."""
        written = match.group()
        if "%" not in written:
            return self.run(written)
        decoded = unescaped(written)
        if decoded is None:  # escaped more times than a client or proxy does: not looked into
            return _unrecognised(written)
        if not _RUN.search(decoded):
            return written
        # Shown decoded and masked, the rest escaped again (so never a line break).
        parts = _WORDS.split(decoded)
        return "".join(
            self.run(part) if index % 2 else quote(part, safe="")
            for index, part in enumerate(parts)
        )


def unescaped(written: str) -> str | None:
    """`written` with its percent-escapes decoded, however many times a client or proxy
    escaped it (up to 4); None for more."""
    decoded = written
    for _ in range(_MAX_UNESCAPES):
        decoded, undecoded = unquote(decoded), decoded
        if decoded == undecoded:
            return decoded
    return None


def holds_full_key(text: str) -> bool:
    """Whether `text` holds a full key of this service anywhere (its shape and checksum, as
    masked() finds them), or a run too long to search within one line's budget."""
    line = _Line()
    for match in _RUN.finditer(text):
        found = line.keys_in(match.group())
        if found is None or found:
            return True
    return False


def masked(text: str) -> str:
    """`text` with every key in it shown as `<identifier>...` and no 8 characters in a row
    of any secret left (for log lines).

    A key may sit anywhere in a run of word characters (`x=<key>` then digits, `<key>_backup`,
    keys joined), so every run as long as a key is searched: at each place where a secret
    could start (after 12 base62 characters, before 38 more whose last 6 could be a CRC-32),
    every identifier length from 13 to 64 is tried against the checksum, and each key found
    keeps its identifier while its secret and checksum become `...`. What is left of a run
    and still as long as a key (a mistyped key, a digest, a run past the line's budget of
    work) keeps at most its first 15 characters: an identifier has at least 8, so at most 7
    of a secret remain. Shorter runs (paths, ids, timestamps, UUIDs, words) stay as written.
    A run with percent-escapes (`ak%5F...`, even escaped twice) is decoded first; if it then
    holds a run as long as a key, it is shown decoded and masked, the rest escaped again (a
    run still changing after 4 decodings is masked whole, as unrecognised).
    """
    pattern = _ESCAPED_RUN if "%" in text else _RUN
    if pattern.search(text) is None:
        return text
    return pattern.sub(_Line().written, text)

"""A log line with no key in it, of this service's form or made elsewhere.

keyformat.masked() finds this service's keys by their shape and checksum and keeps their
identifiers. A key made elsewhere and imported has no shape to find: any 16 to 256
printable characters. So every token a key could be is masked too: a run of 16 or more of
`A-Z a-z 0-9 - . _ ~ +` (then any `=`), the characters of base62, hex, base64url and most
home-grown keys (`/` separates a path's segments and is left out; a run written with
percent-escapes is read decoded), unless it is one of the words a log is made of:

- this service's own public names: a key's identifier (`KEY_PREFIX` or `imported_`, then
  12 base62 characters) and its shown form (`<identifier>...`), an identity's, a webhook
  endpoint's or a delivery's id, an imported key's shown form;
- a word of letters, written in lower case or in capitalised humps (`forward-auth`,
  `revocable_token_types`, `sqlalchemy.exc.IntegrityError`): parts of at least two lower
  case letters, each after at most one capital, joined by `-`, `_` or `.`;
- a setting's name (`WEBHOOK_ALLOW_PRIVATE`, `RATELIMIT_STORAGE_URI`): two or more parts of
  at least two capital letters, no digit, joined by `_`. A key of capitals and `_` alone
  would pass as written; no common key alphabet (base62, base32, hex, base64url) is one.

A token masked is written as an imported key is shown (keyformat.shown_foreign): its prefix
(`sk_live_`) and 4 hexadecimal digits of its SHA-256 digest, or `imported:` and 8 of them.
So a key made elsewhere reads in the log as it reads in the key's list, and nothing of it
is written; a token that was no key reads as a digest, which says nothing either.

What is not masked: a key made elsewhere written with other characters (`/`, `:`, `@`,
spaces), whose pieces shorter than 16 characters stay as written. docs/security.md says so.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from app.domain import keyformat

MIN_TOKEN = keyformat.MIN_FOREIGN_LENGTH
_CHARACTERS = r"A-Za-z0-9_.~+\-"
# Each looked for only where a run starts (a character of it tried once, not 16 times).
_TOKEN = re.compile(f"(?<![{_CHARACTERS}])[{_CHARACTERS}]{{{MIN_TOKEN},}}+=*")
# The same, where some characters may be written as percent-escapes.
_ESCAPED_TOKEN = re.compile(
    f"(?<![{_CHARACTERS}%])(?:[{_CHARACTERS}]|%[0-9A-Fa-f]{{2}}){{{MIN_TOKEN},}}+=*"
)
# A word of letters: lower case parts, each perhaps capitalised, of two letters or more.
_WORD = re.compile(
    r"_*(?:[A-Z]?[a-z]{2,})+(?:[-_.]+(?:[A-Z]?[a-z]{2,})+)*_*"
    r"|[A-Z]{2,}(?:_[A-Z]{2,})+"  # a setting's name
)
# An imported key's shown form (keyformat.shown_foreign), which a line may already hold.
_SHOWN_FOREIGN = f"{keyformat.FOREIGN_PREFIX.pattern}[0-9a-f]{{4}}\\.\\.\\."


def _safe(prefix: str) -> re.Pattern:
    identifier = f"(?:{re.escape(prefix)}|{keyformat.IMPORTED_PREFIX})[0-9A-Za-z]{{12}}"
    return re.compile(f"{identifier}(?:\\.\\.\\.)?|{keyformat.PUBLIC_IDS}|{_SHOWN_FOREIGN}")


class Lines:
    """Masks lines for a service whose keys have `prefix` (KEY_PREFIX)."""

    def __init__(self, prefix: str = keyformat.DEFAULT_PREFIX) -> None:
        self.safe = _safe(prefix)

    def token(self, token: str) -> str:
        """`token` as a line may write it: itself if it is a word, else as a key is shown."""
        if self.safe.fullmatch(token) or _WORD.fullmatch(token.rstrip("=")):
            return token  # a word, or a setting's name before its `=`
        if keyformat.SHOWN_SUFFIX in token:  # a shown form and what follows it: each masked
            pieces = token.split(keyformat.SHOWN_SUFFIX)
            if len(pieces) > 2 or any(pieces):
                return keyformat.SHOWN_SUFFIX.join(
                    self.token(piece) if len(piece) >= MIN_TOKEN else piece for piece in pieces
                )
        return keyformat.shown_foreign(token)

    def tokens(self, text: str) -> str:
        """`text` (no escapes) with every token masked."""
        return _TOKEN.sub(lambda match: self.token(match.group()), text)

    def written(self, match: re.Match) -> str:
        """A token as the line writes it, percent-escapes and all, masked."""
        written = match.group()
        if "%" not in written:
            return self.token(written)
        decoded = keyformat.unescaped(written)
        if decoded is None:  # escaped more times than a client or proxy does: masked whole
            return keyformat.shown_foreign(written)
        if not _TOKEN.search(decoded):
            return written
        # Shown decoded and masked, the rest escaped again (so never a line break).
        pieces, done = [], 0
        for found in _TOKEN.finditer(decoded):
            pieces += (quote(decoded[done : found.start()], safe=""), self.token(found.group()))
            done = found.end()
        pieces.append(quote(decoded[done:], safe=""))
        return "".join(pieces)

    def masked(self, text: str) -> str:
        """`text` with no key in it: this service's keys as `<identifier>...`, then every
        other token a key could be as a key made elsewhere is shown."""
        text = keyformat.masked(text)
        pattern = _ESCAPED_TOKEN if "%" in text else _TOKEN
        return pattern.sub(self.written, text)

"""marshmallow's own validation messages in words that say what to do: one table, applied
where every refused input becomes its error body (app/http/errors.py's flatten), so that the
REST API, the MCP tools and the CLI say the same. Messages the schemas write themselves
already do; these are marshmallow's defaults, for the fields that keep them."""

from __future__ import annotations

import re

# marshmallow's fixed messages (marshmallow 4), as a person should read them.
WORDS = {
    "Missing data for required field.": "Required: give a value.",
    "Field may not be null.": "Must not be null: give a value.",
    "Not a valid string.": "Must be a string (text in double quotes).",
    "Not a valid integer.": "Must be a whole number, such as 60.",
    "Not a valid boolean.": "Must be true or false.",
    "Not a valid list.": 'Must be a JSON array, such as ["a", "b"].',
    "Not a valid mapping type.": 'Must be a JSON object, such as {"name": "value"}.',
    "Invalid type.": "Must be a JSON object.",
    "Invalid input type.": "Must be a JSON object.",
    "Unknown field.": "Not a field this request takes: check its spelling (GET /openapi.json "
    "or its page /docs lists each request's fields).",
    "Not a valid IP address.": "Must be an IPv4 or IPv6 address, such as 203.0.113.7.",
}
# marshmallow's messages that carry a bound.
PATTERNS = (
    (re.compile(r"Longer than maximum length (\d+)\."), r"Too long: at most \1."),
    (re.compile(r"Shorter than minimum length (\d+)\."), r"Too short: at least \1."),
    (re.compile(r"Length must be between (\d+) and (\d+)\."), r"Must have from \1 to \2."),
    (
        re.compile(r"Must be greater than or equal to (-?\d+) and less than or equal to (-?\d+)\."),
        r"Must be a whole number from \1 to \2.",
    ),
)


def plain(message: str) -> str:
    """`message` in the words above, or as it is."""
    if message in WORDS:
        return WORDS[message]
    for pattern, words in PATTERNS:
        if pattern.fullmatch(message):
            return pattern.sub(words, message)
    return message

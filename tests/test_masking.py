"""No piece of a key's secret in a log line, whatever surrounds the key (docs/design.md, "Keys"):
over access-log lines drawn by hypothesis (keys of any prefix, glued to word characters, two
or three joined, percent-escaped once or twice, whole or in part, in the path, the query or
a logged header), no 8 consecutive characters of any key's secret part (what follows its
identifier) survive `keyformat.masked`, while each key's identifier and ordinary log content
(paths, ids, timestamps, UUIDs, short words) stay readable."""

from __future__ import annotations

import logging
import random
import string
from urllib.parse import quote, unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain import keyformat
from tests.test_keyformat import base62_crc32

WORD = string.ascii_letters + string.digits + "_"
PIECE = 8  # no run this long of a secret may survive
RANDOM_PART = keyformat.IDENTIFIER_RANDOM_LENGTH + keyformat.SECRET_LENGTH
# Lines as gunicorn.conf.py's access_log_format writes them, the token in the path, the
# query or the one header it logs (User-Agent).
START = '127.0.0.1 [25/Nov/2026:10:11:12 +0000] "GET '
TEMPLATES = {
    "path": START + '/api/keys/{} HTTP/1.1" 404 120 3ms "-"',
    "query": START + '/healthz?x={}&n=2 HTTP/1.1" 200 15 1ms "-"',
    "header": START + '/healthz HTTP/1.1" 200 15 1ms "curl/8.5.0 {}"',
}


def made_key(prefix: str, seed: int) -> str:
    """A well-formed key of `prefix` whose 12 + 32 random characters are drawn from `seed`."""
    sample = random.Random(seed)  # noqa: S311 (a fixed sample of test keys, not a secret)
    random_part = "".join(sample.choices(keyformat.ALPHABET, k=RANDOM_PART))
    return prefix + random_part + base62_crc32(prefix + random_part)


def secret_pieces(key: str) -> set[str]:
    """Every run of PIECE characters of the key's secret part (secret and checksum)."""
    secret = key[len(keyformat.identifier_of(key)) :]
    return {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}


def leaked(text: str, keys: list[str], allowed: str = "") -> set[str]:
    """The pieces of the keys' secrets that `text` holds, as written or once or twice decoded,
    other than those `allowed` holds too (a secret may share a piece with what surrounds it)."""
    pieces = set().union(*(secret_pieces(key) for key in keys))
    forms = {text, unquote(text), unquote(unquote(text))}
    return {
        piece for piece in pieces if piece not in allowed and any(piece in form for form in forms)
    }


def escaped(text: str, positions: set[int] | None = None, times: int = 1) -> str:
    """`text` with the characters at `positions` (all when None) percent-escaped `times` times."""
    out = []
    for position, char in enumerate(text):
        if positions is None or position in positions:
            char = f"%{ord(char):02X}"
            for _ in range(times - 1):
                char = char.replace("%", "%25")
        out.append(char)
    return "".join(out)


PREFIXES = st.just("ak_") | st.from_regex(keyformat.PREFIX_PATTERN, fullmatch=True)
KEYS = st.builds(made_key, PREFIXES, st.integers(0, 2**32))
SURROUNDINGS = st.text(WORD, max_size=40)


@st.composite
def written_keys(draw) -> tuple[str, str]:
    """A key and how it is written: as it is, or percent-escaped once or twice, whole or part."""
    key = draw(KEYS)
    times = draw(st.integers(0, 2))
    if not times:
        return key, key
    positions = draw(st.none() | st.sets(st.integers(0, len(key) - 1), min_size=1))
    return key, escaped(key, positions, times)


@st.composite
def access_lines(draw) -> tuple[str, str, str, list[str]]:
    """A line's template, the token it holds (one to three keys glued to word characters),
    the same with each key shown as its identifier, and the keys."""
    written = draw(st.lists(written_keys(), min_size=1, max_size=3))
    token = public = draw(SURROUNDINGS)
    for key, form in written:
        around = draw(SURROUNDINGS)
        token += form + around
        public += keyformat.shown(keyformat.identifier_of(key)) + around
    template = TEMPLATES[draw(st.sampled_from(list(TEMPLATES)))]
    return template, token, public, [key for key, _ in written]


@settings(max_examples=500, deadline=None)
@given(access_lines())
def test_no_eight_characters_of_any_secret_survive_and_identifiers_are_shown(example):
    template, token, public, keys = example
    line = template.format(token)
    shown = keyformat.masked(line)
    assert not leaked(shown, keys, allowed=template.format(public)), (line, shown)
    for key in keys:
        assert keyformat.shown(keyformat.identifier_of(key)) in shown, (line, shown)
    before, after = template.split("{}")
    assert shown.startswith(before) and shown.endswith(after), (line, shown)


ORDINARY = st.one_of(
    st.uuids().map(str),
    st.integers(0, 10**30).map(str),
    st.datetimes().map(lambda moment: moment.isoformat() + "Z"),
    st.text(WORD, min_size=1, max_size=keyformat.MIN_IDENTIFIER_LENGTH + keyformat.TAIL_LENGTH - 1),
    st.sampled_from(["api", "keys", "healthz", "page=2", "a%20b", "name=%C3%A9t%C3%A9", "..."]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ORDINARY, min_size=1, max_size=8), st.sampled_from(list(TEMPLATES.values())))
def test_ordinary_log_content_is_left_as_written(parts, template):
    line = template.format("/".join(parts))
    assert keyformat.masked(line) == line


# --- the cases that wrote a key, or most of its secret, to the access log -------------------

KEY = made_key("ak_", 1)
OTHER = made_key("prod_", 2)
IDENT, OTHER_IDENT = keyformat.identifier_of(KEY), keyformat.identifier_of(OTHER)


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        (f"/healthz?x={KEY}{'0' * 40}", f"/healthz?x={IDENT}...{'0' * 40}"),
        (f"/api/keys/{KEY}_backup", f"/api/keys/{IDENT}..._backup"),
        (f"/api/keys/{KEY}{OTHER}", f"/api/keys/{IDENT}...{OTHER_IDENT}..."),
        (f"/api/keys/{OTHER}{KEY}{KEY}", f"/api/keys/{OTHER_IDENT}...{IDENT}...{IDENT}..."),
        (f"/api/keys/backup_of_{KEY}", f"/api/keys/backup_of_{IDENT}..."),
        (f"/x?k={escaped(KEY)}{'0' * 40}", f"/x?k={IDENT}...{'0' * 40}"),
        (f"/x?k={quote(escaped(KEY, {3, 20, 50}))}_old", f"/x?k={IDENT}..._old"),
    ],
    ids=[
        "followed by 40 digits",
        "followed by _backup",
        "two keys joined",
        "three keys joined",
        "after a word",
        "escaped, followed by 40 digits",
        "partly escaped twice, then _old",
    ],
)
def test_a_key_is_masked_wherever_it_sits_in_a_run_of_word_characters(written, shown):
    line = f'127.0.0.1 "GET {written} HTTP/1.1" 200 "curl {written}"'
    masked = keyformat.masked(line)
    assert not leaked(masked, [KEY, OTHER]), masked
    assert masked == f'127.0.0.1 "GET {shown} HTTP/1.1" 200 "curl {shown}"'


@pytest.mark.parametrize(
    "written",
    [
        KEY[:-1] + "x",  # mistyped: its checksum fails, its secret is nearly all real
        KEY[:-1] + "x" + "0" * 40,
        "0" * 40 + KEY[:-1] + "x" + "_backup",
        KEY + KEY[:-1] + "x",
        "0" * 4000 + KEY,  # too long to look into within a line's budget: masked whole
        "".join(random.Random(3).choices(keyformat.ALPHABET, k=1000)) + KEY,  # noqa: S311
    ],
    ids=[
        "mistyped",
        "mistyped then digits",
        "mistyped inside",
        "after a key",
        "after 4000 zeros",
        "after 1000 random characters",
    ],
)
def test_a_long_run_that_holds_no_valid_key_keeps_no_piece_of_a_secret(written):
    masked = keyformat.masked(f'"GET /api/keys/{written} HTTP/1.1"')
    assert not leaked(masked, [KEY]), masked
    assert masked.startswith('"GET /api/keys/') and masked.endswith('... HTTP/1.1"'), masked


def test_a_sha256_digest_in_hex_is_masked_too():
    digest = keyformat.digest(KEY).hex()
    masked = keyformat.masked(f"digest {digest} stored")
    assert digest[keyformat.MIN_IDENTIFIER_LENGTH + 7 :][:PIECE] not in masked
    assert masked == f"digest {digest[:15]}... stored"


def test_a_key_inside_a_longer_valid_key_keeps_no_piece_of_either_secret():
    """Four characters and a checksum after a key make a longer key that holds the first
    one's secret in its identifier: both secrets are masked."""
    longer = KEY + "abcd" + base62_crc32(KEY + "abcd")
    assert keyformat.is_full_key(longer)
    masked = keyformat.masked(f"/api/keys/{longer}")
    assert not leaked(masked, [KEY, longer]), masked
    assert masked == f"/api/keys/{IDENT}......"


def test_an_escaped_run_holding_a_key_is_shown_decoded_the_rest_escaped_again():
    """No line break or other character written escaped reaches the log unescaped."""
    written = escaped(f"/ab\n{KEY}/", times=2)
    assert (
        keyformat.masked(f"GET /x?k={written} HTTP/1.1")
        == f"GET /x?k=%2Fab%0A{IDENT}...%2F HTTP/1.1"
    )


@pytest.mark.parametrize(
    "written", ["%20" * 50, "caf%C3%A9_" * 20, "ab%2F" * 30], ids=["spaces", "utf-8", "slashes"]
)
def test_a_long_escaped_run_that_holds_no_key_is_left_as_written(written):
    line = f"GET /x?k={written} HTTP/1.1"
    assert keyformat.masked(line) == line


def test_a_key_escaped_more_times_than_a_client_does_is_masked_whole():
    written = escaped(KEY, times=5)
    masked = keyformat.masked(f"GET /x?k={written} HTTP/1.1")
    assert masked == f"GET /x?k={written[:15]}... HTTP/1.1"


# --- the service's loggers ------------------------------------------------------------------


def test_a_logged_traceback_keeps_no_piece_of_a_secret(app, caplog):
    """A server fault's log carries its exception, whose message may hold the path."""
    caplog.set_level(logging.ERROR)
    try:
        raise LookupError(f"no route for /api/keys/{KEY}_backup")
    except LookupError:
        app.logger.exception("Exception on /api/keys/%s [GET]", KEY + OTHER)
    assert not leaked(caplog.text, [KEY, OTHER]), caplog.text
    assert f"no route for /api/keys/{IDENT}..._backup" in caplog.text
    # A key of another prefix than KEY_PREFIX's is masked as a key made elsewhere is shown.
    assert f"Exception on /api/keys/{IDENT}...imported:" in caplog.text
    assert OTHER_IDENT not in caplog.text

"""The key format (docs/design.md, "Keys"): shape, randomness, checksum, SHA-256 digest, the
shown form, and a configurable prefix that never breaks the keys made before."""

from __future__ import annotations

import hashlib
import math
import random
import re
import zlib
from pathlib import Path

import pytest

from app import create_app
from app.domain import keyformat
from app.extensions import db

KEY_CHARACTERS = re.compile(r"[A-Za-z0-9_]+")
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"


def create(client, caller: str, **body) -> dict:
    body = {"name": "k", "kind": "custom", "scopes": ["monitor:read"]} | body
    response = client.post("/api/keys", json=body, auth=(caller, ""))
    assert response.status_code == 201, response.json
    return response.json


def shown_form(client, caller: str, full_key: str) -> str:
    response = client.get(f"/api/keys/{full_key}", auth=(caller, ""))
    assert response.status_code == 200, response.json
    return response.json["key"]


def identifier(client, caller: str, full_key: str) -> str:
    return shown_form(client, caller, full_key).removesuffix("...")


def changed(full_key: str, position: int) -> str:
    """`full_key` with the character at `position` replaced by another key character."""
    old = full_key[position]
    new = ALPHABET[(ALPHABET.index(old) + 1) % len(ALPHABET)]
    return full_key[:position] + new + full_key[position + 1 :]


@pytest.fixture
def app_with(make_app, database_url):
    """Build more apps on the test's database, with configuration of the test's choice."""
    return lambda **config: make_app(SQLALCHEMY_DATABASE_URI=database_url, **config)


# --- shape --------------------------------------------------------------------------------


def test_key_starts_with_the_default_prefix_ak(client, org):
    for full_key in (org.sdk, org.telemetry, create(client, org.sdk)["key"]):
        assert full_key.startswith("ak_")


def test_key_uses_only_url_shell_and_header_safe_characters(client, org):
    keys = [org.sdk, org.telemetry, *(create(client, org.sdk)["key"] for _ in range(20))]
    for full_key in keys:
        assert KEY_CHARACTERS.fullmatch(full_key), full_key


def test_identifier_is_public_prefixed_at_least_8_characters_and_starts_the_key(client, org):
    full_key = create(client, org.sdk)["key"]
    ident = identifier(client, org.sdk, full_key)
    assert len(ident) >= 8
    assert ident.startswith("ak_")
    assert KEY_CHARACTERS.fullmatch(ident)
    assert full_key.startswith(ident)
    assert len(full_key) > len(ident)


def test_identifiers_are_unique(client, org):
    keys = [create(client, org.sdk)["key"] for _ in range(30)]
    response = client.get("/api/keys", query_string={"page_size": 200}, auth=(org.sdk, ""))
    shown = [key["key"] for key in response.json["data"]]
    assert len(shown) == len(set(shown)) == len(keys) + 2


def test_secret_part_carries_at_least_128_bits_of_randomness():
    """The documented lengths: base62 characters drawn with `secrets`, after the identifier."""
    assert len(set(keyformat.ALPHABET)) == 62
    assert keyformat.SECRET_LENGTH * math.log2(len(keyformat.ALPHABET)) >= 128
    identifier_part, full_key = keyformat.new_key("ak_")
    assert len(identifier_part) == len("ak_") + keyformat.IDENTIFIER_RANDOM_LENGTH
    tail = len(full_key) - len(identifier_part)
    assert tail == keyformat.SECRET_LENGTH + keyformat.CHECKSUM_LENGTH


def test_served_keys_have_the_documented_length(client, org):
    full_key = create(client, org.sdk)["key"]
    ident = identifier(client, org.sdk, full_key)
    secret_and_checksum = len(full_key) - len(ident)
    # Whatever part is checksum, what remains of the tail is at least 128 bits of base62.
    assert (secret_and_checksum - keyformat.CHECKSUM_LENGTH) * math.log2(62) >= 128


def test_new_keys_look_random():
    """A thousand keys: all different, and their secrets use the whole alphabet."""
    keys = [keyformat.new_key("ak_")[1] for _ in range(1000)]
    assert len(set(keys)) == len(keys)
    secrets_seen = "".join(key[-keyformat.TAIL_LENGTH : -keyformat.CHECKSUM_LENGTH] for key in keys)
    assert set(secrets_seen) == set(keyformat.ALPHABET)


def test_key_is_made_with_the_secrets_module(monkeypatch):
    """Taking away `secrets` randomness makes every key the same: it is the only source."""
    monkeypatch.setattr(keyformat.secrets, "randbelow", lambda limit: 0)
    assert keyformat.new_key("ak_") == keyformat.new_key("ak_")


# --- checksum -----------------------------------------------------------------------------


def test_a_single_changed_character_is_refused_anywhere_in_the_key(client, org):
    for position in range(len(org.sdk)):
        wrong = changed(org.sdk, position)
        assert not keyformat.is_full_key(wrong), position
        response = client.get("/api/keys", auth=(wrong, ""))
        assert response.status_code == 401, position


def base62_crc32(body: str) -> str:
    """The checksum as the key format defines it, written out digit by digit."""
    number, digits = zlib.crc32(body.encode("ascii")), ""
    for _ in range(keyformat.CHECKSUM_LENGTH):
        number, digit = divmod(number, 62)
        digits = keyformat.ALPHABET[digit] + digits
    return digits


def test_the_checksum_is_six_base62_digits_of_the_crc32_of_the_rest():
    """Keys made by any version stay valid: the checksum's definition does not move.
    Five thousand bodies (a fixed sample) reach CRC-32s with leading zero digits too."""
    sample = random.Random(5)  # noqa: S311 (a fixed sample of test bodies, not a secret)
    bodies = ["ak_" + "0" * 44, "ak_" + "z" * 44, "prod_" + "Zz9_" * 11]
    bodies += ["ak_" + "".join(sample.choices(keyformat.ALPHABET, k=44)) for _ in range(5000)]
    leading_zeros = 0
    for body in bodies:
        checksum = base62_crc32(body)
        leading_zeros += checksum.startswith("0")
        assert keyformat.is_full_key(body + checksum), body
        other = checksum[:-1] + ("1" if checksum[-1] == "0" else "0")
        assert not keyformat.is_full_key(body + other), body
    assert leading_zeros  # the sample reached the smallest checksums


def test_checksum_refuses_a_changed_key_before_the_database_is_asked(client, org, statements):
    for position in (3, len(org.sdk) // 2, len(org.sdk) - 1):
        with statements() as seen:
            response = client.get("/api/keys", auth=(changed(org.sdk, position), ""))
        assert response.status_code == 401
        assert not [s for s in seen if "API_KEYS" in s], seen


def test_a_correct_key_is_looked_up(client, org, statements):
    """The counterpart of the test above: the statement recorder does see lookups."""
    with statements() as seen:
        assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert [s for s in seen if "API_KEYS" in s]


# --- digest and shown form ----------------------------------------------------------------


def _database_bytes(database: str) -> bytes:
    return b"".join(
        Path(database + suffix).read_bytes()
        for suffix in ("", "-wal", "-journal")
        if Path(database + suffix).exists()
    )


def test_only_the_sha256_digest_of_the_full_key_is_stored_with_the_identifier(client, sql, org):
    full_key = create(client, org.sdk)["key"]
    ident = identifier(client, org.sdk, full_key)
    [(stored,)] = sql("SELECT digest FROM api_keys WHERE identifier = :i", i=ident)
    assert bytes(stored) == hashlib.sha256(full_key.encode("ascii")).digest()


def test_the_full_key_and_its_secret_are_nowhere_in_the_database(app, client, database, org):
    full_key = create(client, org.sdk)["key"]
    secret = full_key[len(identifier(client, org.sdk, full_key)) :]
    with app.app_context():
        db.engine.dispose()
    stored = _database_bytes(database)
    for value in (full_key, org.sdk, org.telemetry, secret):
        assert value.encode() not in stored


def test_shown_form_is_the_identifier_followed_by_three_dots(client, org):
    full_key = create(client, org.sdk)["key"]
    shown = shown_form(client, org.sdk, full_key)
    assert shown.endswith("...")
    assert not shown.endswith("....")
    assert full_key.startswith(shown[:-3])
    assert shown != full_key
    listing = client.get("/api/keys", auth=(org.sdk, "")).json["data"]
    assert shown in [key["key"] for key in listing]


# --- configurable prefix ------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["zz_", "acme_corp_live_", "K", "x" * 52])
def test_key_prefix_changes_new_keys_and_old_keys_still_authenticate(app_with, org, prefix):
    client = app_with(KEY_PREFIX=prefix).test_client()
    new_key = create(client, org.sdk)["key"]
    assert new_key.startswith(prefix)
    assert KEY_CHARACTERS.fullmatch(new_key)
    ident = identifier(client, org.sdk, new_key)
    assert ident.startswith(prefix) and len(ident) >= 8
    for old_key in (org.sdk, new_key):
        assert client.get("/api/keys", auth=(old_key, "")).status_code == 200
    assert client.get("/api/keys", auth=(org.telemetry, "")).status_code == 403
    for reference in (ident, f"{ident}...", new_key):
        assert client.get(f"/api/keys/{reference}", auth=(org.sdk, "")).status_code == 200


def test_keys_made_with_another_prefix_authenticate_after_it_changes_back(app_with, org):
    made = create(app_with(KEY_PREFIX="tmp_").test_client(), org.sdk)["key"]
    client = app_with().test_client()
    assert client.get("/api/keys", auth=(made, "")).status_code == 200
    assert create(client, org.sdk)["key"].startswith("ak_")


@pytest.mark.parametrize(
    "prefix",
    ["ak-", "", "a k_", "ключ_", "ak_/", "x" * 53],
    ids=["dash", "empty", "space", "non-ascii", "slash", "too long"],
)
def test_invalid_key_prefix_in_configuration_is_refused_at_start(database_url, prefix):
    with pytest.raises(Exception, match="KEY_PREFIX"):
        create_app(
            {
                "TESTING": True,
                "SQLALCHEMY_DATABASE_URI": database_url,
                "KEY_PREFIX": prefix,
            }
        )


def test_the_shown_form_is_told_from_a_key_and_from_an_identifier():
    identifier, key = keyformat.new_key("ak_")
    assert keyformat.is_shown_form(keyformat.shown(identifier))
    assert keyformat.is_shown_form("ak_...")  # as the docs write a key they do not show
    for value in (key, identifier, "...", "ak_...x", "ak_....", key + "...", "ak-x..."):
        assert not keyformat.is_shown_form(value), value

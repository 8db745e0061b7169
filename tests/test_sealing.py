"""The stored answers of retried writes (app/domain/sealing.py): HKDF-SHA256 as RFC 5869
gives it, a seal (PyNaCl's XChaCha20-Poly1305) that opens only under its key and its
associated data, and no import of the cryptography package, whose bindings cost a worker
8 MiB (bench/README.md, "A worker's memory")."""

from __future__ import annotations

import os
import sys

import pytest

from app.domain import sealing
from tests.processes import run

KEY = bytes(range(32))


def test_hkdf_gives_rfc_5869s_first_test_vector():
    okm = sealing.hkdf_sha256(
        bytes([0x0B] * 22), salt=bytes(range(13)), info=bytes(range(0xF0, 0xFA)), length=42
    )
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


@pytest.mark.parametrize("size", [0, 1, 31, 32, 33, 1000, 300_000])
def test_a_seal_opens_under_its_key_and_associated_data_to_what_was_sealed(size):
    plain = os.urandom(size)
    sealed = sealing.seal(KEY, plain, b"lookup")
    assert plain not in sealed or size < 16  # a shorter text may stand in random bytes by chance
    assert sealing.unseal(KEY, sealed, b"lookup") == plain


def test_two_seals_of_one_text_differ():
    assert sealing.seal(KEY, b"same", b"a") != sealing.seal(KEY, b"same", b"a")


@pytest.mark.parametrize(
    "change",
    [
        lambda sealed, key, data: (sealed, bytes(32), data),  # another key
        lambda sealed, key, data: (sealed, key, b"another lookup"),
        lambda sealed, key, data: (sealed[:-1] + bytes([sealed[-1] ^ 1]), key, data),
        lambda sealed, key, data: (sealed[:20] + bytes([sealed[20] ^ 1]) + sealed[21:], key, data),
        lambda sealed, key, data: (sealed[:10], key, data),  # shorter than a nonce and a tag
    ],
)
def test_a_seal_changed_in_any_way_does_not_open(change):
    sealed = sealing.seal(KEY, b'{"status": 201, "body": "ak_..."}', b"lookup")
    with pytest.raises(sealing.Unopened):
        sealing.unseal(*change(sealed, KEY, b"lookup"))


IDEMPOTENT_CREATE = """
import sys
from app import create_app

app = create_app({"SQLALCHEMY_DATABASE_URI": sys.argv[1]})
runner = app.test_cli_runner()
assert runner.invoke(args=["first-start"]).exit_code == 0
made = runner.invoke(args=["keys", "create", "--org", "default", "--kind", "sdk_integration",
                           "--name", "caller", "--json"])
import json
key = json.loads(made.output)["key"]
client = app.test_client()
body = {"name": "x", "kind": "custom", "scopes": ["monitor:read"]}
for _ in range(2):
    answer = client.post("/api/keys", json=body, auth=(key, ""), headers={"Idempotency-Key": "k"})
    assert answer.status_code == 201, answer.json
assert answer.headers["Idempotent-Replayed"] == "true"
print(sorted(m for m in sys.modules if m.startswith("cryptography")))
"""


def test_an_idempotent_create_and_its_replay_import_no_cryptography_package(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    completed = run([sys.executable, "-c", IDEMPOTENT_CREATE, url], timeout=120)
    assert completed.stdout.strip().splitlines()[-1] == "[]", completed.stdout

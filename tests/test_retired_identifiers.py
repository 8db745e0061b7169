"""An identifier is given once, and a stored idempotent answer belongs to the caller's own
row: no other caller, in any organization, replays it (docs/api.md, "Idempotent writes"
and "Keys brought in and taken out")."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from app import idempotency
from app.domain import keyformat
from app.storage import queries

HEADER = "Idempotency-Key"


def native_form(identifier: str) -> str:
    """A well-formed key of this service's form with `identifier`, as anyone can make
    one: the checksum is no secret."""
    body = identifier + "x" * keyformat.SECRET_LENGTH
    return body + keyformat._checksum(body)


def rotate(client, caller: str, identifier: str, idempotency_key: str):
    return client.post(
        f"/api/keys/{identifier}/rotate", auth=(caller, ""), headers={HEADER: idempotency_key}
    )


def bring(client, caller: str, entry: dict):
    body = {"keys": [{"name": "taken", "kind": "sdk_integration"} | entry]}
    return client.post("/api/keys/import", json=body, auth=(caller, ""))


@pytest.fixture
def rotated(client, org) -> tuple[str, str, str]:
    """Org A's sdk key rotated by itself with an Idempotency-Key, grace 0: its identifier,
    the Idempotency-Key and the successor's full key."""
    identifier = keyformat.identifier_of(org.sdk)
    idempotency_key = str(uuid.uuid4())
    first = rotate(client, org.sdk, identifier, idempotency_key)
    assert first.status_code == 201, first.json
    return identifier, idempotency_key, first.json["key"]


FOREIGN = "any key at all 0123"


def _taken_by(identifier: str) -> list[tuple[dict, str]]:
    """Import entries that would give `identifier` to a key, each with the key it brings."""
    forged = native_form(identifier)
    by_digest = {"key_sha256": hashlib.sha256(FOREIGN.encode()).hexdigest()}
    return [({"key": forged}, forged), (by_digest | {"identifier": identifier}, FOREIGN)]


@pytest.mark.parametrize("how", ["native form", "digest and identifier"])
def test_another_organization_cannot_take_a_rotated_out_identifier(
    client, org, other_org, rotated, how
):
    """The attack: org B imports a key under A's old identifier, then sends A's rotation
    with A's Idempotency-Key. The import is refused, and nothing of A's comes back."""
    identifier, idempotency_key, successor = rotated
    entry, brought = _taken_by(identifier)[how == "digest and identifier"]
    imported = bring(client, other_org.sdk, entry)
    assert imported.status_code == 409, imported.json
    assert imported.json["code"] == "key_exists"
    assert list(imported.json["errors"]) == ["keys[0]"]
    replay = rotate(client, brought, identifier, idempotency_key)
    assert replay.status_code == 401  # nothing came in
    assert successor not in replay.get_data(as_text=True)


def test_the_same_organization_cannot_take_a_deleted_keys_identifier(client, org, make_key):
    doomed = make_key("custom", ["monitor:read"])
    identifier = keyformat.identifier_of(doomed)
    assert client.delete(f"/api/keys/{identifier}", auth=(org.sdk, "")).status_code == 204
    for entry, _ in _taken_by(identifier):
        imported = bring(client, org.sdk, entry)
        assert imported.status_code == 409, imported.json
        assert imported.json["code"] == "key_exists"


def test_every_way_out_keeps_the_identifier_and_digest(app, client, org, make_key, runner, sql):
    deleted, rotated_out, leaked, by_operator = (make_key("custom") for _ in range(4))
    client.delete(f"/api/keys/{deleted}", auth=(org.sdk, ""))
    client.post(f"/api/keys/{rotated_out}/rotate", auth=(org.sdk, ""))
    assert client.post("/api/revoke", json={"keys": [leaked]}).status_code == 202
    done = runner.invoke(args=["keys", "delete", org.name, keyformat.identifier_of(by_operator)])
    assert done.exit_code == 0, done.output
    rows = sql("SELECT identifier, digest, organization_id FROM retired_keys")
    kept = {identifier: bytes(digest) for identifier, digest, _ in rows}
    with app.app_context():
        org_id = queries.organization_id(org.name)
    organizations = {organization_id for _, _, organization_id in rows}
    for key in (deleted, rotated_out, leaked, by_operator):
        assert kept[keyformat.identifier_of(key)] == keyformat.digest(key)
    assert organizations == {org_id}


@pytest.mark.parametrize("caller", ["other organization", "same organization", "successor"])
def test_no_other_caller_replays_a_stored_answer(client, org, other_org, make_key, rotated, caller):
    """Without any import: another organization's key, another key of A's organization
    and A's successor itself send A's rotation with A's Idempotency-Key: each is a request
    of its own (the old key is gone: 404), never A's answer."""
    identifier, idempotency_key, successor = rotated
    key = {
        "other organization": other_org.sdk,
        "same organization": make_key("sdk_integration"),
        "successor": successor,
    }[caller]
    replay = rotate(client, key, identifier, idempotency_key)
    assert replay.status_code == 404, replay.json
    assert idempotency.REPLAYED not in replay.headers
    assert successor not in replay.get_data(as_text=True)


def test_a_stored_answer_is_bound_to_the_callers_row_not_its_identifier(app, org, other_org):
    """Were an identifier ever given twice, its new holder (another row, another
    organization) would still derive other secrets, and find no stored answer."""
    idempotency_key = str(uuid.uuid4())
    with app.test_request_context():
        caller = queries.holder(keyformat.digest(org.sdk)).caller
        other = queries.holder(keyformat.digest(other_org.sdk)).caller
        own = idempotency._secrets(caller, idempotency_key)
        impostors = [
            caller._replace(organization_id=other.organization_id, id=other.id),
            caller._replace(id=other.id),
            caller._replace(organization_id=other.organization_id),
        ]
        for impostor in impostors:
            secrets = idempotency._secrets(impostor, idempotency_key)
            assert secrets.lookup != own.lookup
            assert secrets.sealing != own.sealing


def test_a_new_key_never_gets_a_retired_identifier(app, org, make_key, monkeypatch, client):
    """The identifiers drawn are random; one drawn again (here forced) is drawn anew."""
    doomed = make_key("custom")
    retired = keyformat.identifier_of(doomed)
    assert client.delete(f"/api/keys/{retired}", auth=(org.sdk, "")).status_code == 204
    drawn = iter([retired, retired])
    fresh = keyformat.new_key

    def draws(prefix: str) -> tuple[str, str]:
        identifier = next(drawn, None)
        if identifier is None:
            return fresh(prefix)
        return identifier, native_form(identifier)

    monkeypatch.setattr(keyformat, "new_key", draws)
    body = {"name": "new", "kind": "custom", "scopes": ["monitor:read"]}
    made = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert made.status_code == 201, made.json
    assert keyformat.identifier_of(made.json["key"]) != retired


def test_a_deleted_keys_digest_is_not_brought_back(client, org, other_org):
    """A foreign key imported, then deleted, comes in again under no identifier, in no
    organization: its digest is retired with it."""
    foreign = "sk_live_" + "q" * 24
    first = bring(client, org.sdk, {"key": foreign})
    assert first.status_code == 201, first.json
    assert client.delete(f"/api/keys/{foreign}", auth=(org.sdk, "")).status_code == 204
    for caller in (org.sdk, other_org.sdk):
        again = bring(client, caller, {"key": foreign})
        assert again.status_code == 409, again.json
        assert again.json["errors"] == {"keys[0]": ["This key is already known to the service."]}

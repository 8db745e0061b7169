"""Keys brought in and taken out (docs/design.md, "Import and export"): POST /api/keys/import,
`flask keys import` and `flask keys export`."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets

import pytest

from app.domain import credentials, keyformat
from app.storage.database import upgrade

STRIPE_LIKE = "sk_live_" + "a1B2c3D4e5F6g7H8i9J0" * 3
HEX_TOKEN = secrets.token_hex(32)  # 64 hexadecimal digits: this service's shape, no prefix


def sha256(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def entry(key: str | None = None, **fields) -> dict:
    body = {"name": "brought in", "kind": "custom", "scopes": ["monitor:read"]}
    if key is not None:
        body["key"] = key
    return {name: value for name, value in (body | fields).items() if value is not None}


def bring(client, caller: str, *entries: dict, **kwargs):
    return client.post(
        "/api/keys/import", json={"keys": list(entries)}, auth=(caller, ""), **kwargs
    )


def authenticates(client, key: str) -> bool:
    bearer = client.get("/api/keys?page_size=1", headers={"Authorization": f"Bearer {key}"})
    return bearer.status_code in (200, 403)


def events(client, org) -> list[dict]:
    return client.get("/api/audit?page_size=200", auth=(org.sdk, "")).json["data"]


def test_keys_of_any_format_come_in_and_authenticate_as_native_ones(client, org):
    digest_only = "ghp_" + secrets.token_urlsafe(27)
    response = bring(
        client,
        org.sdk,
        entry(STRIPE_LIKE, kind="sdk_integration", scopes=None, last_used="2026-01-02T03:04:05Z"),
        entry(HEX_TOKEN, created="2025-05-06T07:08:09Z"),
        entry(key_sha256=sha256(digest_only), name="by digest"),
    )
    assert response.status_code == 201, response.json
    imported = response.json["keys"]
    assert response.json["imported"] == 3
    # Shown by their digests, never by a part of a secret: after the prefix a key has.
    assert [key["key"] for key in imported] == [
        "sk_live_" + sha256(STRIPE_LIKE)[:4] + "...",
        "imported:" + sha256(HEX_TOKEN)[:8],
        "imported:" + sha256(digest_only)[:8],
    ]
    assert imported[0]["kind"] == "sdk_integration"
    assert imported[0]["last_used"] == "2026-01-02T03:04:05.000000Z"
    assert imported[1]["created"] == "2025-05-06T07:08:09.000000Z"
    assert imported[1]["updated"] == imported[1]["created"]
    for key in (STRIPE_LIKE, HEX_TOKEN, digest_only):
        assert authenticates(client, key), key
    # Basic too, and the key reads itself by its full value and its shown form.
    own = client.get(f"/api/keys/{STRIPE_LIKE}", auth=(STRIPE_LIKE, ""))
    assert own.status_code == 200, own.json
    stripe_shown = "sk_live_" + sha256(STRIPE_LIKE)[:4] + "..."
    assert own.json["key"] == stripe_shown
    assert client.get(f"/api/keys/{stripe_shown}", auth=(org.sdk, "")).json["name"] == "brought in"
    shown = "imported:" + sha256(digest_only)[:8]
    assert client.get(f"/api/keys/{shown}", auth=(org.sdk, "")).json["name"] == "by digest"
    # One key.imported event per key, naming no key.
    made = [event for event in events(client, org) if event["action"] == "key.imported"]
    assert len(made) == 3
    text = json.dumps(made)
    assert STRIPE_LIKE not in text and HEX_TOKEN not in text and digest_only not in text
    # Forward auth and introspection, the other doors.
    checked = client.get("/api/forward-auth", headers={"Authorization": f"Bearer {HEX_TOKEN}"})
    assert checked.status_code == 204
    asked = client.post("/api/introspect", json={"token": STRIPE_LIKE}, auth=(org.sdk, ""))
    assert asked.json["active"] is True
    assert asked.json["client_id"].startswith(keyformat.IMPORTED_PREFIX)


def test_an_identifier_is_random_and_the_shown_form_names_a_key_until_two_share_it(client, org):
    # Two keys whose digests begin alike (about 300 tries): shown alike.
    seen: dict[str, str] = {}
    while True:
        other = "sk_live_" + secrets.token_hex(16)
        if sha256(other)[:4] in seen:
            first = seen[sha256(other)[:4]]
            break
        seen[sha256(other)[:4]] = other
    assert bring(client, org.sdk, entry(first), entry(other)).status_code == 201
    ambiguous = client.get(f"/api/keys/sk_live_{sha256(other)[:4]}...", auth=(org.sdk, ""))
    assert ambiguous.status_code == 409
    assert ambiguous.json["code"] == "ambiguous_key"
    identifiers = [
        client.post("/api/introspect", json={"token": key}, auth=(org.sdk, "")).json["client_id"]
        for key in (first, other)
    ]
    assert identifiers[0] != identifiers[1]
    for identifier, key in zip(identifiers, (first, other), strict=True):
        assert key[8:] not in identifier
        named = client.get(f"/api/keys/{identifier}", auth=(org.sdk, ""))
        assert named.status_code == 200


def test_a_digest_in_base64_is_taken(client, org):
    key = "legacy-" + secrets.token_urlsafe(24)
    raw = hashlib.sha256(key.encode()).digest()
    for written in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()[:-1]):
        assert bring(client, org.sdk, entry(key_sha256=written)).status_code in (201, 409)
    assert authenticates(client, key)


def test_entries_refused_are_named_with_their_fields_and_nothing_comes_in(client, org):
    before = client.get("/api/keys", auth=(org.sdk, "")).json["total_count"]
    response = bring(
        client,
        org.sdk,
        entry("k" * 20),
        entry("short"),
        entry("x" * 20, kind="nonsense"),
        entry(key_sha256="not a digest"),
        entry(name="no key"),
        entry("y" * 20, created="2999-01-01T00:00:00Z"),
    )
    assert response.status_code == 422, response.json
    assert set(response.json["errors"]) == {
        "keys[1].key",
        "keys[2].kind",
        "keys[3].key_sha256",
        "keys[4].key",
        "keys[5].created",
    }
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == before
    twice = bring(client, org.sdk, entry("k" * 20), entry(key_sha256=sha256("k" * 20)))
    assert twice.status_code == 422
    assert twice.json["errors"] == {"keys[1].key": ["The same key as keys[0]."]}
    mistyped = org.sdk[:-1] + ("A" if org.sdk[-1] != "A" else "B")
    native_form = bring(client, org.sdk, entry(mistyped))
    assert native_form.status_code == 422
    assert list(native_form.json["errors"]) == ["keys[0].key"]
    assert bring(client, org.sdk, *[entry(f"{n:020}") for n in range(1001)]).status_code == 422


def test_a_key_known_anywhere_is_refused_without_saying_where(client, org, other_org):
    response = bring(client, org.sdk, entry("fresh-key-0123456789"), entry(other_org.telemetry))
    assert response.status_code == 409, response.json
    assert response.json["code"] == "key_exists"
    assert list(response.json["errors"]) == ["keys[1]"]
    assert "globex" not in json.dumps(response.json)
    assert not authenticates(client, "fresh-key-0123456789")


def test_only_sdk_integration_keys_import(client, org, make_key):
    custom = make_key("custom", ["monitor:read"])
    assert bring(client, custom, entry("c" * 20)).status_code == 403
    assert bring(client, org.telemetry, entry("c" * 20)).status_code == 403


def test_the_callers_ceiling_and_the_organizations_policy_bind_each_key(client, org, runner):
    limited = client.post(
        "/api/keys",
        json={
            "name": "limited",
            "kind": "sdk_integration",
            "rate_limit": {"requests": 10, "seconds": 60},
        },
        auth=(org.sdk, ""),
    ).json["key"]
    faster = entry("r" * 20, rate_limit={"requests": 100, "seconds": 60})
    refused = bring(client, limited, entry("q" * 20), faster)
    assert refused.status_code == 403, refused.json
    assert refused.json["code"] == "exceeds_caller"
    assert list(refused.json["errors"]) == ["keys[1].rate_limit"]
    taken = bring(client, limited, entry("q" * 20))
    assert taken.json["keys"][0]["rate_limit"] == {"requests": 10, "seconds": 60}
    count = client.get("/api/keys", auth=(org.sdk, "")).json["total_count"]
    assert (
        runner.invoke(args=["org", "policy", "acme", "--max-keys", str(count + 1)]).exit_code == 0
    )
    full = bring(client, org.sdk, entry("m" * 20), entry("n" * 20))
    assert full.status_code == 409
    assert full.json["code"] == "key_limit_reached"
    assert not authenticates(client, "m" * 20)


def test_what_is_neither_native_nor_plausible_is_refused_unread():
    prefix = keyformat.DEFAULT_PREFIX
    for value in ("short", "x" * 257, "tab\there-and-more-characters", "caf\u00e9" * 5):
        assert credentials.presented(f"Bearer {value}", prefix) is None, value
    _, full_key = keyformat.new_key(prefix)
    mistyped = full_key[:-1] + ("A" if full_key[-1] != "A" else "B")
    assert credentials.presented(f"Bearer {mistyped}", prefix) is None
    assert credentials.presented(f"Bearer {HEX_TOKEN}", prefix) is not None
    assert credentials.presented(f"Bearer {STRIPE_LIKE}", prefix) is not None
    assert credentials.presented(f"Bearer {full_key}", prefix) is not None


def test_a_leaked_imported_key_is_revoked(client, org):
    assert bring(client, org.sdk, entry(STRIPE_LIKE)).status_code == 201
    assert client.post("/api/revoke", json={"keys": [STRIPE_LIKE]}).status_code == 202
    assert not authenticates(client, STRIPE_LIKE)


def test_an_export_imported_into_an_empty_service_authenticates_the_same_keys(
    app, client, org, runner, make_app, new_database
):
    holder = {"external_id": "customer-9", "quota": {"requests": 50, "period": "day"}}
    assert client.post("/api/identities", json=holder, auth=(org.sdk, "")).status_code == 201
    made = client.post(
        "/api/keys",
        json={
            "name": "limited",
            "kind": "custom",
            "scopes": ["monitor:read", "site:write"],
            "rate_limit": {"requests": 5, "seconds": 60},
            "allowed_ips": ["127.0.0.0/8"],
            "metadata": {"team": "ops"},
            "quota": {"requests": 100, "period": "day"},
            "expires_at": "2999-01-01T00:00:00Z",
            "identity": "customer-9",
        },
        auth=(org.sdk, ""),
    ).json
    digest_only = "dg-" + secrets.token_urlsafe(24)
    brought = bring(
        client, org.sdk, entry(STRIPE_LIKE), entry(key_sha256=sha256(digest_only), enabled=False)
    )
    assert brought.status_code == 201
    exported = runner.invoke(args=["keys", "export", "--organization", "acme"])
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in exported.output.splitlines()]
    assert len(lines) == 5
    text = exported.output
    for full_key in (org.sdk, org.telemetry, made["key"], STRIPE_LIKE, digest_only):
        assert full_key not in text
    # Who made a key is this service's lineage: an import is made by its importer (here
    # the operator); what is left of a quota, and which quota binds the most, are counted
    # anew. An identity comes in by its external id, with an id of the new service's.
    lineage = ("quota_remaining", "quota_bound_by", "created_by", "replaced_by", "identity")
    before = {
        line["key_sha256"]: {k: v for k, v in line.items() if k not in lineage} for line in lines
    }

    fresh = make_app(SQLALCHEMY_DATABASE_URI=new_database())
    upgrade(fresh)
    path = app.instance_path + "/export.jsonl"
    with open(path, "w") as file:
        file.write(text)
    imported = fresh.test_cli_runner().invoke(args=["keys", "import", path])
    assert imported.exit_code == 0, imported.output
    assert 'Imported 5 keys into organization "acme".' in imported.output
    again = fresh.test_cli_runner().invoke(args=["keys", "export"])
    after = {
        line["key_sha256"]: {k: v for k, v in line.items() if k not in lineage}
        for line in map(json.loads, again.output.splitlines())
    }
    assert after.keys() == before.keys()
    for digest, line in before.items():
        changed = {
            name: (value, after[digest][name])
            for name, value in line.items()
            if after[digest][name] != value
        }
        assert changed == {}, line["key"]
    held = [line["identity"] for line in map(json.loads, again.output.splitlines())]
    assert [identity["external_id"] for identity in held if identity] == ["customer-9"]
    moved = fresh.test_client()
    for full_key in (org.sdk, made["key"], STRIPE_LIKE):
        own = moved.get("/api/keys/" + full_key, auth=(full_key, ""))
        assert own.status_code == 200, (full_key, own.json)
    assert moved.get("/api/keys", auth=(org.telemetry, "")).status_code == 403
    disabled = moved.get("/api/keys", auth=(digest_only, ""))
    assert disabled.json["code"] == "disabled_key"
    # Importing the same file again: every key is known.
    twice = fresh.test_cli_runner().invoke(args=["keys", "import", path])
    assert twice.exit_code == 1
    assert "line 1" in twice.output


def test_the_command_names_each_refused_line(runner, org, tmp_path):
    path = tmp_path / "keys.jsonl"
    path.write_text(
        json.dumps(entry("z" * 20)) + "\n\nnot json\n" + json.dumps(entry("w" * 20, kind="x"))
    )
    result = runner.invoke(args=["keys", "import", str(path), "--organization", "acme"])
    assert result.exit_code == 1
    assert "line 3: not a JSON object" in result.output
    assert "line 4: kind:" in result.output
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(entry("z" * 20)) + "\n")
    assert runner.invoke(args=["keys", "import", str(good)]).exit_code == 1  # no organization
    done = runner.invoke(args=["keys", "import", str(good), "--organization", "acme"])
    assert done.exit_code == 0, done.output
    assert runner.invoke(args=["keys", "export", "--organization", "nobody"]).exit_code == 1


@pytest.mark.parametrize("idempotency_key", ["import-1"])
def test_an_import_retried_with_an_idempotency_key_is_done_once(client, org, idempotency_key):
    headers = {"Idempotency-Key": idempotency_key}
    first = bring(client, org.sdk, entry("i" * 20), headers=headers)
    again = bring(client, org.sdk, entry("i" * 20), headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json == first.json
    assert again.headers["Idempotent-Replayed"] == "true"

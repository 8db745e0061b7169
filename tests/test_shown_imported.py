"""An imported key is shown one way everywhere (the list, a read, the audit log, webhooks'
events, the operator's commands): by its digest, after its prefix when it has one
(`sk_live_` and 4 hexadecimal digits), else `imported:` and 8; never a part of a secret."""

from __future__ import annotations

import hashlib
import json
import secrets

import pytest

from app.domain import keyformat
from app.webhooks import sender
from tests import webhooks
from tests.webhooks import make_endpoint, payloads

receiver = webhooks.receiver  # fixture

PLAIN = secrets.token_urlsafe(24)  # 32 characters, no prefix: the home-grown shape
PREFIXED = "sk_live_" + secrets.token_hex(16)


def sha256(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


SHOWN = {
    PLAIN: "imported:" + sha256(PLAIN)[:8],
    PREFIXED: "sk_live_" + sha256(PREFIXED)[:4] + "...",
}


@pytest.fixture
def imported(client, org) -> dict[str, str]:
    entries = [
        {"key": key, "name": f"made elsewhere {n}", "kind": "sdk_integration"}
        for n, key in enumerate(SHOWN)
    ]
    answer = client.post("/api/keys/import", json={"keys": entries}, auth=(org.sdk, ""))
    assert answer.status_code == 201, answer.json
    return {key: made["key"] for key, made in zip(SHOWN, answer.json["keys"], strict=True)}


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("sk_live_" + "a" * 24, "sk_live_"),
        ("ghp_" + "B" * 36, "ghp_"),
        ("xoxb-" + "1" * 20, "xoxb-"),
        ("github_pat_" + "C" * 20, "github_pat_"),
        ("Sk_live_" + "a" * 24, ""),  # a capital: no prefix of the kind
        ("abcdefghi_" + "a" * 24, ""),  # a word of 9 letters
        ("sk_live_" + "a" * 10, ""),  # too little after it to be a prefix
        ("a_" + "b" * 30, ""),  # one letter
        ("ab_cd_ef_" + "g" * 20, "ab_cd_"),  # two words at most
    ],
)
def test_what_counts_as_a_prefix(key, shown):
    assert keyformat.foreign_prefix(key) == shown
    expected = shown + sha256(key)[:4] + "..." if shown else "imported:" + sha256(key)[:8]
    assert keyformat.shown_foreign(key) == expected


def test_the_list_and_a_read_show_it_by_its_digest(client, org, imported):
    assert imported == SHOWN
    listed = {k["name"]: k["key"] for k in client.get("/api/keys", auth=(org.sdk, "")).json["data"]}
    assert set(SHOWN.values()) <= set(listed.values())
    for key, shown in SHOWN.items():
        assert client.get(f"/api/keys/{shown}", auth=(org.sdk, "")).json["key"] == shown
        assert client.get("/api/keys/" + key, auth=(key, "")).json["key"] == shown


def test_the_audit_log_names_it_as_the_list_does(client, org, imported):
    for key, shown in SHOWN.items():
        made = client.post("/api/keys", json={"name": "child", "kind": "telemetry"}, auth=(key, ""))
        assert made.status_code == 201, made.json
        renamed = client.put(f"/api/keys/{shown}", json={"name": "renamed"}, auth=(org.sdk, ""))
        assert renamed.status_code == 200, renamed.json
        assert made.json["created_by"] == shown  # its maker, named as the list names it
        listed = client.get("/api/keys?page_size=100", auth=(org.sdk, "")).json["data"]
        child = keyformat.shown(keyformat.identifier_of(made.json["key"]))
        assert {k["created_by"] for k in listed if k["key"] == child} == {shown}
        events = client.get("/api/audit?page_size=2", auth=(org.sdk, "")).json["data"]
        assert events[0]["action"] == "key.updated" and events[0]["target"] == shown
        assert events[1]["action"] == "key.created" and events[1]["actor"] == shown
        identifier = client.post("/api/introspect", json={"token": key}, auth=(org.sdk, "")).json[
            "client_id"
        ]
        for named in (shown, f"{identifier}..."):
            found = client.get(f"/api/audit?key={named}", auth=(org.sdk, "")).json["data"]
            assert {event["action"] for event in found} >= {"key.imported", "key.updated"}
    log = json.dumps(client.get("/api/audit?page_size=100", auth=(org.sdk, "")).json)
    assert keyformat.IMPORTED_PREFIX not in log
    for key in SHOWN:
        assert key not in log and key.removeprefix("sk_live_")[:8] not in log


def test_the_operators_commands_show_it_so(runner, org, imported):
    listed = runner.invoke(args=["keys", "list", org.name])
    assert listed.exit_code == 0, listed.output
    exported = runner.invoke(args=["keys", "export", "--organization", org.name])
    assert exported.exit_code == 0, exported.output
    for key, shown in SHOWN.items():
        assert shown in listed.output and shown in exported.output
        assert key.removeprefix("sk_live_")[:8] not in listed.output + exported.output


def test_an_exports_older_shown_form_keeps_no_part_of_a_secret(client, org):
    """An export of an older version showed 8 characters of a key without a prefix: brought
    in by its digest, the key is shown by its digest, keeping only a prefix shown."""
    entries = [
        {"key_sha256": sha256(PLAIN), "key": PLAIN[:8] + "...", "name": "a", "kind": "custom"},
        {"key_sha256": sha256(PREFIXED), "key": "sk_live_...", "name": "b", "kind": "custom"},
    ]
    for entry in entries:
        entry["scopes"] = ["monitor:read"]
    answer = client.post("/api/keys/import", json={"keys": entries}, auth=(org.sdk, ""))
    assert answer.status_code == 201, answer.json
    assert [made["key"] for made in answer.json["keys"]] == list(SHOWN.values())


@pytest.mark.parametrize("app_config", [{"WEBHOOK_ALLOW_PRIVATE": True}])
def test_webhooks_events_name_it_so(app, client, org, imported, receiver):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=("key.created", "key.updated"))
    for key, shown in SHOWN.items():
        made = client.post("/api/keys", json={"name": "child", "kind": "telemetry"}, auth=(key, ""))
        assert made.status_code == 201, made.json
        renamed = client.put(f"/api/keys/{shown}", json={"name": "x"}, auth=(org.sdk, ""))
        assert renamed.status_code == 200, renamed.json
    assert sender.of(app).tick() == 4
    got = payloads(endpoint["secret"], receiver.wait_for(4))
    shown_forms = list(SHOWN.values())
    assert [p["data"]["actor"] for p in got if p["type"] == "key.created"] == shown_forms
    assert [p["data"]["key"]["key"] for p in got if p["type"] == "key.updated"] == shown_forms
    assert [p["data"]["key"]["created_by"] for p in got if p["type"] == "key.created"] == (
        shown_forms
    )
    # An imported key's identifier (`imported_` and 12 random characters, derived from
    # nothing in the key) is its public name, in `identifier` alone; no other field names it.
    for payload in got:
        identifier = payload["data"]["key"].pop("identifier")
        assert identifier.startswith(keyformat.IMPORTED_PREFIX) or payload["type"] == "key.created"
    sent = json.dumps(got)
    assert keyformat.IMPORTED_PREFIX not in sent
    for key in SHOWN:
        assert key.removeprefix("sk_live_")[:8] not in sent

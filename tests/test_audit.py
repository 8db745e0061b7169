"""The audit log (docs/design.md, "The audit log"): every change recorded with its change, read by
keys that hold every scope, exported by the operator; no secret in any event."""

from __future__ import annotations

import hashlib
import json

import pytest

from app.domain.keyformat import identifier_of


def events(client, key: str, query: str = "") -> dict:
    response = client.get(f"/api/audit{query}", auth=(key, ""))
    assert response.status_code == 200, response.json
    assert response.headers["Cache-Control"] == "no-store"
    return response.json


def shown(full_key: str) -> str:
    return identifier_of(full_key) + "..."


def test_the_first_keys_are_recorded_as_the_operators(client, org):
    body = events(client, org.sdk)
    assert body["total_count"] == 2
    assert {(e["action"], e["actor"], e["client_address"]) for e in body["data"]} == {
        ("key.created", "operator", None)
    }


def test_every_change_is_recorded_newest_first(client, org):
    made = client.post(
        "/api/keys",
        json={"name": "ci", "kind": "custom", "scopes": ["site:read"]},
        auth=(org.sdk, ""),
    ).json
    url = f"/api/keys/{identifier_of(made['key'])}"
    client.put(
        url, json={"name": "ci 2", "scopes": ["site:read", "site:write"]}, auth=(org.sdk, "")
    )
    rotated = client.post(f"{url}/rotate", json={"grace_seconds": 60}, auth=(org.sdk, "")).json
    client.delete(url, auth=(org.sdk, ""))
    data = events(client, org.sdk)["data"]
    assert [e["action"] for e in data[:5]] == [
        "key.deleted",
        "key.rotated",
        "key.created",
        "key.updated",
        "key.created",
    ]
    deleted, rotation, replacement, update, creation = data[:5]
    actor = shown(org.sdk)
    assert {e["actor"] for e in data[:5]} == {actor}
    assert {e["client_address"] for e in data[:5]} == {"127.0.0.1"}
    assert creation["details"] == {
        "name": "ci",
        "kind": "custom",
        "scopes": ["site:read"],
        "expires_at": None,
        "enabled": True,
        "allowed_ips": [],
        "rate_limit": None,
        "metadata": {},
        "quota": None,
    }
    assert update["details"] == {
        "name": ["ci", "ci 2"],
        "scopes": [["site:read"], ["site:read", "site:write"]],
    }
    assert rotation["details"] == {"replacement": shown(rotated["key"]), "grace_seconds": 60}
    assert rotation["target"] == deleted["target"] == shown(made["key"])
    assert replacement["target"] == shown(rotated["key"])
    assert deleted["details"] == {}
    assert data[0]["id"] > data[1]["id"]


def test_refused_and_unchanged_requests_record_nothing(client, org, make_key):
    weak = make_key(scopes=["monitor:read"])
    before = events(client, org.sdk)["total_count"]
    target = identifier_of(org.sdk)
    client.put(f"/api/keys/{target}", json={"name": "x"}, auth=(weak, ""))  # 403
    client.post("/api/keys", json={"name": "", "kind": "custom"}, auth=(org.sdk, ""))  # 422
    client.put(f"/api/keys/{target}", json={"name": "SDK Integration"}, auth=(org.sdk, ""))
    client.delete("/api/keys/ak_unknownkey0", auth=(org.sdk, ""))  # 404
    assert events(client, org.sdk)["total_count"] == before


def test_filters_and_paging(client, org, make_key):
    key = make_key(name="one")
    client.put(f"/api/keys/{identifier_of(key)}", json={"name": "two"}, auth=(org.sdk, ""))
    by_key = events(client, org.sdk, f"?key={identifier_of(key)}")
    assert [e["action"] for e in by_key["data"]] == ["key.updated", "key.created"]
    assert events(client, org.sdk, f"?key={shown(key)}")["total_count"] == 2
    updated = events(client, org.sdk, "?action=key.updated")
    assert (updated["total_count"], updated["data"][0]["target"]) == (1, shown(key))
    assert events(client, org.sdk, "?since=2999-01-01T00:00:00Z")["data"] == []
    page = events(client, org.sdk, "?page=2&page_size=1")
    assert (page["page"], page["page_size"], len(page["data"])) == (2, 1, 1)


@pytest.mark.parametrize(
    "query",
    ["?action=key.exploded", "?since=yesterday", "?key=x", "?page=0", "?page_size=201"],
)
def test_bad_filters_are_422(client, org, query):
    response = client.get(f"/api/audit{query}", auth=(org.sdk, ""))
    assert response.status_code == 422, response.json


def test_only_a_key_with_every_scope_reads_the_log(client, org, make_key):
    from app.domain.scopes import SCOPES

    nearly = make_key(scopes=list(SCOPES[:-1]))
    every = make_key(scopes=list(SCOPES))
    assert client.get("/api/audit", auth=(nearly, "")).json["code"] == "forbidden"
    assert client.get("/api/audit", auth=(org.telemetry, "")).status_code == 403
    assert client.get("/api/audit", auth=(every, "")).status_code == 200
    assert client.get("/api/audit").status_code == 401


def test_events_are_of_the_callers_organization_only(client, org, other_org):
    mine = {e["target"] for e in events(client, org.sdk)["data"]}
    theirs = {e["target"] for e in events(client, other_org.sdk)["data"]}
    assert mine == {shown(org.sdk), shown(org.telemetry)}
    assert not mine & theirs


def secrets_of(full_key: str) -> list[str]:
    digest = hashlib.sha256(full_key.encode()).digest()
    return [full_key, full_key[len(identifier_of(full_key)) :], digest.hex()]


def test_no_event_and_no_export_line_holds_a_key_or_digest(client, org, runner):
    made = client.post(
        "/api/keys", json={"name": "n", "kind": "telemetry"}, auth=(org.sdk, "")
    ).json["key"]
    rotated = client.post(f"/api/keys/{made}/rotate", auth=(org.sdk, "")).json["key"]
    logged = json.dumps(events(client, org.sdk))
    exported = runner.invoke(args=["audit", "export", "--org", "acme"])
    assert exported.exit_code == 0, exported.output
    for key in (org.sdk, org.telemetry, made, rotated):
        for secret in secrets_of(key):
            assert secret not in logged
            assert secret not in exported.output


def test_export_is_json_lines_oldest_first(client, org, runner):
    client.post("/api/keys", json={"name": "n", "kind": "telemetry"}, auth=(org.sdk, ""))
    result = runner.invoke(args=["audit", "export", "--org", "acme"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [e["id"] for e in lines] == sorted(e["id"] for e in lines)
    assert len(lines) == 3
    assert lines[-1]["actor"] == shown(org.sdk)
    later = runner.invoke(
        args=["audit", "export", "--org", "acme", "--since", "2999-01-01T00:00:00Z"]
    )
    assert (later.exit_code, later.output) == (0, "")


@pytest.mark.parametrize(
    "args",
    [["--org", "nobody"], ["--org", "acme", "--since", "yesterday"]],
)
def test_export_refusals_are_one_line_and_exit_1(org, runner, args):
    result = runner.invoke(args=["audit", "export", *args])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1


def test_cli_minted_keys_are_recorded_as_the_operators(client, org, runner):
    result = runner.invoke(
        args=["keys", "create", "--org", "acme", "--kind", "telemetry", "--name", "r"]
    )
    assert result.exit_code == 0, result.output
    newest = events(client, org.sdk)["data"][0]
    assert (newest["action"], newest["actor"], newest["client_address"]) == (
        "key.created",
        "operator",
        None,
    )


def test_a_page_far_past_the_end_is_empty(client, org):
    body = events(client, org.sdk, "?page=999999999999999999&page_size=200")
    assert (body["data"], body["total_count"]) == ([], 2)


def names(event: dict) -> tuple:
    return (event["actor_name"], event["actor_kind"], event["target_name"], event["target_kind"])


def test_each_event_names_its_keys_as_they_were_when_it_was_recorded(client, org):
    """Issue 36: after a rename or a delete, the log still says which key it was."""
    made = client.post(
        "/api/keys",
        json={"name": "ci", "kind": "custom", "scopes": ["site:read"]},
        auth=(org.sdk, ""),
    ).json
    url = f"/api/keys/{identifier_of(made['key'])}"
    client.put(url, json={"name": "ci 2"}, auth=(org.sdk, ""))
    rotated = client.post(f"{url}/rotate", json={"grace_seconds": 60}, auth=(org.sdk, "")).json
    # The key renames the key in use, which then acts under its new name.
    client.put(
        f"/api/keys/{identifier_of(org.sdk)}", json={"name": "Renamed SDK"}, auth=(org.sdk, "")
    )
    client.delete(url, auth=(org.sdk, ""))
    data = events(client, org.sdk)["data"]
    deleted, renamed_self, rotation, replacement, update, creation = data[:6]
    sdk = ("SDK Integration", "sdk_integration")
    assert names(creation) == (*sdk, "ci", "custom")
    assert names(update) == (*sdk, "ci 2", "custom")
    assert names(replacement) == (*sdk, "ci 2", "custom")
    assert replacement["target"] == shown(rotated["key"])
    assert names(rotation) == (*sdk, "ci 2", "custom")
    assert names(renamed_self) == (*sdk, "Renamed SDK", "sdk_integration")
    assert deleted["action"] == "key.deleted"
    assert names(deleted) == ("Renamed SDK", "sdk_integration", "ci 2", "custom")
    # the first keys, made by the operator: no acting key
    first = data[-1]
    assert names(first) == (None, None, "Telemetry", "telemetry")


def test_a_revoked_leaked_key_is_named_in_its_event(client, org, make_key):
    leaked = make_key(name="pasted in a ticket", scopes=["site:read"])
    answer = client.post("/api/revoke", json={"keys": [leaked]})
    assert answer.status_code == 202
    revoked = events(client, org.sdk, "?action=key.revoked")["data"][0]
    assert revoked["actor"] == "leak-report"
    assert names(revoked) == (None, None, "pasted in a ticket", "custom")


def test_the_export_names_keys_too(client, org, runner):
    result = runner.invoke(args=["audit", "export", "--org", "acme"])
    first = json.loads(result.output.splitlines()[0])
    assert names(first) == (None, None, "Telemetry", "telemetry")

"""Managing keys spends no quota, making them does (docs/api.md): reads (lists, a key, its
usage, the audit log, identities, the organization), updates, quota grants and deletes
count toward the caller's rate limits and the abuse limits, never its quota; a create, a
rotation or an import spends one, at REST and through MCP. A holder whose quota is used up
still sees and revokes its keys."""

from __future__ import annotations

from tests.test_mcp import call
from tests.test_policy import create

DAY = {"requests": 2, "period": "day"}
SDK = {"kind": "sdk_integration", "scopes": None}


def made(client, caller: str, **body) -> str:
    answer = create(client, caller, **body)
    assert answer.status_code == 201, answer.json
    return answer.json["key"]


def shown(key: str) -> str:
    return key[:-38] + "..."


def left(client, org, key: str) -> int:
    return client.get(f"/api/keys/{shown(key)}", auth=(org.sdk, "")).json["quota_remaining"]


def manages(client, key: str, target: str) -> list[int]:
    """Every way of managing keys without making one, by `key`, on its own `target`."""
    auth = (key, "")
    return [
        client.get("/api/keys", auth=auth).status_code,
        client.get(f"/api/keys/{shown(target)}", auth=auth).status_code,
        client.get(f"/api/keys/{shown(target)}/usage", auth=auth).status_code,
        client.put(f"/api/keys/{shown(target)}", json={"name": "n"}, auth=auth).status_code,
        client.get("/api/audit", auth=auth).status_code,
        client.get("/api/organization", auth=auth).status_code,
        client.get("/api/identities", auth=auth).status_code,
        client.get("/api/webhooks", auth=auth).status_code,
        client.get("/", auth=auth).status_code,
    ]


def test_managing_keys_spends_no_quota_and_making_them_does(client, org):
    holder = made(client, org.sdk, **SDK, quota=DAY)
    target = made(client, holder, name="made", scopes=["monitor:read"])  # one use: 1 left
    assert left(client, org, holder) == 1
    for _ in range(3):
        assert manages(client, holder, target) == [200] * 9
    assert left(client, org, holder) == 1
    rotated = client.post(f"/api/keys/{shown(target)}/rotate", auth=(holder, ""))
    assert rotated.status_code == 201, rotated.json  # the last use
    assert left(client, org, holder) == 0
    spent = create(client, holder, name="one more")
    assert (spent.status_code, spent.json["code"]) == (429, "quota_exceeded")
    imported = client.post(
        "/api/keys/import",
        json={"keys": [{"key": "k" * 32, "name": "i", "kind": "custom", "scopes": []}]},
        auth=(holder, ""),
    )
    assert (imported.status_code, imported.json["code"]) == (429, "quota_exceeded")
    # Used up, it still sees and revokes its keys.
    successor = rotated.json["key"]
    assert manages(client, holder, successor) == [200] * 9
    granted = client.post(f"/api/keys/{shown(successor)}/quota", json={"add": 1}, auth=(holder, ""))
    assert granted.status_code == 200, granted.json  # a grant is no use of the granter
    assert client.delete(f"/api/keys/{shown(successor)}", auth=(holder, "")).status_code == 204
    assert client.delete(f"/api/keys/{shown(holder)}", auth=(holder, "")).status_code == 204


def test_an_import_spends_one_use(client, org):
    holder = made(client, org.sdk, **SDK, quota=DAY)
    entry = {"name": "i", "kind": "custom", "scopes": ["monitor:read"]}
    imported = client.post(
        "/api/keys/import", json={"keys": [entry | {"key": "k" * 32}]}, auth=(holder, "")
    )
    assert imported.status_code == 201, imported.json
    assert left(client, org, holder) == 1


def test_managing_keys_still_counts_toward_the_rate_limit(client, org):
    holder = made(client, org.sdk, **SDK, rate_limit={"requests": 3, "seconds": 600})
    answers = [client.get("/api/keys", auth=(holder, "")).status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]


def test_a_holder_whose_identitys_quota_is_used_up_still_sees_and_revokes_its_keys(client, org):
    made_identity = client.post(
        "/api/identities",
        json={"external_id": "partner", "quota": {"requests": 1, "period": "day"}},
        auth=(org.sdk, ""),
    )
    assert made_identity.status_code == 201
    partner = made(client, org.sdk, scopes=["monitor:read", "monitor:write"], identity="partner")
    own = made(client, partner, name="own")  # the identity's one use
    assert client.get("/api/forward-auth", auth=(partner, "")).status_code == 429
    refused_create = create(client, partner, name="no more")
    assert (refused_create.status_code, refused_create.json["limit"]) == (429, "identity")
    listed = client.get("/api/keys", auth=(partner, ""))
    assert (listed.status_code, listed.json["total_count"]) == (200, 2)
    assert client.get(f"/api/keys/{shown(own)}", auth=(partner, "")).status_code == 200
    assert client.delete(f"/api/keys/{shown(own)}", auth=(partner, "")).status_code == 204


def test_mcp_tools_that_make_keys_spend_quota_and_the_others_do_not(client, org):
    holder = made(client, org.sdk, **SDK, quota=DAY)
    for _ in range(3):
        assert "structuredContent" in call(client, holder, "list_keys", {})
        assert "structuredContent" in call(client, holder, "list_identities", {})
    assert left(client, org, holder) == 2
    first = call(client, holder, "create_key", {"name": "a", "kind": "telemetry"})
    target = first["structuredContent"]["key"]
    assert "structuredContent" in call(client, holder, "rotate_key", {"key": shown(target)})
    assert left(client, org, holder) == 0
    spent = client.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "create_key", "arguments": {"name": "b", "kind": "telemetry"}},
        },
        headers={
            "Authorization": f"Bearer {holder}",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert (spent.status_code, spent.json["code"]) == (429, "quota_exceeded")
    assert "structuredContent" in call(client, holder, "list_keys", {})


# --- what binds a key ---------------------------------------------------------------------


def bound(client, org, key: str) -> tuple:
    read = client.get(f"/api/keys/{shown(key)}", auth=(org.sdk, "")).json
    return read["quota_remaining"], read["quota_bound_by"]


def test_a_key_says_which_quota_binds_it_and_what_is_left_of_it(client, org):
    free = made(client, org.sdk)
    assert bound(client, org, free) == (None, None)
    own = made(client, org.sdk, quota={"requests": 5, "period": "day"})
    assert bound(client, org, own) == (5, "key")
    maker = made(client, org.sdk, **SDK, quota=DAY)
    child = made(client, maker, quota={"requests": 2, "period": "day"})  # the maker: 1 left
    assert bound(client, org, child) == (1, "maker")
    identity = client.post(
        "/api/identities",
        json={"external_id": "c", "quota": {"requests": 3, "period": "day"}},
        auth=(org.sdk, ""),
    )
    assert identity.status_code == 201
    held = made(client, org.sdk, identity="c", quota={"requests": 10, "period": "day"})
    assert client.get("/api/forward-auth", auth=(held, "")).status_code == 204
    assert bound(client, org, held) == (2, "identity")
    tight = made(client, org.sdk, identity="c", quota={"requests": 1, "period": "day"})
    assert bound(client, org, tight) == (1, "key")
    unlimited = made(client, org.sdk, identity="c")
    assert bound(client, org, unlimited) == (2, "identity")
    listed = client.get("/api/keys?identity=c", auth=(org.sdk, "")).json["data"]
    assert [(k["quota_remaining"], k["quota_bound_by"]) for k in listed] == [
        (2, "identity"),
        (1, "key"),
        (2, "identity"),
    ]


# --- an identity's quota granted ----------------------------------------------------------


def identity_with(client, org, **body) -> dict:
    answer = client.post("/api/identities", json={"external_id": "c"} | body, auth=(org.sdk, ""))
    assert answer.status_code == 201, answer.json
    return answer.json


def test_an_identitys_quota_is_granted_and_audited(client, org):
    identity = identity_with(client, org, quota={"requests": 2, "period": "lifetime"})
    key = made(client, org.sdk, identity="c")
    for _ in range(2):
        assert client.get("/api/forward-auth", auth=(key, "")).status_code == 204
    spent = client.get("/api/forward-auth", auth=(key, ""))
    assert (spent.status_code, spent.json["limit"]) == (429, "identity")
    assert "POST /api/identities/<id>/quota" in spent.json["detail"]
    path = f"/api/identities/{identity['id']}/quota"
    added = client.post(path, json={"add": 3}, auth=(org.sdk, ""))
    assert (added.status_code, added.json["quota_remaining"]) == (200, 3)
    assert added.json["id"] == identity["id"]
    assert bound(client, org, key) == (3, "identity")
    exact = client.post(
        "/api/identities/external_id:c/quota", json={"set_remaining": 1}, auth=(org.sdk, "")
    )
    assert exact.json["quota_remaining"] == 1
    assert client.get("/api/forward-auth", auth=(key, "")).status_code == 204
    assert client.get("/api/forward-auth", auth=(key, "")).status_code == 429
    log = client.get("/api/audit?action=identity.quota", auth=(org.sdk, "")).json["data"]
    assert [(e["target"], e["details"]) for e in log] == [
        (identity["id"], {"set_remaining": 1, "remaining": [3, 1]}),
        (identity["id"], {"add": 3, "remaining": [0, 3]}),
    ]


def test_a_grant_to_an_identity_is_refused_as_its_other_changes_are(client, org, other_org):
    identity = identity_with(client, org, quota={"requests": 2, "period": "day"})
    path = f"/api/identities/{identity['id']}/quota"
    member = made(client, org.sdk, kind="sdk_integration", scopes=None, identity="c")
    own = client.post(path, json={"add": 5}, auth=(member, ""))
    assert (own.status_code, own.json["code"]) == (403, "forbidden")
    custom = made(client, org.sdk)
    assert client.post(path, json={"add": 5}, auth=(custom, "")).status_code == 403
    elsewhere = client.post(path, json={"add": 5}, auth=(other_org.sdk, ""))
    assert elsewhere.status_code == 404
    for body in ({}, {"add": 1, "set_remaining": 1}, {"add": 0}, {"add": "1"}):
        assert client.post(path, json=body, auth=(org.sdk, "")).status_code == 422
    assert (
        client.get(f"/api/identities/{identity['id']}", auth=(org.sdk, "")).json["quota_remaining"]
        == 2
    )


def test_no_quota_names_the_grant_of_the_quota_that_binds(client, org):
    plain = identity_with(client, org)
    refused = client.post(
        f"/api/identities/{plain['id']}/quota", json={"add": 1}, auth=(org.sdk, "")
    )
    assert (refused.status_code, refused.json["code"]) == (409, "no_quota")
    assert "PUT /api/identities/<id>" in refused.json["detail"]
    limited = client.post(
        "/api/identities",
        json={"external_id": "d", "quota": {"requests": 2, "period": "day"}},
        auth=(org.sdk, ""),
    ).json
    key = made(client, org.sdk, identity="d")
    answer = client.post(f"/api/keys/{shown(key)}/quota", json={"add": 1}, auth=(org.sdk, ""))
    assert (answer.status_code, answer.json["code"]) == (409, "no_quota")
    assert f"POST /api/identities/{limited['id']}/quota" in answer.json["detail"]


def test_an_identitys_grant_with_an_idempotency_key_is_made_once(client, org):
    identity = identity_with(client, org, quota={"requests": 2, "period": "day"})
    path = f"/api/identities/{identity['id']}/quota"
    headers = {"Idempotency-Key": "grant-1"}
    first = client.post(path, json={"add": 3}, auth=(org.sdk, ""), headers=headers)
    again = client.post(path, json={"add": 3}, auth=(org.sdk, ""), headers=headers)
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json == first.json
    read = client.get(f"/api/identities/{identity['id']}", auth=(org.sdk, "")).json
    assert read["quota_remaining"] == 5

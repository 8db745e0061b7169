"""Identities (docs/design.md, "Identities"): whoever holds keys in an organization's own terms,
managed by its sdk_integration keys at /api/identities and audited; every key of an
identity spends the identity's limits as one count, all or nothing; a key of an identity
cannot leave it nor make a key outside it; the doors name the holder."""

from __future__ import annotations

import pytest

from app.access import limits
from tests.test_policy import create, events, rotate, update

SDK = {"kind": "sdk_integration", "scopes": None}


def new_identity(client, org, **body) -> dict:
    answer = client.post(
        "/api/identities", json={"external_id": "customer-42"} | body, auth=(org.sdk, "")
    )
    assert answer.status_code == 201, answer.json
    return answer.json


def key_of(client, caller: str, identity: str | None = None, **body) -> dict:
    if identity is not None:
        body["identity"] = identity
    answer = create(client, caller, **(SDK | body))
    assert answer.status_code == 201, answer.json
    return answer.json


def use(client, key: str):
    """A use of `key`: a check at forward auth (managing keys spends no quota)."""
    return client.get("/api/forward-auth", auth=(key, ""))


# --- the API ---------------------------------------------------------------------------------


def test_an_identity_is_created_read_listed_updated_and_deleted(client, org):
    made = new_identity(
        client,
        org,
        name="Customer 42",
        metadata={"plan": "pro"},
        rate_limit={"requests": 10, "seconds": 60},
        quota={"requests": 5, "period": "day"},
    )
    assert made["id"].startswith("id_")
    assert {
        k: made[k] for k in ("external_id", "name", "metadata", "quota_remaining", "key_count")
    } == {
        "external_id": "customer-42",
        "name": "Customer 42",
        "metadata": {"plan": "pro"},
        "quota_remaining": 5,
        "key_count": 0,
    }
    assert made["rate_limit"] == {"requests": 10, "seconds": 60}
    by_id = client.get(f"/api/identities/{made['id']}", auth=(org.sdk, ""))
    by_external = client.get("/api/identities/external_id:customer-42", auth=(org.sdk, ""))
    assert by_id.json == by_external.json == made
    listed = client.get("/api/identities?external_id=customer-42", auth=(org.sdk, "")).json
    assert (listed["total_count"], listed["data"]) == (1, [made])
    assert client.get("/api/identities?external_id=nobody", auth=(org.sdk, "")).json["data"] == []
    changed = client.put(
        f"/api/identities/{made['id']}", json={"name": "C42", "quota": None}, auth=(org.sdk, "")
    )
    assert changed.status_code == 200, changed.json
    assert (changed.json["name"], changed.json["quota"], changed.json["quota_remaining"]) == (
        "C42",
        None,
        None,
    )
    assert client.delete(f"/api/identities/{made['id']}", auth=(org.sdk, "")).status_code == 204
    assert client.get(f"/api/identities/{made['id']}", auth=(org.sdk, "")).status_code == 404
    actions = [e["action"] for e in client.get("/api/audit", auth=(org.sdk, "")).json["data"]]
    assert actions[:3] == ["identity.deleted", "identity.updated", "identity.created"]
    assert events(client, org.sdk, "identity.updated")[0]["target"] == made["id"]


def test_an_external_id_is_unique_in_its_organization_only(client, org, other_org):
    new_identity(client, org)
    again = client.post("/api/identities", json={"external_id": "customer-42"}, auth=(org.sdk, ""))
    assert again.status_code == 409, again.json
    assert again.json["code"] == "identity_exists"
    elsewhere = client.post(
        "/api/identities", json={"external_id": "customer-42"}, auth=(other_org.sdk, "")
    )
    assert elsewhere.status_code == 201


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "external_id"),
        ({"external_id": ""}, "external_id"),
        ({"external_id": " padded "}, "external_id"),
        ({"external_id": "é"}, "external_id"),
        ({"external_id": "x" * 256}, "external_id"),
        ({"external_id": "a", "quota": {"requests": 0, "period": "day"}}, "quota"),
        ({"external_id": "a", "rate_limit": {"requests": 1}}, "rate_limit"),
        ({"external_id": "a", "metadata": {"bad name": "x"}}, "metadata"),
        ({"external_id": "a", "surprise": 1}, "surprise"),
    ],
)
def test_a_bad_identity_is_refused_naming_the_field(client, org, body, field):
    answer = client.post("/api/identities", json=body, auth=(org.sdk, ""))
    assert answer.status_code == 422, answer.json
    assert field in answer.json["errors"]


def test_only_sdk_integration_keys_manage_identities(client, org, make_key):
    custom = make_key("custom", scopes=("monitor:read",))
    assert client.get("/api/identities", auth=(custom, "")).status_code == 403
    assert client.get("/api/identities", auth=(org.telemetry, "")).status_code == 403


def test_an_identity_of_another_organization_is_not_found(client, org, other_org):
    made = new_identity(client, org)
    assert client.get(f"/api/identities/{made['id']}", auth=(other_org.sdk, "")).status_code == 404
    refused = create(client, other_org.sdk, identity=made["id"])
    assert refused.status_code == 422, refused.json
    assert "identity" in refused.json["errors"]


def test_an_identity_with_keys_is_not_deleted(client, org):
    made = new_identity(client, org)
    key_of(client, org.sdk, made["id"])
    key_of(client, org.sdk, "customer-42")  # named by its external id
    refused = client.delete(f"/api/identities/{made['id']}", auth=(org.sdk, ""))
    assert refused.status_code == 409, refused.json
    assert refused.json["code"] == "identity_in_use"
    assert "2 keys" in refused.json["detail"]


def test_a_key_shows_its_identity_and_the_list_filters_by_it(client, org):
    made = new_identity(client, org)
    key = key_of(client, org.sdk, made["id"])
    assert key["identity"] == {"id": made["id"], "external_id": "customer-42"}
    key_of(client, org.sdk)
    listed = client.get(f"/api/keys?identity={made['id']}", auth=(org.sdk, "")).json
    assert [k["key"] for k in listed["data"]] == [key["key"][:15] + "..."]
    by_external = client.get("/api/keys?identity=customer-42", auth=(org.sdk, "")).json
    assert by_external["data"] == listed["data"]
    assert client.get("/api/keys?identity=nobody", auth=(org.sdk, "")).json["total_count"] == 0
    read = client.get(f"/api/identities/{made['id']}", auth=(org.sdk, "")).json
    assert read["key_count"] == 1


# --- one count across its keys --------------------------------------------------------------


def test_an_identitys_quota_binds_all_of_its_keys_as_one_count(client, org):
    made = new_identity(client, org, quota={"requests": 5, "period": "day"})
    keys = [key_of(client, org.sdk, made["id"])["key"] for _ in range(3)]
    answers = [use(client, keys[i % 3]) for i in range(30)]
    assert sum(a.status_code == 204 for a in answers) == 5
    refusal = next(a for a in answers if a.status_code == 429)
    assert (refusal.json["code"], refusal.json["limit"]) == ("quota_exceeded", "identity")
    assert refusal.headers["Quota-Remaining"] == "0"
    assert int(refusal.headers["Retry-After"]) >= 1
    read = client.get(f"/api/identities/{made['id']}", auth=(org.sdk, "")).json
    assert read["quota_remaining"] == 0


def test_an_identitys_rate_limit_binds_its_keys_and_names_both_policies(client, org):
    made = new_identity(client, org, rate_limit={"requests": 4, "seconds": 60})
    own = {"requests": 3, "seconds": 60}
    first = key_of(client, org.sdk, made["id"], rate_limit=own)["key"]
    second = key_of(client, org.sdk, made["id"])["key"]
    answer = use(client, first)
    assert answer.headers["RateLimit-Policy"] == '"key";q=3;w=60, "identity";q=4;w=60'
    assert [use(client, second).status_code for _ in range(4)] == [204, 204, 204, 429]
    refused = use(client, first)
    assert (refused.json["code"], refused.json["limit"]) == ("rate_limited", "identity")


def test_a_use_refused_by_the_identity_spends_nothing_of_the_keys_own(client, org):
    made = new_identity(client, org, quota={"requests": 1, "period": "day"})
    key = key_of(client, org.sdk, made["id"], quota={"requests": 10, "period": "day"})["key"]
    assert use(client, key).status_code == 204
    assert use(client, key).status_code == 429
    read = client.get(f"/api/keys/{key[:15]}", auth=(org.sdk, "")).json
    assert (read["quota_remaining"], read["quota_bound_by"]) == (0, "identity")
    more = {"set_remaining": 100}
    client.post(f"/api/identities/{made['id']}/quota", json=more, auth=(org.sdk, ""))
    read = client.get(f"/api/keys/{key[:15]}", auth=(org.sdk, "")).json
    # All or nothing: the refused use spent none of the key's own.
    assert (read["quota_remaining"], read["quota_bound_by"]) == (9, "key")


def test_an_identitys_changed_limits_bind_its_keys_at_once(client, org):
    made = new_identity(client, org)
    key = key_of(client, org.sdk, made["id"])["key"]
    assert use(client, key).status_code == 204
    client.put(
        f"/api/identities/{made['id']}",
        json={"quota": {"requests": 2, "period": "week"}},
        auth=(org.sdk, ""),
    )
    assert [use(client, key).status_code for _ in range(3)] == [204, 204, 429]


# --- a key of an identity stays in it -------------------------------------------------------


def test_a_key_of_an_identity_makes_keys_of_the_same_identity_only(client, org):
    mine = new_identity(client, org, quota={"requests": 20, "period": "day"})
    other = new_identity(client, org, external_id="customer-43")
    holder = key_of(client, org.sdk, mine["id"])["key"]
    child = key_of(client, holder)  # names none: the holder's own
    assert child["identity"]["id"] == mine["id"]
    assert key_of(client, holder, mine["id"])["identity"]["id"] == mine["id"]
    for naming in (other["id"], None):
        refused = create(client, holder, **(SDK | {"identity": naming}))
        assert refused.status_code == 403, refused.json
        assert refused.json["code"] == "exceeds_caller"
        assert "identity" in refused.json["errors"]
    rotated = rotate(client, holder, child["key"][:15]).json
    assert rotated["identity"]["id"] == mine["id"]


def test_a_key_of_an_identity_cannot_leave_it(client, org):
    mine = new_identity(client, org)
    holder = key_of(client, org.sdk, mine["id"])["key"]
    for naming in (None, "customer-42-not"):
        refused = update(client, holder, holder[:15], identity=naming)
        assert refused.status_code in (403, 422), refused.json
    left = update(client, holder, holder[:15], identity=None)
    assert left.status_code == 403
    assert left.json["code"] == "exceeds_caller"


def test_a_key_made_by_a_limited_key_cannot_choose_an_identity(client, org):
    mine = new_identity(client, org)
    limited = key_of(client, org.sdk, quota={"requests": 50, "period": "day"})["key"]
    child = key_of(client, limited)["key"]
    refused = create(client, child, **(SDK | {"identity": mine["id"]}))
    assert refused.status_code == 403, refused.json
    assert "identity" in refused.json["errors"]


def test_a_caller_bound_by_nothing_moves_a_key_between_identities(client, org):
    first = new_identity(client, org)
    second = new_identity(client, org, external_id="customer-43")
    key = key_of(client, org.sdk, first["id"])["key"]
    moved = update(client, org.sdk, key[:15], identity="customer-43")
    assert moved.status_code == 200, moved.json
    assert moved.json["identity"] == {"id": second["id"], "external_id": "customer-43"}
    assert events(client, org.sdk, "key.updated")[0]["details"]["identity"] == [
        "customer-42",
        "customer-43",
    ]
    out = update(client, org.sdk, key[:15], identity=None)
    assert out.json["identity"] is None


# --- the doors name the holder ----------------------------------------------------------------


def test_forward_auth_and_introspection_name_the_identity(client, org):
    made = new_identity(client, org, external_id="team 42%", quota={"requests": 9, "period": "day"})
    key = key_of(client, org.sdk, made["id"], quota={"requests": 3, "period": "day"})["key"]
    forwarded = client.get("/api/forward-auth", auth=(key, ""))
    assert forwarded.status_code == 204
    assert forwarded.headers["X-Api-Key-Identity"] == "team 42%25"
    assert forwarded.headers["Quota-Remaining"] == "2"  # the smaller: the key's
    answer = client.post("/api/introspect", data={"token": key}, auth=(org.sdk, "")).json
    assert answer["sub"] == "team 42%"
    assert answer["identity"] == {"id": made["id"], "external_id": "team 42%"}
    assert answer["quota_remaining"] == 1
    plain = key_of(client, org.sdk)["key"]
    assert "X-Api-Key-Identity" not in client.get("/api/forward-auth", auth=(plain, "")).headers


def test_an_identitys_usage_sums_its_keys(client, org):
    from app.usage import counter as usage_counter

    made = new_identity(client, org)
    keys = [key_of(client, org.sdk, made["id"])["key"] for _ in range(2)]
    for key in [*keys, keys[0]]:
        assert use(client, key).status_code == 204
    usage_counter.flush(client.application)
    usage = client.get(f"/api/identities/{made['id']}/usage", auth=(org.sdk, "")).json
    assert usage["identity"] == made["id"]
    assert usage["total"] == {"allowed": 3, "refused": {}}


# --- a used-up quota is in the audit log when it happens ----------------------------------------


def test_the_audit_log_records_a_quota_used_up_at_the_time_without_a_webhook(client, org):
    made = new_identity(client, org, quota={"requests": 2, "period": "day"})
    key = key_of(client, org.sdk, made["id"], quota={"requests": 1, "period": "day"})["key"]
    other = key_of(client, org.sdk, made["id"])["key"]
    assert use(client, key).status_code == 204  # the key's own quota used up
    [key_event] = events(client, org.sdk, "key.quota_exhausted")
    assert key_event["target"] == key[:15] + "..."
    assert key_event["actor"] == key[:15] + "..."
    assert use(client, other).status_code == 204  # the identity's used up
    [identity_event] = events(client, org.sdk, "identity.quota_exhausted")
    assert (identity_event["target"], identity_event["actor"]) == (made["id"], other[:15] + "...")
    for _ in range(3):
        use(client, other)
    assert len(events(client, org.sdk, "identity.quota_exhausted")) == 1  # once a period


def test_an_identity_counts_where_the_limits_count(app, client, org):
    made = new_identity(client, org, quota={"requests": 3, "period": "lifetime"})
    key = key_of(client, org.sdk, made["id"])["key"]
    use(client, key)
    with app.app_context():
        counts = app.extensions["limits"]
        name = counts.quota_key(f"identity:{made['id']}", "lifetime")
        assert counts.count(name) == 1
    assert limits.EXHAUSTED in app.extensions


def test_keys_imported_by_a_key_of_an_identity_join_it_and_share_its_quota(client, org):
    made = new_identity(client, org, quota={"requests": 3, "period": "day"})
    holder = key_of(client, org.sdk, made["id"])["key"]
    foreign = "sk_live_" + "x" * 24
    body = {
        "keys": [{"key": foreign, "name": "brought", "kind": "custom", "scopes": ["monitor:read"]}]
    }
    imported = client.post("/api/keys/import", json=body, auth=(holder, ""))  # 1 use
    assert imported.status_code == 201, imported.json
    assert imported.json["keys"][0]["identity"]["id"] == made["id"]
    results = [client.get("/api/forward-auth", auth=(foreign, "")).status_code for _ in range(3)]
    assert results == [204, 204, 429]


def test_a_key_of_an_identity_cannot_change_its_identity(client, org):
    """It reads its own identity and changes none (tests/test_boundary.py): its limits
    least of all."""
    made = new_identity(client, org, quota={"requests": 3, "period": "day"})
    member = key_of(client, org.sdk, made["id"])["key"]
    lifted = client.put(f"/api/identities/{made['id']}", json={"quota": None}, auth=(member, ""))
    assert (lifted.status_code, lifted.json["code"]) == (403, "forbidden")
    renamed = client.put(f"/api/identities/{made['id']}", json={"name": "n"}, auth=(member, ""))
    assert (renamed.status_code, renamed.json["code"]) == (403, "forbidden")
    read = client.get(f"/api/identities/{made['id']}", auth=(member, "")).json
    assert (read["name"], read["quota"]) == ("customer-42", {"requests": 3, "period": "day"})


@pytest.mark.parametrize("sent", ["a\u0000b", "a\tb", " padded"])
def test_an_identity_reference_that_no_identity_can_have_is_refused_not_asked(client, org, sent):
    refused = create(client, org.sdk, identity=sent)
    assert refused.status_code == 422, refused.json
    assert "identity" in refused.json["errors"]
    path = "/api/identities/external_id:" + sent.replace("\u0000", "%00").replace(
        "\t", "%09"
    ).replace(" ", "%20")
    assert client.get(path, auth=(org.sdk, "")).status_code == 404
    listed = client.get("/api/keys?identity=a%00b", auth=(org.sdk, ""))
    assert listed.status_code == 422, listed.json

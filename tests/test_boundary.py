"""An identity is a boundary (docs/api.md): a key that belongs to an identity sees and
manages only the keys of its identity. Every other key of its organization (another
identity's, or one of no identity) is answered as another organization's key is, at every
way in: lists and their totals, reads, changes, rotations, deletes, quota grants, usage,
introspection, the audit log and the MCP tools. A key of no identity manages the
organization's keys as before. Tried from the other side of each fence."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from tests.test_mcp import call, refused
from tests.test_policy import create

MONITORS = ["monitor:read", "monitor:write"]
DAY_5 = {"requests": 5, "period": "day"}


class Fenced(NamedTuple):
    """An organization with two identities: a partner's and a customer's, each with keys,
    and the founder's key of no identity; and another organization's key."""

    partner: str  # a custom key of identity partner-acme
    partner_sdk: str  # an sdk_integration key of partner-acme
    customer: str  # a custom key of identity customer-b
    founder: str  # a custom key of no identity
    elsewhere: str  # a key of another organization
    partner_id: str
    customer_id: str


def made(client, caller: str, **body) -> str:
    answer = create(client, caller, **body)
    assert answer.status_code == 201, answer.json
    return answer.json["key"]


@pytest.fixture
def fenced(client, org, other_org) -> Fenced:
    ids = []
    for external_id in ("partner-acme", "customer-b"):
        answer = client.post(
            "/api/identities", json={"external_id": external_id}, auth=(org.sdk, "")
        )
        assert answer.status_code == 201, answer.json
        ids.append(answer.json["id"])
    partner = made(client, org.sdk, scopes=MONITORS, identity="partner-acme")
    partner_sdk = made(
        client, org.sdk, kind="sdk_integration", scopes=None, identity="partner-acme"
    )
    customer = made(client, org.sdk, scopes=MONITORS, identity="customer-b", quota=DAY_5)
    founder = made(client, org.sdk, scopes=MONITORS, quota=DAY_5)
    elsewhere = made(client, other_org.sdk, scopes=MONITORS, quota=DAY_5)
    return Fenced(partner, partner_sdk, customer, founder, elsewhere, *ids)


def shown(key: str) -> str:
    return key[:-38] + "..."


def answers(client, caller: str, method: str, path: str, **body):
    return client.open(path, method=method, auth=(caller, ""), json=body or None)


# Every way a key manages a key, named by `{key}`.
WAYS = (
    ("GET", "/api/keys/{key}", {}),
    ("PUT", "/api/keys/{key}", {"name": "taken over", "enabled": False}),
    ("POST", "/api/keys/{key}/rotate", {"grace_seconds": 0}),
    ("POST", "/api/keys/{key}/quota", {"add": 5}),
    ("GET", "/api/keys/{key}/usage", {}),
    ("DELETE", "/api/keys/{key}", {}),
)


@pytest.mark.parametrize("caller", ["partner", "partner_sdk"])
@pytest.mark.parametrize("target", ["customer", "founder"])
@pytest.mark.parametrize("how", ["shown", "full"])
@pytest.mark.parametrize(("method", "path", "body"), WAYS, ids=[f"{m} {p}" for m, p, _ in WAYS])
def test_a_key_beyond_the_identity_is_404_as_another_organizations(
    client, org, fenced, caller, target, how, method, path, body
):
    key = getattr(fenced, target)
    named = shown(key) if how == "shown" else key
    elsewhere = shown(fenced.elsewhere) if how == "shown" else fenced.elsewhere
    as_elsewhere = answers(
        client, getattr(fenced, caller), method, path.format(key=elsewhere), **body
    )
    answer = answers(client, getattr(fenced, caller), method, path.format(key=named), **body)
    assert (answer.status_code, answer.json) == (404, as_elsewhere.json)
    assert as_elsewhere.status_code == 404
    # Untouched: the key works as before, and reads as it did.
    assert client.get("/api/forward-auth", auth=(key, "")).status_code == 204
    read = client.get(f"/api/keys/{shown(key)}", auth=(org.sdk, "")).json
    assert (read["name"], read["enabled"], read["replaced_by"]) == ("p", True, None)


def test_a_key_of_an_identity_manages_its_identitys_keys(client, fenced):
    own = made(client, fenced.partner, scopes=["monitor:read"], quota=DAY_5)
    for method, path, body in WAYS:
        answer = answers(client, fenced.partner, method, path.format(key=shown(own)), **body)
        assert answer.status_code in (200, 201, 204), (method, path, answer.json)
        if method == "POST" and path.endswith("/rotate"):
            own = answer.json["key"]


def test_a_key_of_no_identity_manages_every_key_of_its_organization(client, org, fenced):
    for key in (fenced.partner, fenced.customer, fenced.founder):
        assert client.get(f"/api/keys/{shown(key)}", auth=(org.sdk, "")).status_code == 200
        assert client.get(f"/api/keys/{shown(key)}/usage", auth=(org.sdk, "")).status_code == 200
    listed = client.get("/api/keys", auth=(org.sdk, "")).json
    assert listed["total_count"] == 6
    founder_sees = client.get("/api/keys", auth=(fenced.founder, "")).json
    assert founder_sees["total_count"] == 6


@pytest.mark.parametrize(
    "query", ["", "?page_size=1", "?kind=custom", "?state=active", "?enabled=true"]
)
def test_a_list_holds_and_counts_only_the_identitys_keys(client, fenced, query):
    listed = client.get(f"/api/keys{query}", auth=(fenced.partner, "")).json
    every = client.get("/api/keys?page_size=100", auth=(fenced.partner, "")).json["data"]
    assert {key["key"] for key in every} == {shown(fenced.partner), shown(fenced.partner_sdk)}
    assert all(key["identity"]["external_id"] == "partner-acme" for key in listed["data"])
    expected = 1 if query == "?kind=custom" else 2
    assert listed["total_count"] == expected


def test_a_list_filtered_by_another_identity_is_empty(client, fenced):
    for named in ("customer-b", fenced.customer_id, "nobody"):
        listed = client.get(f"/api/keys?identity={named}", auth=(fenced.partner, "")).json
        assert (listed["total_count"], listed["data"]) == (0, [])
    own = client.get("/api/keys?identity=partner-acme", auth=(fenced.partner, "")).json
    assert own["total_count"] == 2


def test_introspection_of_a_key_beyond_the_identity_is_inactive(client, org, fenced):
    for token in (fenced.customer, fenced.founder, fenced.elsewhere, org.sdk):
        answer = client.post("/api/introspect", data={"token": token}, auth=(fenced.partner, ""))
        assert (answer.status_code, answer.json) == (200, {"active": False})
    own = client.post(
        "/api/introspect", data={"token": fenced.partner_sdk}, auth=(fenced.partner, "")
    )
    assert own.json["active"] is True
    # The founder's key checks any key of its organization.
    theirs = client.post(
        "/api/introspect", data={"token": fenced.customer}, auth=(fenced.founder, "")
    )
    assert theirs.json["active"] is True


def test_introspection_beyond_the_identity_is_no_use_of_the_key(client, org, fenced):
    for _ in range(6):
        client.post("/api/introspect", data={"token": fenced.customer}, auth=(fenced.partner, ""))
    read = client.get(f"/api/keys/{shown(fenced.customer)}", auth=(org.sdk, "")).json
    assert (read["last_used"], read["quota_remaining"]) == (None, 5)


def test_the_audit_log_holds_only_the_identitys_events(client, org, fenced):
    own = made(client, fenced.partner_sdk, scopes=["monitor:read"])
    client.put(f"/api/keys/{shown(fenced.customer)}", json={"name": "c"}, auth=(org.sdk, ""))
    client.delete(f"/api/keys/{shown(own)}", auth=(fenced.partner_sdk, ""))
    ours = {shown(k) for k in (fenced.partner, fenced.partner_sdk, own)} | {fenced.partner_id}
    log = client.get("/api/audit?page_size=100", auth=(fenced.partner_sdk, "")).json
    assert log["total_count"] == len(log["data"])
    assert all(e["actor"] in ours or e["target"] in ours for e in log["data"]), log["data"]
    assert [e["action"] for e in log["data"]] == [
        "key.deleted",
        "key.created",
        "key.created",
        "key.created",
        "identity.created",
    ]
    theirs = client.get(
        f"/api/audit?key={shown(fenced.customer)}", auth=(fenced.partner_sdk, "")
    ).json
    assert (theirs["total_count"], theirs["data"]) == (0, [])
    every = client.get("/api/audit?page_size=100", auth=(org.sdk, "")).json
    assert every["total_count"] > log["total_count"]


def test_the_mcp_tools_keep_the_boundary(client, fenced):
    for tool, arguments in (
        ("get_key", {}),
        ("update_key", {"name": "taken over"}),
        ("rotate_key", {}),
        ("get_key_usage", {}),
        ("delete_key", {}),
    ):
        for target in (fenced.customer, fenced.founder):
            result = call(client, fenced.partner_sdk, tool, {"key": shown(target)} | arguments)
            assert refused(result)["status"] == 404, (tool, result)
    listed = call(client, fenced.partner_sdk, "list_keys", {})["structuredContent"]
    assert listed["total_count"] == 2
    assert {k["key"] for k in listed["data"]} == {shown(fenced.partner), shown(fenced.partner_sdk)}


# --- identities ----------------------------------------------------------------------------


@pytest.mark.parametrize("caller", ["partner", "partner_sdk"])
def test_a_key_of_an_identity_reads_its_own_identity_and_no_other(client, org, fenced, caller):
    key = getattr(fenced, caller)
    for named in (fenced.partner_id, "external_id:partner-acme"):
        own = client.get(f"/api/identities/{named}", auth=(key, ""))
        assert (own.status_code, own.json["id"]) == (200, fenced.partner_id)
        usage = client.get(f"/api/identities/{named}/usage", auth=(key, ""))
        assert (usage.status_code, usage.json["identity"]) == (200, fenced.partner_id)
    missing = client.get("/api/identities/id_nosuchidentity00", auth=(key, "")).json
    for named in (fenced.customer_id, "external_id:customer-b"):
        for path in (f"/api/identities/{named}", f"/api/identities/{named}/usage"):
            answer = client.get(path, auth=(key, ""))
            assert (answer.status_code, answer.json) == (404, missing)
    listed = client.get("/api/identities", auth=(key, "")).json
    assert (listed["total_count"], [i["id"] for i in listed["data"]]) == (1, [fenced.partner_id])
    other = client.get("/api/identities?external_id=customer-b", auth=(key, "")).json
    assert (other["total_count"], other["data"]) == (0, [])


@pytest.mark.parametrize("caller", ["partner", "partner_sdk"])
def test_a_key_of_an_identity_changes_no_identity(client, org, fenced, caller):
    key = getattr(fenced, caller)
    for named in (fenced.partner_id, fenced.customer_id):
        for method, body in (("PUT", {"name": "mine now"}), ("DELETE", None)):
            answer = client.open(
                f"/api/identities/{named}", method=method, json=body, auth=(key, "")
            )
            assert (answer.status_code, answer.json["code"]) == (403, "forbidden")
    made = client.post("/api/identities", json={"external_id": "new"}, auth=(key, ""))
    assert (made.status_code, made.json["code"]) == (403, "forbidden")
    listed = client.get("/api/identities", auth=(org.sdk, "")).json
    assert {i["name"] for i in listed["data"]} == {"partner-acme", "customer-b"}


def test_a_custom_key_of_no_identity_still_reads_no_identity(client, fenced):
    answer = client.get(f"/api/identities/{fenced.partner_id}", auth=(fenced.founder, ""))
    assert (answer.status_code, answer.json["code"]) == (403, "forbidden")


def test_a_key_of_an_identity_manages_no_webhooks(client, org, fenced):
    """A webhook's events name every key of the organization: beyond an identity's reach."""
    body = {"url": "https://hooks.example.com/k", "events": ["key.created"]}
    for method, path, sent in (
        ("GET", "/api/webhooks", None),
        ("POST", "/api/webhooks", body),
        ("GET", "/api/webhooks/wh_0000000000000000", None),
    ):
        answer = client.open(path, method=method, json=sent, auth=(fenced.partner_sdk, ""))
        assert (answer.status_code, answer.json["code"]) == (403, "forbidden"), (method, path)
    assert client.get("/api/webhooks", auth=(org.sdk, "")).status_code == 200

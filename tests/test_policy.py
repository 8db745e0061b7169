"""A key's policy fields (docs/design.md, "Key policy"): enabled, allowed_ips, rate_limit,
metadata and replaced_by, stored, validated, audited, listed, copied by a rotation, and
never more than the caller's in place and time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.key_fields import METADATA_BYTES, metadata_of
from tests.test_mcp import call, refused

POLICY = {
    "enabled": False,
    "allowed_ips": ["10.0.0.7", "2001:db8::/32", "::1"],
    "rate_limit": {"requests": 100, "seconds": 60},
    "metadata": {"customer": "c-42", "team.name": "ops-1"},
}
NORMALISED = ["10.0.0.7/32", "2001:db8::/32", "::1/128"]


def later(**delta: float) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat().replace("+00:00", "Z")


def create(client, key: str, **body):
    body = {"name": "p", "kind": "custom", "scopes": ["monitor:read"]} | body
    body = {field: value for field, value in body.items() if field != "scopes" or value}
    return client.post("/api/keys", json=body, auth=(key, ""))


def update(client, key: str, target: str, **body):
    return client.put(f"/api/keys/{target}", json=body, auth=(key, ""))


def rotate(client, key: str, target: str, **body):
    return client.post(f"/api/keys/{target}/rotate", json=body, auth=(key, ""))


def events(client, key: str, action: str) -> list[dict]:
    return client.get(f"/api/audit?action={action}", auth=(key, "")).json["data"]


def test_a_key_has_the_defaults_until_given_policy(client, org):
    made = create(client, org.sdk)
    assert made.status_code == 201, made.json
    defaults = {"enabled": True, "allowed_ips": [], "rate_limit": None, "metadata": {}}
    assert {field: made.json[field] for field in defaults} == defaults
    assert made.json["replaced_by"] is None
    read = client.get(f"/api/keys/{made.json['key']}", auth=(org.sdk, "")).json
    assert read["replaced_by"] is None and read["enabled"] is True


def test_create_stores_the_policy_normalised_and_records_it(client, org):
    made = create(client, org.sdk, **POLICY)
    assert made.status_code == 201, made.json
    expected = POLICY | {"allowed_ips": NORMALISED}
    assert {field: made.json[field] for field in POLICY} == expected
    read = client.get(made.headers["Location"], auth=(org.sdk, "")).json
    assert {field: read[field] for field in POLICY} == expected
    [created] = events(client, org.sdk, "key.created")[:1]
    assert {field: created["details"][field] for field in POLICY} == expected


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("enabled", None),
        ("enabled", 1),
        ("enabled", "true"),
        ("allowed_ips", None),
        ("allowed_ips", "10.0.0.0/8"),
        ("allowed_ips", ["10.0.0.1/8"]),  # host bits set
        ("allowed_ips", ["not an address"]),
        ("allowed_ips", ["10.0.0.0/33"]),
        ("allowed_ips", [7]),
        ("allowed_ips", [f"10.0.{n}.0/24" for n in range(51)]),
        ("rate_limit", {"requests": 0, "seconds": 60}),
        ("rate_limit", {"requests": 1_000_001, "seconds": 60}),
        ("rate_limit", {"requests": 10, "seconds": 86_401}),
        ("rate_limit", {"requests": 10}),
        ("rate_limit", {"requests": 10, "seconds": 60, "burst": 5}),
        ("rate_limit", {"requests": 1.5, "seconds": 60}),
        ("rate_limit", 10),
        ("metadata", None),
        ("metadata", []),
        ("metadata", {"": "x"}),
        ("metadata", {"a" * 41: "x"}),
        ("metadata", {"with space": "x"}),
        ("metadata", {"n": 1}),
        ("metadata", {"n": None}),
        ("metadata", {"n": "x" * 501}),
        ("metadata", {"n": "a\x00b"}),
        ("metadata", {f"n{i}": "x" for i in range(21)}),
        ("metadata", metadata_of(METADATA_BYTES + 1)),
    ],
)
def test_a_bad_policy_value_is_422_naming_its_field_on_create_and_update(
    client, org, make_key, field, value
):
    made = create(client, org.sdk, **{field: value})
    assert made.status_code == 422, made.json
    assert made.json["code"] == "validation_error" and field in made.json["errors"]
    target = make_key()
    updated = update(client, org.sdk, target, **{field: value})
    assert updated.status_code == 422, updated.json
    assert field in updated.json["errors"]


def test_the_limits_themselves_are_accepted(client, org):
    made = create(
        client,
        org.sdk,
        allowed_ips=[f"10.0.{n}.0/24" for n in range(50)],
        rate_limit={"requests": 1_000_000, "seconds": 86_400},
        metadata={f"n{i}": "x" for i in range(19)} | {"A" * 40: "x" * 500},
    )
    assert made.status_code == 201, made.json
    assert len(made.json["allowed_ips"]) == 50 and len(made.json["metadata"]) == 20


def test_metadata_is_at_most_2048_bytes_as_forward_auth_sends_it(client, org, make_key):
    """Counted as compact ASCII JSON, where a non-ASCII character is six bytes (\\uXXXX):
    the bound is accepted by create and update, a byte more is 422 naming `metadata`, with
    nothing changed, and so through MCP."""
    bound, over = metadata_of(METADATA_BYTES), metadata_of(METADATA_BYTES + 1)
    made = create(client, org.sdk, metadata=bound)
    assert made.status_code == 201, made.json
    assert made.json["metadata"] == bound
    target = make_key()
    assert update(client, org.sdk, target, metadata=bound).json["metadata"] == bound
    keys = client.get("/api/keys", auth=(org.sdk, "")).json["total_count"]
    made_by_mcp = {"name": "m", "kind": "telemetry", "metadata": over}
    refusals = [
        create(client, org.sdk, metadata=over).json,
        update(client, org.sdk, target, metadata=over).json,
        refused(call(client, org.sdk, "create_key", made_by_mcp)),
        refused(call(client, org.sdk, "update_key", {"key": target, "metadata": over})),
    ]
    for refusal in refusals:
        assert refusal["code"] == "validation_error", refusal
        [message] = refusal["errors"]["metadata"]
        assert "2049 bytes" in message and "2048" in message, message
    assert client.get(f"/api/keys/{target}", auth=(org.sdk, "")).json["metadata"] == bound
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == keys


def test_replaced_by_is_read_only_and_ignored(client, org, make_key):
    made = create(client, org.sdk, replaced_by="ak_whatever...")
    assert made.status_code == 201 and made.json["replaced_by"] is None
    target = make_key()
    updated = update(client, org.sdk, target, name="n", replaced_by="ak_whatever...")
    assert updated.status_code == 200 and updated.json["replaced_by"] is None


def test_update_replaces_what_it_names_and_keeps_the_rest(client, org):
    made = create(client, org.sdk, **POLICY).json
    target = made["key"]
    updated = update(client, org.sdk, target, metadata={"only": "this"}, enabled=True)
    assert updated.status_code == 200, updated.json
    assert updated.json["metadata"] == {"only": "this"} and updated.json["enabled"] is True
    assert updated.json["allowed_ips"] == NORMALISED
    assert updated.json["rate_limit"] == POLICY["rate_limit"]
    assert updated.json["updated"] > made["updated"]
    cleared = update(client, org.sdk, target, rate_limit=None, allowed_ips=[]).json
    assert (cleared["rate_limit"], cleared["allowed_ips"]) == (None, [])
    read = client.get(f"/api/keys/{target}", auth=(org.sdk, "")).json
    assert read == cleared
    [last, first] = events(client, org.sdk, "key.updated")[:2]
    assert first["details"] == {
        "enabled": [False, True],
        "metadata": [POLICY["metadata"], {"only": "this"}],
    }
    assert last["details"] == {
        "allowed_ips": [NORMALISED, []],
        "rate_limit": [POLICY["rate_limit"], None],
    }


def test_an_update_to_the_same_policy_changes_nothing(client, org):
    made = create(client, org.sdk, **POLICY).json
    again = update(client, org.sdk, made["key"], **POLICY)
    assert again.status_code == 200 and again.json["updated"] == made["updated"]
    assert events(client, org.sdk, "key.updated") == []


# --- never more than the caller, in place and time ----------------------------------------


@pytest.fixture
def fenced(client, org):
    """A managing key limited to 10.0.0.0/8 and expiring in a day, and the client used from
    inside that network (its policy lets it in: app/access/policy.py)."""
    client.environ_base["REMOTE_ADDR"] = "10.1.2.3"
    ends = later(days=1)
    made = create(
        client,
        org.sdk,
        kind="sdk_integration",
        scopes=None,
        allowed_ips=["10.0.0.0/8"],
        expires_at=ends,
    )
    assert made.status_code == 201, made.json
    return made.json["key"], made.json["expires_at"]


def test_a_fenced_caller_gives_its_own_place_and_time_by_default(client, fenced):
    key, ends = fenced
    made = client.post(
        "/api/keys",
        json={"name": "n", "kind": "custom", "scopes": ["monitor:read"]},
        auth=(key, ""),
        environ_base={"REMOTE_ADDR": "10.1.2.3"},
    )
    assert made.status_code == 201, made.json
    assert (made.json["allowed_ips"], made.json["expires_at"]) == (["10.0.0.0/8"], ends)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"allowed_ips": []}, "allowed_ips"),
        ({"allowed_ips": ["11.0.0.0/8"]}, "allowed_ips"),
        ({"allowed_ips": ["10.0.0.0/7"]}, "allowed_ips"),
        ({"allowed_ips": ["::1"]}, "allowed_ips"),
        ({"expires_at": None}, "expires_at"),
        ({"expires_at": later(days=2)}, "expires_at"),
    ],
)
def test_a_fenced_caller_gives_no_more_than_it_has(client, org, fenced, make_key, body, field):
    key, _ = fenced
    made = create(client, key, **body)
    assert made.status_code == 403, made.json
    assert made.json["code"] == "exceeds_caller" and field in made.json["errors"]
    target = make_key()
    updated = update(client, key, target, **body)
    assert updated.status_code == 403 and updated.json["code"] == "exceeds_caller"
    if field == "expires_at":
        rotated = rotate(client, key, target, **body)
        assert rotated.status_code == 403 and rotated.json["code"] == "exceeds_caller"
    assert client.get(f"/api/keys/{target}", auth=(org.sdk, "")).json["allowed_ips"] == []


def test_a_fenced_caller_may_give_less(client, fenced, make_key):
    key, _ = fenced
    made = create(client, key, allowed_ips=["10.1.0.0/16", "10.2.3.4"], expires_at=later(hours=1))
    assert made.status_code == 201, made.json
    assert made.json["allowed_ips"] == ["10.1.0.0/16", "10.2.3.4/32"]


def test_an_update_by_a_fenced_caller_that_names_neither_changes_neither(client, fenced, make_key):
    key, _ = fenced
    target = make_key()
    updated = update(client, key, target, name="renamed")
    assert updated.status_code == 200, updated.json
    assert (updated.json["allowed_ips"], updated.json["expires_at"]) == ([], None)


def test_a_rotation_by_a_fenced_caller_takes_its_place_and_time(client, org, fenced):
    key, ends = fenced
    wide = create(client, org.sdk, allowed_ips=["192.168.0.0/16"]).json["key"]
    narrow = create(client, org.sdk, allowed_ips=["10.9.9.9"]).json["key"]
    from_wide = rotate(client, key, wide)
    assert from_wide.status_code == 201, from_wide.json
    assert (from_wide.json["allowed_ips"], from_wide.json["expires_at"]) == (["10.0.0.0/8"], ends)
    # A key already inside the caller's addresses keeps its own.
    assert rotate(client, key, narrow).json["allowed_ips"] == ["10.9.9.9/32"]


# --- rotation -------------------------------------------------------------------------------


def test_a_rotation_copies_the_policy_but_starts_enabled(client, org):
    old = create(client, org.sdk, **POLICY).json["key"]
    successor = rotate(client, org.sdk, old, grace_seconds=60)
    assert successor.status_code == 201, successor.json
    new = successor.json
    assert new["enabled"] is True and new["replaced_by"] is None
    assert {f: new[f] for f in ("allowed_ips", "rate_limit", "metadata")} == {
        "allowed_ips": NORMALISED,
        "rate_limit": POLICY["rate_limit"],
        "metadata": POLICY["metadata"],
    }
    shown = new["key"][:15] + "..."
    assert client.get(f"/api/keys/{old}", auth=(org.sdk, "")).json["replaced_by"] == shown
    listed = client.get("/api/keys?metadata[customer]=c-42", auth=(org.sdk, "")).json
    assert listed["total_count"] == 2  # the old key, until it expires, and its successor


def test_a_rotated_key_cannot_be_rotated_again_nor_given_a_later_end(client, org, make_key):
    old = make_key()
    new = rotate(client, org.sdk, old, grace_seconds=3600).json["key"]
    shown = new[:15] + "..."
    again = rotate(client, org.sdk, old, grace_seconds=60)
    assert again.status_code == 409, again.json
    assert again.json["code"] == "already_rotated" and shown in again.json["detail"]
    for expires_at in (None, later(hours=2)):
        refused_ = update(client, org.sdk, old, expires_at=expires_at)
        assert refused_.status_code == 409 and refused_.json["code"] == "already_rotated"
    sooner = update(client, org.sdk, old, expires_at=later(minutes=5))
    assert sooner.status_code == 200, sooner.json
    assert update(client, org.sdk, old, name="still mine").status_code == 200
    assert len(events(client, org.sdk, "key.rotated")) == 1


# --- listing --------------------------------------------------------------------------------


def test_the_list_filters_by_enabled_and_metadata(client, org, other_org):
    one = create(client, org.sdk, metadata={"team": "a", "tier": "gold"}).json["key"]
    two = create(client, org.sdk, metadata={"team": "a"}, enabled=False).json["key"]
    create(client, other_org.sdk, metadata={"team": "a"})

    def keys(query: str) -> list[str]:
        body = client.get(f"/api/keys?{query}", auth=(org.sdk, "")).json
        return [key["key"] for key in body["data"]]

    shown = [one[:15] + "...", two[:15] + "..."]
    assert keys("metadata[team]=a") == shown
    assert keys("metadata[team]=a&metadata[tier]=gold") == shown[:1]
    assert keys("metadata[team]=a&enabled=false") == shown[1:]
    assert keys("metadata[team]=b") == []
    assert len(keys("enabled=true")) == 3  # the two starting keys and the first
    paged = client.get(
        "/api/keys?metadata[team]=a&kind=custom&state=active&page_size=1", auth=(org.sdk, "")
    ).json
    assert (paged["total_count"], [key["key"] for key in paged["data"]]) == (2, shown[:1])


@pytest.mark.parametrize(
    "query",
    [
        "enabled=yes",
        "enabled=1",
        "enabled=",
        "metadata[bad name]=x",
        "metadata[]=x",
        "metadata[n]=x&metadata[n]=y",
        "metadata=x",
        f"metadata[n]={'x' * 501}",
    ],
)
def test_a_bad_list_filter_is_422(client, org, query):
    answer = client.get(f"/api/keys?{query}", auth=(org.sdk, ""))
    assert answer.status_code == 422, answer.json
    assert answer.json["code"] == "validation_error"


# --- MCP ------------------------------------------------------------------------------------


def test_the_mcp_tools_take_the_policy_and_the_filters(client, org):
    made = call(
        client,
        org.sdk,
        "create_key",
        {"name": "m", "kind": "custom", "scopes": ["monitor:read"], "metadata": {"team": "mcp"}},
    )
    assert made["structuredContent"]["metadata"] == {"team": "mcp"}, made
    key = made["structuredContent"]["key"]
    updated = call(client, org.sdk, "update_key", {"key": key, "enabled": False})
    assert updated["structuredContent"]["enabled"] is False, updated
    listed = call(client, org.sdk, "list_keys", {"metadata": {"team": "mcp"}, "enabled": False})
    assert listed["structuredContent"]["total_count"] == 1, listed
    bad = call(client, org.sdk, "update_key", {"key": key, "allowed_ips": ["10.0.0.1/8"]})
    assert refused(bad)["code"] == "validation_error"

"""A request's client address (docs/design.md, "Promises kept by default"): one judgement for the
abuse limits, a key's allowed_ips, the audit log and /metrics; an IPv4-mapped IPv6 address is its
IPv4 address, as a client and in allowed_ips (stored in IPv4 form)."""

from __future__ import annotations

import json

import pytest

from app.domain.keyformat import identifier_of

MAPPED = {"REMOTE_ADDR": "::ffff:10.0.0.1"}
PLAIN = {"REMOTE_ADDR": "10.0.0.1"}


def create(client, key: str, **policy):
    body = {"name": "placed", "kind": "custom", "scopes": ["monitor:read"]} | policy
    return client.post("/api/keys", json=body, auth=(key, ""))


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("::ffff:10.0.0.1", "10.0.0.1/32"),
        ("::ffff:10.0.0.1/128", "10.0.0.1/32"),
        ("::FFFF:a00:1", "10.0.0.1/32"),
        ("::ffff:10.0.0.0/104", "10.0.0.0/8"),
        ("::ffff:0.0.0.0/96", "0.0.0.0/0"),
        ("::fffe:0:0/95", "::fffe:0:0/95"),  # wider than the mapped addresses: IPv6 still
        ("::1", "::1/128"),
        ("2001:db8::/32", "2001:db8::/32"),
    ],
)
def test_allowed_ips_are_stored_with_mapped_addresses_in_ipv4_form(
    client, org, make_key, given, stored
):
    made = create(client, org.sdk, allowed_ips=[given])
    assert made.status_code == 201, made.json
    assert made.json["allowed_ips"] == [stored]
    updated = client.put(
        f"/api/keys/{make_key()}", json={"allowed_ips": [given, stored]}, auth=(org.sdk, "")
    )
    assert updated.json["allowed_ips"] == [stored]  # the same entry, once


def test_a_mapped_network_with_host_bits_set_is_refused(client, org):
    made = create(client, org.sdk, allowed_ips=["::ffff:10.0.0.1/104"])
    assert made.status_code == 422
    assert "allowed_ips" in made.json["errors"]


@pytest.mark.parametrize("entry", ["10.0.0.1", "::ffff:10.0.0.1", "::ffff:10.0.0.0/104"])
@pytest.mark.parametrize("client_address", ["10.0.0.1", "::ffff:10.0.0.1"])
def test_a_mapped_address_is_its_ipv4_address_at_every_door(client, org, entry, client_address):
    key = create(client, org.sdk, allowed_ips=[entry]).json["key"]
    environ = {"REMOTE_ADDR": client_address}
    assert client.get("/api/forward-auth", auth=(key, ""), environ_base=environ).status_code == 204
    elsewhere = {"REMOTE_ADDR": "::ffff:10.0.0.2" if "/104" not in entry else "::ffff:11.0.0.1"}
    refused = client.get("/api/forward-auth", auth=(key, ""), environ_base=elsewhere)
    assert refused.status_code == 403 and refused.json["code"] == "ip_not_allowed"
    answer = client.post(
        "/api/introspect", data={"token": key, "client_ip": client_address}, auth=(org.sdk, "")
    )
    assert answer.json["active"] is True, answer.json


def test_a_mapped_entry_stored_before_the_rule_matches_its_ipv4_client(client, org, sql):
    key = create(client, org.sdk, allowed_ips=["10.0.0.1"]).json["key"]
    sql(
        "UPDATE api_keys SET allowed_ips = :ips WHERE identifier = :identifier",
        ips=json.dumps(["::ffff:10.0.0.1/128"]),
        identifier=identifier_of(key),
    )
    assert client.get("/api/forward-auth", auth=(key, ""), environ_base=PLAIN).status_code == 204


@pytest.mark.parametrize("app_config", [{"RATELIMIT_AUTH_FAILURES": "3/minute"}])
def test_a_mapped_address_and_its_ipv4_address_share_one_count_and_one_audit_form(client, org):
    for environ in (MAPPED, PLAIN, MAPPED):
        assert (
            client.get("/api/keys", auth=("ak_wrong", ""), environ_base=environ).status_code == 401
        )
    spent = client.get("/api/keys", auth=(org.sdk, ""), environ_base=PLAIN)
    assert spent.status_code == 429
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200  # 127.0.0.1's own
    made = client.post(
        "/api/keys",
        json={"name": "n", "kind": "telemetry"},
        auth=(org.sdk, ""),
        environ_base={"REMOTE_ADDR": "::ffff:192.0.2.7"},
    )
    assert made.status_code == 201
    [event] = client.get("/api/audit?page_size=1", auth=(org.sdk, "")).json["data"]
    assert event["client_address"] == "192.0.2.7"


@pytest.mark.parametrize("app_config", [{"TRUSTED_PROXIES": 1}])
def test_a_forwarded_mapped_address_is_its_ipv4_address(client, org):
    forwarded = {"X-Forwarded-For": "::ffff:203.0.113.7"}
    body = {"name": "placed", "kind": "custom", "scopes": ["monitor:read"]}
    body["allowed_ips"] = ["203.0.113.7"]
    made = client.post("/api/keys", json=body, auth=(org.sdk, ""), headers=forwarded)
    answer = client.get("/api/forward-auth", auth=(made.json["key"], ""), headers=forwarded)
    assert answer.status_code == 204
    [event] = client.get("/api/audit?page_size=1", auth=(org.sdk, "")).json["data"]
    assert event["client_address"] == "203.0.113.7"


def test_a_link_local_client_the_socket_names_with_its_zone_is_its_address(client, org):
    """A connection's own address may carry its zone (`fe80::1%eth0`, as the socket writes
    a link-local peer); a forwarded one may not (`::1%lo` is made up: test_metrics.py)."""
    key = create(client, org.sdk, allowed_ips=["fe80::/64"]).json["key"]
    environ = {"REMOTE_ADDR": "fe80::1%eth0"}
    assert client.get("/api/forward-auth", auth=(key, ""), environ_base=environ).status_code == 204
    made = client.post(
        "/api/keys",
        json={"name": "n", "kind": "telemetry"},
        auth=(org.sdk, ""),
        environ_base=environ,
    )
    assert made.status_code == 201
    [event] = client.get("/api/audit?page_size=1", auth=(org.sdk, "")).json["data"]
    assert event["client_address"] == "fe80::1"


@pytest.mark.parametrize("app_config", [{"TRUSTED_PROXIES": 1}])
def test_a_forwarded_address_with_a_zone_is_made_up_the_connections_counts(client, org):
    """`::1%lo` from the trusted hop is no client's address: a key allowed only ::1 is
    refused, and the audit log records the connection's."""
    key = create(client, org.sdk, allowed_ips=["::1"]).json["key"]
    forwarded = {"X-Forwarded-For": "::1%lo"}
    elsewhere = {"REMOTE_ADDR": "192.0.2.1"}
    answer = client.get(
        "/api/forward-auth", auth=(key, ""), headers=forwarded, environ_base=elsewhere
    )
    assert answer.status_code == 403 and answer.json["code"] == "ip_not_allowed"
    made = client.post(
        "/api/keys",
        json={"name": "n", "kind": "telemetry"},
        auth=(org.sdk, ""),
        headers=forwarded,
        environ_base=elsewhere,
    )
    assert made.status_code == 201
    [event] = client.get("/api/audit?page_size=1", auth=(org.sdk, "")).json["data"]
    assert event["client_address"] == "192.0.2.1"

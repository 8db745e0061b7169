"""TRUSTED_PROXIES by address: forwarded headers are believed only from a peer it names
(an address or a network), so that a client reaching the service directly cannot choose
the address the audit log records and `allowed_ips` judges; a number keeps its old
meaning (so many hops, from any peer)."""

from __future__ import annotations

import pytest

from app.config import parsed_trusted_proxies

GATEWAY = {"REMOTE_ADDR": "127.0.0.1"}
DIRECT = {"REMOTE_ADDR": "192.0.2.10"}
FORGED = {"X-Forwarded-For": "203.0.113.7"}
BY_ADDRESS = {"TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}


def placed_key(client, org) -> str:
    body = {"name": "placed", "kind": "custom", "scopes": ["monitor:read"]}
    body["allowed_ips"] = ["203.0.113.7"]
    made = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert made.status_code == 201, made.json
    return made.json["key"]


def last_client_address(client, org) -> str:
    [event] = client.get("/api/audit?page_size=1", auth=(org.sdk, "")).json["data"]
    return event["client_address"]


def create(client, org, headers: dict, environ: dict):
    body = {"name": "n", "kind": "telemetry"}
    made = client.post(
        "/api/keys", json=body, auth=(org.sdk, ""), headers=headers, environ_base=environ
    )
    assert made.status_code == 201, made.json
    return made


@pytest.mark.parametrize("app_config", [BY_ADDRESS])
def test_a_direct_client_cannot_forge_its_address(client, org):
    """A peer outside the list: X-Forwarded-For is ignored, the peer is the client."""
    create(client, org, FORGED, DIRECT)
    assert last_client_address(client, org) == "192.0.2.10"
    key = placed_key(client, org)
    refused = client.get("/api/forward-auth", auth=(key, ""), headers=FORGED, environ_base=DIRECT)
    assert refused.status_code == 403 and refused.json["code"] == "ip_not_allowed"


@pytest.mark.parametrize("app_config", [BY_ADDRESS])
@pytest.mark.parametrize("peer", ["127.0.0.1", "10.1.2.3", "::ffff:10.1.2.3"])
def test_a_listed_peer_names_the_client(client, org, peer):
    environ = {"REMOTE_ADDR": peer}
    create(client, org, FORGED, environ)
    assert last_client_address(client, org) == "203.0.113.7"
    key = placed_key(client, org)
    answer = client.get("/api/forward-auth", auth=(key, ""), headers=FORGED, environ_base=environ)
    assert answer.status_code == 204


@pytest.mark.parametrize("app_config", [BY_ADDRESS])
def test_listed_proxies_are_skipped_from_the_right(client, org):
    """A chain of listed proxies (a load balancer in 10.0.0.0/8, then the gateway): the
    client is the nearest address that is not one of them; what the client itself wrote
    further left is not believed."""
    headers = {"X-Forwarded-For": "198.51.100.1, 203.0.113.7, 10.0.0.5"}
    create(client, org, headers, GATEWAY)
    assert last_client_address(client, org) == "203.0.113.7"


@pytest.mark.parametrize("app_config", [BY_ADDRESS])
def test_a_made_up_forwarded_value_leaves_the_peer(client, org):
    create(client, org, {"X-Forwarded-For": "not-an-address"}, GATEWAY)
    assert last_client_address(client, org) == "127.0.0.1"


@pytest.mark.parametrize("app_config", [{"TRUSTED_PROXIES": "1"}])
def test_a_number_keeps_its_meaning(client, org):
    create(client, org, FORGED, DIRECT)
    assert last_client_address(client, org) == "203.0.113.7"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", 0),
        ("0", 0),
        ("2", 2),
        (" 127.0.0.1 ", ("127.0.0.1/32",)),
        ("127.0.0.1,10.0.0.0/8", ("127.0.0.1/32", "10.0.0.0/8")),
        ("::1, fd00::/8", ("::1/128", "fd00::/8")),
        ("::ffff:10.0.0.0/104", ("10.0.0.0/8",)),
    ],
)
def test_the_values_taken(value, expected):
    parsed = parsed_trusted_proxies(value)
    if isinstance(expected, int):
        assert parsed == expected
    else:
        assert tuple(str(network) for network in parsed) == expected


@pytest.mark.parametrize(
    "value", ["-1", "proxy", "127.0.0.1,", "10.0.0.1/8", "10.0.0.0/33", "1,127.0.0.1", "1.5"]
)
def test_a_bad_value_is_refused_at_start(make_app, value):
    with pytest.raises(RuntimeError) as refused:
        make_app(TRUSTED_PROXIES=value)
    assert "TRUSTED_PROXIES" in str(refused.value)

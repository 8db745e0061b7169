"""A key's policy at every door (docs/design.md, "Key policy"): once the key is found, expired,
disabled, address and its own rate limit are judged in that order, then the door's scopes,
by the REST API (Basic and Bearer), /mcp, forward auth, introspection (the checked key, its
address from `client_ip`) and the embedded extension; the RateLimit headers of a key with
a limit of its own, and the metadata a check passes on."""

from __future__ import annotations

import json
import re

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from app.domain.keyformat import identifier_of, new_key
from tests.key_fields import METADATA_BYTES, metadata_header, metadata_of
from tests.test_extension import make_host  # noqa: F401 (a fixture)
from tests.test_mcp import ACCEPT, bearer, invalid_token

FORWARD = "/api/forward-auth"
INTROSPECT = "/api/introspect"
ELSEWHERE = {"REMOTE_ADDR": "192.0.2.9"}
INSIDE = {"REMOTE_ADDR": "10.1.2.3"}


@pytest.fixture
def policy_key(client, org):
    """A custom key made through the API with the policy given; returns its full value."""

    def make(scopes=("monitor:read",), **policy) -> str:
        body = {"name": "p", "kind": "custom"} | ({"scopes": list(scopes)} if scopes else {})
        body |= policy
        made = client.post("/api/keys", json=body, auth=(org.sdk, ""))
        assert made.status_code == 201, made.json
        return made.json["key"]

    return make


def expire(sql, key: str) -> None:
    sql(
        "UPDATE api_keys SET expires_at = '2000-01-01 00:00:00' WHERE identifier = :identifier",
        identifier=identifier_of(key),
    )


def refused(answer, status: int, code: str) -> None:
    assert answer.status_code == status, answer.data
    assert answer.mimetype == "application/problem+json"
    assert answer.json["code"] == code


# The REST API, with Basic and Bearer.


@pytest.mark.parametrize("scheme", ["basic", "bearer"])
def test_a_disabled_key_is_401_disabled_key_until_enabled_again(client, org, policy_key, scheme):
    key = policy_key(scopes=(), kind="sdk_integration", enabled=False)

    def read():
        if scheme == "basic":
            return client.get("/api/keys", auth=(key, ""))
        return client.get("/api/keys", headers=bearer(key))

    answer = read()
    refused(answer, 401, "disabled_key")
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="api"'
    assert key not in answer.get_data(as_text=True)
    listed = client.get(f"/api/keys/{identifier_of(key)}", auth=(org.sdk, "")).json
    assert listed["last_used"] is None  # refused: not a use
    client.put(f"/api/keys/{identifier_of(key)}", json={"enabled": True}, auth=(org.sdk, ""))
    assert read().status_code == 200


def test_expired_comes_before_disabled(client, policy_key, sql):
    key = policy_key(enabled=False)
    expire(sql, key)
    refused(client.get("/api/keys", auth=(key, "")), 401, "expired_key")


def test_an_address_outside_every_allowed_network_is_403(client, org, policy_key):
    key = policy_key(scopes=(), kind="sdk_integration", allowed_ips=["10.0.0.0/8", "::1"])
    refused(client.get("/api/keys", auth=(key, ""), environ_base=ELSEWHERE), 403, "ip_not_allowed")
    assert client.get("/api/keys", auth=(key, ""), environ_base=INSIDE).status_code == 200
    assert (
        client.get("/api/keys", auth=(key, ""), environ_base={"REMOTE_ADDR": "::1"}).status_code
        == 200
    )
    anywhere = policy_key(scopes=(), kind="sdk_integration", allowed_ips=[])
    assert client.get("/api/keys", auth=(anywhere, ""), environ_base=ELSEWHERE).status_code == 200


def test_disabled_comes_before_the_address(client, policy_key):
    key = policy_key(enabled=False, allowed_ips=["10.0.0.0/8"])
    refused(client.get("/api/keys", auth=(key, ""), environ_base=ELSEWHERE), 401, "disabled_key")


@pytest.mark.parametrize("app_config", [{"TRUSTED_PROXIES": 1}])
def test_behind_a_trusted_proxy_the_forwarded_address_is_judged(client, policy_key):
    key = policy_key(scopes=(), kind="sdk_integration", allowed_ips=["10.0.0.0/8"])
    headers = {"X-Forwarded-For": "10.9.9.9"}
    assert client.get("/api/keys", auth=(key, ""), headers=headers).status_code == 200
    refused(
        client.get("/api/keys", auth=(key, ""), headers={"X-Forwarded-For": "192.0.2.1"}),
        403,
        "ip_not_allowed",
    )


def test_a_key_without_its_own_limit_has_no_ratelimit_headers(client, org):
    answer = client.get("/api/keys", auth=(org.sdk, ""))
    assert "RateLimit" not in answer.headers and "RateLimit-Policy" not in answer.headers


POLICY_HEADER = '"key";q=3;w=60'
REMAINING = re.compile(r'^"key";r=(\d+);t=(\d+)$')


def remaining(answer) -> tuple[int, int]:
    assert answer.headers["RateLimit-Policy"] == POLICY_HEADER
    match = REMAINING.match(answer.headers["RateLimit"])
    assert match, answer.headers["RateLimit"]
    return int(match[1]), int(match[2])


def test_past_its_own_limit_a_key_is_429_with_retry_after_and_ratelimit_headers(client, policy_key):
    key = policy_key(scopes=(), kind="sdk_integration", rate_limit={"requests": 3, "seconds": 60})
    answers = [client.get("/api/keys", auth=(key, "")) for _ in range(4)]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    assert [remaining(answer)[0] for answer in answers] == [2, 1, 0, 0]
    assert all(0 < remaining(answer)[1] <= 60 for answer in answers)
    refused(answers[3], 429, "rate_limited")
    assert 0 < int(answers[3].headers["Retry-After"]) <= 60


def test_an_address_refusal_spends_none_of_the_allowance(client, policy_key):
    key = policy_key(
        scopes=(),
        kind="sdk_integration",
        allowed_ips=["10.0.0.0/8"],
        rate_limit={"requests": 1, "seconds": 60},
    )
    for _ in range(3):
        refused(
            client.get("/api/keys", auth=(key, ""), environ_base=ELSEWHERE), 403, "ip_not_allowed"
        )
    assert client.get("/api/keys", auth=(key, ""), environ_base=INSIDE).status_code == 200
    refused(client.get("/api/keys", auth=(key, ""), environ_base=INSIDE), 429, "rate_limited")


@pytest.mark.parametrize("app_config", [{"RATELIMIT_ENABLED": False}])
def test_a_keys_own_limit_holds_with_the_abuse_limits_off(client, policy_key):
    """RATELIMIT_ENABLED=false switches off the service's abuse limits, not what a key's
    owner asked of it."""
    key = policy_key(scopes=(), kind="sdk_integration", rate_limit={"requests": 1, "seconds": 60})
    assert client.get("/api/keys", auth=(key, "")).status_code == 200
    refused(client.get("/api/keys", auth=(key, "")), 429, "rate_limited")


def test_a_changed_limit_counts_afresh(client, org, policy_key):
    key = policy_key(rate_limit={"requests": 1, "seconds": 60})
    assert client.get(FORWARD, auth=(key, "")).status_code == 204
    assert client.get(FORWARD, auth=(key, "")).status_code == 429
    limit = {"rate_limit": {"requests": 3, "seconds": 60}}
    client.put(f"/api/keys/{identifier_of(key)}", json=limit, auth=(org.sdk, ""))
    assert client.get(FORWARD, auth=(key, "")).status_code == 204


# /mcp: only a tools/call is a use of the key; the policy refuses every message.

INITIALIZE = {
    "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1],
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"},
}
# (method, params, whether it is a request with an id): every message but tools/call.
HANDSHAKE = (
    ("initialize", INITIALIZE, True),
    ("notifications/initialized", None, False),
    ("tools/list", None, True),
    ("ping", None, True),
)
TOOL_CALL = ("tools/call", {"name": "get_key", "arguments": {"key": "ak_unknown"}}, True)


def send(client, key: str, method: str, params: dict | None, request: bool = True, **environ):
    """One MCP message: a request (with an id) or a notification."""
    message = {"jsonrpc": "2.0", "method": method} | ({"id": 7} if request else {})
    if params is not None:
        message["params"] = params
    headers = bearer(key) | {"Accept": ACCEPT}
    return client.post("/mcp", json=message, headers=headers, environ_base=environ)


def limited_sdk_key(policy_key, requests: int) -> str:
    limit = {"requests": requests, "seconds": 60}
    return policy_key(scopes=(), kind="sdk_integration", rate_limit=limit)


@pytest.mark.parametrize("message", [*HANDSHAKE, TOOL_CALL], ids=lambda message: message[0])
def test_mcp_refuses_a_disabled_key_with_its_bearer_challenge_for_every_message(
    client, policy_key, message
):
    key = policy_key(scopes=(), kind="sdk_integration", enabled=False)
    answer = send(client, key, *message)
    refused(answer, 401, "disabled_key")
    assert answer.headers.get_all("WWW-Authenticate") == [invalid_token(answer.json["detail"])]
    assert answer.json["detail"].startswith("This API key is disabled")


@pytest.mark.parametrize("message", [*HANDSHAKE, TOOL_CALL], ids=lambda message: message[0])
def test_mcp_refuses_an_address_and_an_expired_key_for_every_message(
    client, policy_key, sql, message
):
    outside = policy_key(scopes=(), kind="sdk_integration", allowed_ips=["10.0.0.0/8"])
    refused(send(client, outside, *message, **ELSEWHERE), 403, "ip_not_allowed")
    assert send(client, outside, *message, **INSIDE).status_code < 400
    expired = policy_key(scopes=(), kind="sdk_integration")
    expire(sql, expired)
    refused(send(client, expired, *message), 401, "expired_key")


def test_at_mcp_only_tool_calls_spend_a_keys_own_limit(client, policy_key):
    """A host's handshake and listing spend nothing: with 3 a minute, 3 tool calls pass
    after them, the 4th is 429, and the protocol's other messages still pass after it."""
    key = limited_sdk_key(policy_key, 3)
    for message in HANDSHAKE:
        answer = send(client, key, *message)
        assert answer.status_code in (200, 202), (message, answer.data)
        assert "RateLimit" not in answer.headers  # no use, nothing counted
    calls = [send(client, key, *TOOL_CALL) for _ in range(4)]
    assert [answer.status_code for answer in calls] == [200, 200, 200, 429]
    assert [remaining(answer)[0] for answer in calls] == [2, 1, 0, 0]
    refused(calls[3], 429, "rate_limited")
    assert 0 < int(calls[3].headers["Retry-After"]) <= 60
    for message in HANDSHAKE:
        assert send(client, key, *message).status_code in (200, 202), message


def test_a_batch_of_tool_calls_is_400_before_the_protocol_and_spends_nothing(
    client, org, policy_key
):
    key = limited_sdk_key(policy_key, 1)
    create = {"name": "create_key", "arguments": {"name": "b", "kind": "custom"}}
    batch = [{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": create} for n in (1, 2)]
    answer = client.post("/mcp", json=batch, headers=bearer(key) | {"Accept": ACCEPT})
    refused(answer, 400, "bad_request")
    names = [made["name"] for made in client.get("/api/keys", auth=(org.sdk, "")).json["data"]]
    assert "b" not in names
    assert send(client, key, *TOOL_CALL).status_code == 200  # the one use is still there


@pytest.mark.parametrize(
    "params, request_",
    [
        (None, True),  # no params: no tool named
        ({"name": "get_key", "arguments": "not an object"}, True),
        ({"name": 7}, True),
        (TOOL_CALL[1], False),  # as a notification: no id
    ],
    ids=["no params", "arguments not an object", "name not a string", "notification"],
)
def test_a_malformed_tool_call_is_answered_and_spends_a_use(client, policy_key, params, request_):
    key = limited_sdk_key(policy_key, 1)
    answer = send(client, key, "tools/call", params, request_)
    assert answer.status_code < 500, answer.data
    refused(send(client, key, *TOOL_CALL), 429, "rate_limited")


# Forward auth


def test_forward_auth_refuses_a_disabled_or_expired_key_with_a_challenge(client, policy_key, sql):
    disabled = policy_key(enabled=False)
    answer = client.get(FORWARD, auth=(disabled, ""))
    refused(answer, 401, "disabled_key")
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="api"'
    expired = policy_key()
    expire(sql, expired)
    refused(client.get(FORWARD, auth=(expired, "")), 401, "expired_key")


def test_forward_auth_judges_the_checked_keys_address(client, policy_key):
    key = policy_key(allowed_ips=["10.0.0.0/8"])
    refused(client.get(FORWARD, auth=(key, ""), environ_base=ELSEWHERE), 403, "ip_not_allowed")
    assert client.get(FORWARD, auth=(key, ""), environ_base=INSIDE).status_code == 204


def test_forward_auth_passes_the_rate_limit_on_before_the_scopes(client, policy_key):
    key = policy_key(rate_limit={"requests": 3, "seconds": 60})
    passed = client.get(f"{FORWARD}?scope=monitor:read", auth=(key, ""))
    assert passed.status_code == 204 and remaining(passed)[0] == 2
    lacking = client.get(f"{FORWARD}?scope=site:read", auth=(key, ""))
    refused(lacking, 403, "forbidden")  # counted: the limit comes before the scopes
    assert remaining(lacking)[0] == 1
    client.get(FORWARD, auth=(key, ""))
    spent = client.get(f"{FORWARD}?scope=site:read", auth=(key, ""))
    refused(spent, 429, "rate_limited")  # the limit before the scopes
    assert remaining(spent)[0] == 0 and int(spent.headers["Retry-After"]) > 0


def test_forward_auth_passes_the_metadata_as_compact_ascii_json(client, policy_key):
    metadata = {"customer": "c-42", "team": "Ωmega café", "note": 'a "b", c'}
    key = policy_key(metadata=metadata)
    answer = client.get(FORWARD, auth=(key, ""))
    assert answer.status_code == 204
    sent = answer.headers["X-Api-Key-Metadata"]
    assert json.loads(sent) == metadata
    assert sent == json.dumps(json.loads(sent), separators=(",", ":"), ensure_ascii=True)
    assert sent.isascii() and "\\u03a9mega" in sent
    assert client.get(FORWARD, auth=(policy_key(), "")).headers["X-Api-Key-Metadata"] == "{}"


def test_metadata_at_its_bound_is_a_header_of_2048_bytes(client, policy_key):
    metadata = metadata_of(METADATA_BYTES)
    answer = client.get(FORWARD, auth=(policy_key(metadata=metadata), ""))
    assert answer.status_code == 204
    sent = answer.headers["X-Api-Key-Metadata"]
    assert json.loads(sent) == metadata
    assert len(sent.encode("latin-1")) == len(metadata_header(metadata)) == METADATA_BYTES


def test_the_rest_api_and_forward_auth_spend_one_allowance(client, policy_key):
    key = policy_key(rate_limit={"requests": 2, "seconds": 60})
    assert client.get("/api/keys", auth=(key, "")).status_code == 200
    assert client.get(FORWARD, auth=(key, "")).status_code == 204
    refused(client.get("/api/keys", auth=(key, "")), 429, "rate_limited")
    refused(client.get(FORWARD, auth=(key, "")), 429, "rate_limited")


# Introspection


def introspect(client, asker: str, token: str, **members):
    return client.post(INTROSPECT, data={"token": token, **members}, auth=(asker, ""))


def test_introspection_names_why_a_key_of_the_organization_is_inactive(
    client, org, policy_key, sql
):
    disabled = policy_key(enabled=False)
    assert introspect(client, org.sdk, disabled).json == {"active": False, "code": "disabled_key"}
    expire(sql, disabled)
    assert introspect(client, org.sdk, disabled).json == {"active": False, "code": "expired_key"}


def test_introspection_judges_the_address_the_service_names(client, org, policy_key):
    key = policy_key(allowed_ips=["10.0.0.0/8"], metadata={"team": "ops"})
    inactive = {"active": False, "code": "ip_not_allowed"}
    assert introspect(client, org.sdk, key).json == inactive  # no client_ip: never active
    assert introspect(client, org.sdk, key, client_ip="192.0.2.1").json == inactive
    answer = client.post(
        INTROSPECT, json={"token": key, "client_ip": "10.0.0.5"}, auth=(org.sdk, "")
    )
    assert answer.json["active"] is True and answer.json["metadata"] == {"team": "ops"}
    anywhere = introspect(client, org.sdk, org.telemetry, client_ip="192.0.2.1").json
    assert anywhere["active"] is True and anywhere["metadata"] == {}


@pytest.mark.parametrize("client_ip", ["", "10.0.0", "10.0.0.0/8", "x" * 100, "::1%eth0"])
def test_a_client_ip_that_is_no_address_is_422(client, org, client_ip):
    answer = introspect(client, org.sdk, org.telemetry, client_ip=client_ip)
    refused(answer, 422, "validation_error")
    assert "client_ip" in answer.json["errors"]
    as_json = client.post(
        INTROSPECT, json={"token": org.telemetry, "client_ip": 7}, auth=(org.sdk, "")
    )
    assert as_json.status_code == 422


def test_introspection_spends_the_checked_keys_allowance(client, org, policy_key):
    key = policy_key(rate_limit={"requests": 1, "seconds": 60})
    assert client.get(FORWARD, auth=(key, "")).status_code == 204
    answer = introspect(client, org.sdk, key).json
    assert answer["active"] is False and answer["code"] == "rate_limited"
    assert set(answer) == {"active", "code", "retry_after"} and 0 < answer["retry_after"] <= 60
    # the asker's own answer carries no RateLimit headers of the checked key
    assert "RateLimit" not in introspect(client, org.sdk, key).headers


def test_another_organizations_or_an_unknown_key_says_nothing_more(
    client, org, other_org, make_key
):
    theirs = client.post(
        "/api/keys",
        json={"name": "t", "kind": "custom", "scopes": ["monitor:read"], "enabled": False},
        auth=(other_org.sdk, ""),
    ).json["key"]
    assert introspect(client, org.sdk, theirs).json == {"active": False}
    assert introspect(client, org.sdk, new_key("ak_")[1]).json == {"active": False}


# The embedded extension


def test_the_extension_applies_the_same_policy(make_host, org, policy_key, sql):  # noqa: F811
    host = make_host(org.name).test_client()
    disabled = policy_key(enabled=False)
    refused(host.get("/monitors", auth=(disabled, "")), 401, "disabled_key")
    outside = policy_key(allowed_ips=["10.0.0.0/8"])
    refused(
        host.get("/monitors", auth=(outside, ""), environ_base=ELSEWHERE), 403, "ip_not_allowed"
    )
    assert host.get("/monitors", auth=(outside, ""), environ_base=INSIDE).status_code == 200
    limited = policy_key(rate_limit={"requests": 1, "seconds": 60})
    assert host.get("/monitors", auth=(limited, "")).status_code == 200
    refused(host.get("/monitors", auth=(limited, "")), 429, "rate_limited")

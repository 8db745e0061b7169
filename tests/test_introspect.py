"""POST /api/introspect, after RFC 7662 (docs/design.md, "Forward auth and introspection"): a
managing key asks about the key named by `token` (a form field, or JSON); `{"active": false}` and
nothing else for any key that does not authenticate now; the key's facts for one that does.
tests/server/test_introspection_client.py asks with Authlib's RFC 7662 client."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.keyformat import identifier_of, new_key

URL = "/api/introspect"
INACTIVE = {"active": False}


def introspect(client, caller: str, token, as_json: bool = False):
    if as_json:
        return client.post(URL, json={"token": token}, auth=(caller, ""))
    return client.post(URL, data={"token": token}, auth=(caller, ""))


def seconds(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


@pytest.mark.parametrize("as_json", [False, True], ids=["form", "json"])
def test_a_live_key_is_active_with_its_facts(client, org, as_json):
    answer = introspect(client, org.sdk, org.telemetry, as_json)
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    shown = client.get(f"/api/keys/{identifier_of(org.telemetry)}", auth=(org.sdk, "")).json
    assert answer.json == {
        "active": True,
        "scope": "monitor:telemetry",
        "client_id": identifier_of(org.telemetry),
        "token_type": "api_key",
        "iat": seconds(shown["created"]),
        "kind": "telemetry",
        "name": shown["name"],
        "metadata": {},
    }


def test_exp_is_the_expiry_in_unix_seconds(client, org):
    body = {"name": "t", "kind": "custom", "scopes": ["site:read", "monitor:read"]}
    made = client.post(
        "/api/keys", json=body | {"expires_at": "2999-01-01T00:00:00Z"}, auth=(org.sdk, "")
    ).json
    answer = introspect(client, org.sdk, made["key"]).json
    assert answer["exp"] == int(datetime(2999, 1, 1, tzinfo=UTC).timestamp())
    assert answer["scope"] == "monitor:read site:read"


def test_rfc_7662s_token_type_hint_is_accepted_and_ignored(client, org):
    body = {"token": org.telemetry, "token_type_hint": "access_token"}
    answer = client.post(URL, data=body, auth=(org.sdk, ""))
    assert answer.json["active"] is True


def test_a_custom_key_may_ask_too(client, make_key, org):
    asker = make_key("custom", ("site:read",))
    assert introspect(client, asker, org.sdk).json["active"] is True


@pytest.mark.parametrize(
    "token",
    ["", "nothing", "ak_x", new_key("ak_")[1], "Basic abc", "\u00e9" * 60],
    ids=["empty", "word", "short", "unknown", "scheme", "non-ascii"],
)
def test_anything_but_a_live_key_is_inactive_and_nothing_else(client, org, token):
    answer = introspect(client, org.sdk, token)
    assert (answer.status_code, answer.json) == (200, INACTIVE)


def test_deleted_expired_and_foreign_keys_are_inactive(client, org, other_org, make_key, sql):
    deleted, expired = make_key(), make_key()
    client.delete(f"/api/keys/{deleted}", auth=(org.sdk, ""))
    sql(
        "UPDATE api_keys SET expires_at = '2000-01-01 00:00:00' WHERE identifier = :identifier",
        identifier=identifier_of(expired),
    )
    for token in (deleted, other_org.sdk):
        assert introspect(client, org.sdk, token).json == INACTIVE
    # the organization's own key says why (docs/design.md, "Forward auth and introspection")
    assert introspect(client, org.sdk, expired).json == INACTIVE | {"code": "expired_key"}


def test_another_organizations_key_is_not_used_by_a_check(client, org, other_org):
    """It does not exist for the asker: its last_used stays as it was (never used)."""
    assert introspect(client, org.sdk, other_org.telemetry).json == INACTIVE
    identifier = identifier_of(other_org.telemetry)
    shown = client.get(f"/api/keys/{identifier}", auth=(other_org.sdk, "")).json
    assert shown["last_used"] is None


def test_a_check_is_a_use_of_the_checked_key(client, org, make_key):
    key = make_key()
    introspect(client, org.sdk, key)
    shown = client.get(f"/api/keys/{identifier_of(key)}", auth=(org.sdk, "")).json
    assert shown["last_used"] is not None


def test_a_telemetry_key_may_not_ask(client, org):
    answer = introspect(client, org.telemetry, org.sdk)
    assert (answer.status_code, answer.json["code"]) == (403, "forbidden")


def test_the_caller_must_authenticate(client, org):
    answer = client.post(URL, data={"token": org.sdk})
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="api"'


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"data": b"", "content_type": "application/x-www-form-urlencoded"}, 422),
        ({"data": {"token": ["a", "b"]}}, 422),
        ({"data": {"token": "a", "other": "b"}}, 422),
        ({"json": {}}, 422),
        ({"json": {"token": 5}}, 422),
        ({"json": ["token"]}, 400),
        ({}, 415),
        ({"data": b"token=a", "content_type": "text/plain"}, 415),
        ({"data": b"{", "content_type": "application/json"}, 400),
    ],
)
def test_a_request_that_names_no_token_is_refused(client, org, kwargs, status):
    answer = client.post(URL, auth=(org.sdk, ""), **kwargs)
    assert answer.status_code == status, answer.json
    if status == 422:
        assert answer.json["code"] == "validation_error"


@pytest.mark.parametrize("app_config", [{"RATELIMIT_INTROSPECT": "2/minute"}])
def test_introspection_counts_per_calling_key_under_its_own_limit(client, org, make_key):
    assert [introspect(client, org.sdk, org.telemetry).status_code for _ in range(3)] == [
        200,
        200,
        429,
    ]
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200

"""Keys kept secret (docs/design.md, "Keys"), in what a response and the database
see: every answer of /api/keys, errors included, is `Cache-Control: no-store`; a key that
fails its checksum is refused before the database is asked; an unknown key and a deleted
key take the same path, so that no answer tells them apart."""

from __future__ import annotations

import pytest

from app.domain import keyformat
from app.http.messages import WORDS
from app.keys import service


@pytest.fixture
def app_config():
    return {"RATELIMIT_AUTH_FAILURES": "1/minute"}


def mistyped(key: str) -> str:
    """`key` with its last character changed: it fails the checksum."""
    return key[:-1] + ("A" if key[-1] != "A" else "B")


@pytest.fixture
def unknown() -> str:
    """A well-formed key (its checksum holds) that was never stored."""
    return keyformat.new_key("ak_")[1]


@pytest.fixture
def deleted(client, org) -> str:
    made = client.post(
        "/api/keys", json={"name": "gone", "kind": "telemetry"}, auth=(org.sdk, "")
    ).json["key"]
    assert client.delete(f"/api/keys/{made}", auth=(org.sdk, "")).status_code == 204
    return made


# --- Cache-Control: no-store, on the answers the caching test of test_requests.py leaves out

ERRORS = {
    "400 not JSON": ("POST", "/api/keys", {"data": "{", "content_type": "application/json"}),
    "413 too large": (
        "POST",
        "/api/keys",
        {"data": "x" * (65 * 1024), "content_type": "application/json"},
    ),
    "415 not JSON": ("POST", "/api/keys", {"data": "x", "content_type": "text/plain"}),
    "403 scope_exceeds_caller": (
        "POST",
        "/api/keys",
        {"json": {"name": "n", "kind": "sdk_integration"}},
    ),
    "409 immutable": ("PUT", "/api/keys/{telemetry}", {"json": {"scopes": ["monitor:read"]}}),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_refusals_of_api_keys_carry_cache_control_no_store(client, org, make_key, case):
    method, path, kwargs = ERRORS[case]
    weak = make_key(scopes=("monitor:read", "monitor:write", "monitor:telemetry"))
    path = path.format(telemetry=keyformat.identifier_of(org.telemetry))
    response = client.open(path, method=method, auth=(weak, ""), **kwargs)
    assert response.status_code == int(case.split()[0]), response.json
    assert response.headers.getlist("Cache-Control") == ["no-store"]


def test_a_rate_limited_answer_carries_cache_control_no_store(client):
    client.get("/api/keys", auth=("ak_wrong", ""))
    response = client.get("/api/keys", auth=("ak_wrong", ""))
    assert response.status_code == 429
    assert response.headers.getlist("Cache-Control") == ["no-store"]


def test_a_server_fault_on_api_keys_carries_cache_control_no_store(app, client, org, monkeypatch):
    app.config["PROPAGATE_EXCEPTIONS"] = False  # answered as in production, not raised

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(service, "list_keys", explode)
    response = client.get("/api/keys", auth=(org.sdk, ""))
    assert response.status_code == 500
    assert response.headers.getlist("Cache-Control") == ["no-store"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("DELETE", "/api/keys", 405),
        ("PATCH", "/api/keys/ak_abcdefgh", 405),
        ("GET", "/api/introspect", 405),
        ("GET", "/api/revoke", 405),
        ("GET", "/mcp", 405),
        ("DELETE", "/mcp", 405),
        ("GET", "/api/nothing-here", 404),
        ("GET", "/api", 404),
    ],
)
def test_routing_refusals_under_api_and_mcp_carry_cache_control_no_store(
    client, org, method, path, status
):
    response = client.open(path, method=method, auth=(org.sdk, ""))
    assert response.status_code == status
    assert response.headers.getlist("Cache-Control") == ["no-store"]


def test_answers_outside_api_and_mcp_may_be_cached(client):
    assert "Cache-Control" not in client.get("/healthz").headers


# --- the checksum asks no database ---------------------------------------------------------


@pytest.mark.parametrize("scheme", ["basic", "bearer"])
def test_a_key_failing_its_checksum_is_refused_without_a_query(client, org, statements, scheme):
    wrong = mistyped(org.sdk)
    auth = (wrong, "") if scheme == "basic" else None
    headers = {"Authorization": f"Bearer {wrong}"} if scheme == "bearer" else {}
    with statements() as seen:
        response = client.get(f"/api/keys/{wrong}", auth=auth, headers=headers)
    assert response.status_code == 401
    assert seen == []


def test_a_well_formed_key_is_looked_up_once(client, unknown, statements):
    with statements() as seen:
        assert client.get("/api/keys", auth=(unknown, "")).status_code == 401
    assert len(seen) == 1
    assert "WHERE API_KEYS.DIGEST =" in seen[0]


# --- an unknown key and a deleted key: one path ----------------------------------------------


def answer_and_statements(client, statements, *args, **kwargs):
    with statements() as seen:
        response = client.get(*args, **kwargs)
    headers = {k: v for k, v in response.headers.items() if k != "Date"}
    return response.status_code, headers, response.get_data(), seen


@pytest.mark.parametrize("app_config", [{}])
def test_an_unknown_and_a_deleted_key_authenticate_alike(client, statements, unknown, deleted):
    as_unknown = answer_and_statements(client, statements, "/api/keys", auth=(unknown, ""))
    as_deleted = answer_and_statements(client, statements, "/api/keys", auth=(deleted, ""))
    assert as_unknown[0] == 401
    assert as_unknown == as_deleted


@pytest.mark.parametrize("form", ["full", "identifier", "shown"])
def test_an_unknown_and_a_deleted_key_in_the_path_are_not_found_alike(
    client, org, statements, unknown, deleted, form
):
    def reference(key: str) -> str:
        identifier = keyformat.identifier_of(key)
        return {"full": key, "identifier": identifier, "shown": identifier + "..."}[form]

    auth = (org.sdk, "")
    client.get("/api/keys", auth=auth)  # last_used written now, not in one of the two
    as_unknown = answer_and_statements(
        client, statements, f"/api/keys/{reference(unknown)}", auth=auth
    )
    as_deleted = answer_and_statements(
        client, statements, f"/api/keys/{reference(deleted)}", auth=auth
    )
    assert as_unknown[0] == 404
    assert as_unknown == as_deleted


# --- no error repeats a key its request carried --------------------------------------------


def assert_masked(response, key: str) -> dict:
    """A 422 whose body holds `key` only as its shown form `<identifier>...`."""
    assert response.status_code == 422, response.get_data(as_text=True)
    text = response.get_data(as_text=True)
    assert key not in text and key[-20:] not in text
    assert keyformat.shown(keyformat.identifier_of(key)) in text
    return response.json


# Where a request may carry a key: (method, path, body), each made from the key.
REQUESTS = {
    "create member name": lambda key: (
        "POST",
        "/api/keys",
        {"name": "n", "kind": "telemetry", key: 1},
    ),
    "update member name": lambda key: ("PUT", "/api/keys/{target}", {"name": "n", key: 1}),
    "metadata member name": lambda key: ("PUT", "/api/keys/{target}", {"metadata": {key: "x"}}),
    "query parameter name": lambda key: ("GET", f"/api/keys?{key}=1", None),
    "query parameter in metadata": lambda key: ("GET", f"/api/keys?metadata[{key}]=1", None),
}


@pytest.mark.parametrize("case", list(REQUESTS))
def test_a_refusal_never_repeats_a_key_its_request_carried(client, org, unknown, case):
    method, path, body = REQUESTS[case](unknown)
    target = keyformat.identifier_of(org.telemetry)
    path = path.replace("{target}", target)
    response = client.open(path, method=method, json=body, auth=(org.sdk, ""))
    problem = assert_masked(response, unknown)
    assert problem["code"] == "validation_error" and problem["errors"], problem


def test_an_unknown_member_named_by_a_key_is_named_masked(client, org, unknown):
    response = client.post(
        "/api/keys", json={"name": "n", "kind": "telemetry", unknown: 1}, auth=(org.sdk, "")
    )
    shown = keyformat.shown(keyformat.identifier_of(unknown))
    assert assert_masked(response, unknown)["errors"] == {shown: [WORDS["Unknown field."]]}

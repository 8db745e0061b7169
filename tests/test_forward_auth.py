"""/api/forward-auth, for gateways (docs/design.md, "Forward auth and introspection"): any
method, the request's own key (any kind) against the scopes its query names; 204 with the
X-Api-Key-* headers, 401, 403 naming the missing scopes, 422 for a scope no key can hold.
tests/server/test_gateway.py runs it behind a real nginx."""

from __future__ import annotations

import pytest

from app.domain.keyformat import identifier_of
from app.domain.scopes import SCOPES

URL = "/api/forward-auth"
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@pytest.mark.parametrize("method", METHODS)
def test_any_method_checks_the_key_and_passes_its_headers(client, org, method):
    answer = client.open(
        f"{URL}?scope=monitor:telemetry", method=method, auth=(org.telemetry, ""), data=b"{x"
    )
    assert answer.status_code == 204, answer.data
    assert answer.data == b""
    assert answer.headers["X-Api-Key-Id"] == identifier_of(org.telemetry)
    assert answer.headers["X-Api-Key-Kind"] == "telemetry"
    assert answer.headers["X-Api-Key-Scopes"] == "monitor:telemetry"
    assert answer.headers["X-Api-Key-Organization"] == org.name
    assert answer.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("Ωmega café", "%CE%A9mega caf%C3%A9"),
        ("100% acme", "100%25 acme"),
        ("Acme, Inc. (EU)", "Acme, Inc. (EU)"),
    ],
)
def test_the_organization_header_is_ascii_with_utf8_percent_encoded(client, make_org, name, sent):
    """A header is Latin-1 on the wire (gunicorn refuses anything else, with a 500): a name
    outside printable ASCII is sent percent-encoded, as RFC 3986 writes UTF-8."""
    organization = make_org(name)
    answer = client.get(URL, auth=(organization.telemetry, ""))
    assert answer.status_code == 204
    assert answer.headers["X-Api-Key-Organization"] == sent


def test_no_scope_named_passes_any_valid_key_and_bearer_works(client, org):
    answer = client.get(URL, headers={"Authorization": f"Bearer {org.sdk}"})
    assert answer.status_code == 204
    assert answer.headers["X-Api-Key-Scopes"] == " ".join(SCOPES)  # table order


def test_every_named_scope_is_required_and_the_missing_ones_are_named(client, make_key):
    key = make_key("custom", ("site:read", "monitor:read"))
    query = "scope=monitor:read&scope=site:read&scope=site:write&scope=issue:read"
    answer = client.get(f"{URL}?{query}", auth=(key, ""))
    assert answer.status_code == 403
    assert answer.json["code"] == "forbidden"
    assert "site:write, issue:read" in answer.json["detail"]
    assert answer.headers["Cache-Control"] == "no-store"
    held = client.get(f"{URL}?scope=site:read&scope=monitor:read&scope=site:read", auth=(key, ""))
    assert held.status_code == 204


@pytest.mark.parametrize("query", ["scope=everything", "scope=", "scope=site:read&scope=Site:read"])
def test_a_scope_no_key_can_hold_is_422(client, org, query):
    answer = client.get(f"{URL}?{query}", auth=(org.sdk, ""))
    assert answer.status_code == 422
    assert answer.json["code"] == "validation_error"
    assert "scope" in answer.json["errors"]


def test_other_query_parameters_are_refused_naming_them(client, org):
    answer = client.get(f"{URL}?scopes=site:read", auth=(org.sdk, ""))
    assert answer.status_code == 422
    assert "scopes" in answer.json["errors"]


@pytest.mark.parametrize(
    "authorization", [None, "Basic !!", "Bearer ak_nope", "Digest x", "Basic " + "A" * 80]
)
def test_no_or_a_bad_key_is_401_with_a_challenge(client, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    answer = client.get(URL, headers=headers)
    assert answer.status_code == 401
    assert answer.json["code"] == "unauthorized"
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="api"'


def test_a_deleted_key_is_401_on_its_next_check(client, org, make_key):
    key = make_key("custom", ("site:read",))
    assert client.get(URL, auth=(key, "")).status_code == 204
    assert client.delete(f"/api/keys/{key}", auth=(org.sdk, "")).status_code == 204
    assert client.get(URL, auth=(key, "")).status_code == 401


def test_an_expired_key_is_401_expired_key(client, org, make_key, sql):
    key = make_key("custom", ("site:read",))
    sql(
        "UPDATE api_keys SET expires_at = '2000-01-01 00:00:00' WHERE identifier = :identifier",
        identifier=identifier_of(key),
    )
    answer = client.get(URL, auth=(key, ""))
    assert (answer.status_code, answer.json["code"]) == (401, "expired_key")


def test_a_check_is_a_use_of_the_key(client, org, make_key):
    key = make_key("custom", ("site:read",))
    assert client.get(URL, auth=(key, "")).status_code == 204
    shown = client.get(f"/api/keys/{identifier_of(key)}", auth=(org.sdk, "")).json
    assert shown["last_used"] is not None


@pytest.mark.parametrize("app_config", [{"RATELIMIT_INTROSPECT": "3/minute"}])
def test_checks_count_per_checked_key_under_their_own_limit(client, org, make_key):
    key = make_key("custom", ("site:read",))
    assert [client.get(URL, auth=(key, "")).status_code for _ in range(4)] == [204] * 3 + [429]
    limited = client.get(URL, auth=(key, ""))
    assert limited.json["code"] == "rate_limited"
    assert int(limited.headers["Retry-After"]) >= 1
    # The REST API's own per-key limit is another count.
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert client.get(URL, auth=(org.sdk, "")).status_code == 204


@pytest.mark.parametrize("app_config", [{"RATELIMIT_AUTH_FAILURES": "2/minute"}])
def test_failed_checks_count_toward_the_address_limit(client, org):
    assert [client.get(URL).status_code for _ in range(2)] == [401, 401]
    assert client.get(URL, auth=(org.sdk, "")).status_code == 429


@pytest.mark.parametrize(
    "query",
    [
        "",
        "scope=monitor:read",
        "scope=monitor:read&scope=site:read",
        "scope=site%3Aread&scope=monitor:read&scope=site:read",
        "scope=",
        "scope=nope",
        "scope=monitor:read&other=1",
        "scope=%ff",
    ],
)
def test_scopes_loaded_once_per_query_string_are_those_the_schema_loads(app, query):
    """checks.schemas.required_scopes (kept per query string) gives what the schema gives
    loading request.args, or raises what it raises, each time."""
    from marshmallow import ValidationError

    from app.checks import schemas
    from app.domain.scopes import to_bits

    with app.test_request_context(f"/api/forward-auth?{query}"):
        from flask import request

        arguments = {name: request.args.getlist(name) for name in request.args}
        try:
            plain = to_bits(schemas.forward_auth_arguments.load(arguments)["scope"])
        except ValidationError as error:
            plain = error.messages
        for _ in range(2):
            try:
                kept = schemas.required_scopes(request.query_string)
            except ValidationError as error:
                kept = error.messages
            assert kept == plain

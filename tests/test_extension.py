"""The Flask extension embedded (app/extension.py; CONTRACT.md section 11's checks, in the
host's own views): examples/monitors.py's views in the service's own application, on the
same database, authenticated exactly as the API does it."""

from __future__ import annotations

import pytest
from flask import Flask

from app.extension import ApiKeys, require_scopes
from app.keyformat import identifier_of
from examples import monitors


@pytest.fixture
def host(database_url, app_config):
    app = monitors.embedded(
        {"SQLALCHEMY_DATABASE_URI": database_url, "TESTING": True, **app_config}
    )
    yield app
    from app.extensions import db

    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def host_client(host, org):
    return host.test_client()


def test_a_key_with_the_scopes_reaches_the_view_as_current_key(host_client, org, make_key):
    reader = make_key("custom", ("monitor:read",))
    answer = host_client.get("/monitors", auth=(reader, ""))
    assert answer.status_code == 200, answer.json
    assert answer.json["seen_by"] == identifier_of(reader)
    bearer = host_client.get("/monitors", headers={"Authorization": f"Bearer {org.sdk}"})
    assert bearer.json["seen_by"] == identifier_of(org.sdk)


def test_a_key_without_them_is_403_naming_the_missing_scopes(host_client, make_key):
    reader = make_key("custom", ("monitor:read",))
    answer = host_client.post("/monitors", json={"url": "x"}, auth=(reader, ""))
    assert answer.status_code == 403
    assert answer.mimetype == "application/problem+json"
    assert answer.json["code"] == "forbidden"
    assert answer.json["detail"] == "This key lacks the scopes: monitor:write."


@pytest.mark.parametrize("authorization", [None, "Basic !!", "Bearer ak_nope"])
def test_no_key_or_a_bad_one_is_the_apis_401(host_client, org, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    answer = host_client.get("/monitors", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="api"'
    assert answer.json["code"] == "unauthorized"


def test_an_expired_key_is_401_expired_key(host_client, make_key, sql):
    reader = make_key("custom", ("monitor:read",))
    sql(
        "UPDATE api_keys SET expires_at = '2000-01-01 00:00:00' WHERE identifier = :identifier",
        identifier=identifier_of(reader),
    )
    assert host_client.get("/monitors", auth=(reader, "")).json["code"] == "expired_key"


@pytest.mark.parametrize("app_config", [{"RATELIMIT_PER_KEY": "2/minute"}])
def test_the_abuse_limits_count_as_on_the_api(host_client, make_key):
    reader = make_key("custom", ("monitor:read",))
    statuses = [host_client.get("/monitors", auth=(reader, "")).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_the_service_keeps_serving_beside_the_host(host_client, org):
    assert host_client.get("/api/keys", auth=(org.sdk, "")).status_code == 200


def test_embedded_needs_the_services_own_application():
    with pytest.raises(RuntimeError, match="create_app"):
        ApiKeys(Flask("elsewhere"))


def test_remote_needs_a_key_and_an_http_url():
    with pytest.raises(ValueError, match="managing key"):
        ApiKeys(Flask("a"), introspect_url="http://127.0.0.1:1/api/introspect")
    with pytest.raises(ValueError, match="http"):
        ApiKeys(Flask("b"), introspect_url="file:///etc/passwd", key="ak_x")


def test_an_unknown_scope_is_refused_when_the_view_is_declared():
    with pytest.raises(ValueError, match="monitor:delete"):
        require_scopes("monitor:read", "monitor:delete")

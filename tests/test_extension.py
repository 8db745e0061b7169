"""The Flask extension embedded (app/extension.py: the service's checks in the
host's own views, for one organization): examples/monitors.py's views in the
service's own application, on the same database, authenticated exactly as the API does it,
for the keys of the organization it names only."""

from __future__ import annotations

import re

import pytest
from flask import Flask

from app.domain.keyformat import identifier_of, new_key
from app.extension import ApiKeys, require_scopes
from app.extensions import db
from app.webhooks import sender
from examples import monitors
from tests.processes import PROJECT

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@pytest.fixture
def make_host(database_url, app_config):
    """The example host serving the organization named, on the test's database."""
    hosts = []

    def make(organization: str) -> Flask:
        config = {"SQLALCHEMY_DATABASE_URI": database_url, "TESTING": True, **app_config}
        hosts.append(monitors.embedded(config, organization))
        return hosts[-1]

    yield make
    sender.stop_all()  # no webhook round later, through the engine disposed below
    for host in hosts:
        with host.app_context():
            db.engine.dispose()


@pytest.fixture
def host_client(make_host, org):
    return make_host(org.name).test_client()


def refused_as_unknown(host_client, key: str) -> None:
    """`key` gets exactly the answer of a key that does not exist."""
    answer = host_client.get("/monitors", auth=(key, ""))
    unknown = host_client.get("/monitors", auth=(new_key("ak_")[1], ""))
    assert (answer.status_code, answer.json) == (401, unknown.json)
    assert answer.json["code"] == "unauthorized"
    assert answer.headers["WWW-Authenticate"] == unknown.headers["WWW-Authenticate"]


def test_a_key_with_the_scopes_reaches_the_view_as_current_key(host_client, org, make_key):
    reader = make_key("custom", ("monitor:read",))
    answer = host_client.get("/monitors", auth=(reader, ""))
    assert answer.status_code == 200, answer.json
    assert answer.json["seen_by"] == identifier_of(reader)
    assert answer.json["organization"] == org.name
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


def test_a_key_of_another_organization_is_refused_as_an_unknown_key(
    host_client, client, other_org, sql
):
    refused_as_unknown(host_client, other_org.telemetry)
    seen = client.get(f"/api/keys/{other_org.telemetry}", auth=(other_org.sdk, ""))
    assert seen.json["last_used"] is None  # nor is it used: it does not exist here
    refused_as_unknown(host_client, other_org.sdk)
    sql(
        "UPDATE api_keys SET expires_at = '2000-01-01 00:00:00' WHERE identifier = :identifier",
        identifier=identifier_of(other_org.sdk),
    )
    refused_as_unknown(host_client, other_org.sdk)  # not expired_key: it does not exist here


@pytest.mark.parametrize("app_config", [{"RATELIMIT_AUTH_FAILURES": "2/minute"}])
def test_another_organizations_key_counts_as_a_failed_authentication(host_client, other_org):
    statuses = [
        host_client.get("/monitors", auth=(other_org.sdk, "")).status_code for _ in range(3)
    ]
    assert statuses == [401, 401, 429]


def test_an_organization_that_does_not_exist_serves_no_key(make_host, org, caplog):
    refused_as_unknown(make_host("acme ").test_client(), org.sdk)
    assert "'acme ', which does not exist" in caplog.text


def test_the_service_keeps_serving_beside_the_host(host_client, org):
    assert host_client.get("/api/keys", auth=(org.sdk, "")).status_code == 200


def test_embedded_needs_the_services_own_application():
    with pytest.raises(RuntimeError, match="create_app"):
        ApiKeys(Flask("elsewhere"), organization="acme")


@pytest.mark.parametrize("organization", [None, ""])
def test_embedded_needs_the_organization_it_serves(app, organization):
    with pytest.raises(ValueError, match='organization="NAME"'):
        ApiKeys(app, organization=organization)
    assert "api_keys" not in app.extensions


def test_remote_serves_the_managing_keys_organization_and_no_other():
    with pytest.raises(ValueError, match="managing key's organization"):
        ApiKeys(Flask("a"), introspect_url="http://x/api/introspect", key="ak_x", organization="a")


def test_remote_needs_a_key_and_an_http_url():
    with pytest.raises(ValueError, match="managing key"):
        ApiKeys(Flask("a"), introspect_url="http://127.0.0.1:1/api/introspect")
    with pytest.raises(ValueError, match="http"):
        ApiKeys(Flask("b"), introspect_url="file:///etc/passwd", key="ak_x")


def test_an_unknown_scope_is_refused_when_the_view_is_declared():
    with pytest.raises(ValueError, match="monitor:delete"):
        require_scopes("monitor:read", "monitor:delete")


def test_the_docs_show_the_example_that_runs_here():
    blocks = PYTHON_BLOCK.findall((PROJECT / "docs" / "extension.md").read_text())
    example = (PROJECT / "examples" / "monitors.py").read_text()
    assert len(blocks) == 3
    assert [block for block in blocks if block not in example] == []

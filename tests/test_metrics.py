"""GET /metrics (docs/design.md, "Metrics") through Flask's test client: who may read it (a
loopback client as the abuse limits see it, or the METRICS_TOKEN's bearer, and nobody when
METRICS_ENABLED is false), what each metric counts, and that no label names a key, an
identifier or an organization. tests/server/test_metrics.py scrapes a real gunicorn."""

from __future__ import annotations

import hashlib
import sys

import pytest
from flask import Flask, jsonify
from prometheus_client.parser import text_string_to_metric_families

from app import create_app
from app.domain.keyformat import identifier_of, new_key
from app.extension import ApiKeys, require_scopes
from app.extensions import db
from app.storage import reads
from app.webhooks import sender
from tests.processes import run, service_env

LOCAL = {"REMOTE_ADDR": "127.0.0.1"}
REMOTE = {"REMOTE_ADDR": "203.0.113.7"}
TOKEN = "metrics-9f2c.A_~+/token="
PAST = "2000-01-01 00:00:00"
FUTURE = "2999-01-01 00:00:00"


def scrape(client, **kwargs) -> str:
    answer = client.get("/metrics", **kwargs)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape: (name, its labels) -> its value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    """One sample's value; 0 when the scrape does not have it (a series never counted)."""
    return samples(text).get((name, frozenset(labels.items())), 0.0)


def requests(text: str, endpoint: str, method: str, status: int) -> float:
    labels = {"endpoint": endpoint, "method": method, "status": str(status)}
    return value(text, "api_keys_requests_total", **labels)


def checks(text: str, door: str, outcome: str) -> float:
    return value(text, "api_keys_key_checks_total", door=door, outcome=outcome)


def unknown_path(client, **kwargs):
    return client.get("/no-such-path", **kwargs)


def assert_as_unknown(answer, client, **kwargs) -> None:
    """`answer` is exactly the answer to a path that does not exist."""
    unknown = unknown_path(client, **kwargs)
    assert answer.status_code == 404
    assert answer.mimetype == "application/problem+json"
    assert answer.get_data() == unknown.get_data()


# --- Who may read it -------------------------------------------------------------------


def test_a_client_on_the_same_machine_reads_prometheus_text_format(client):
    answer = client.get("/metrics", environ_base=LOCAL)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = answer.get_data(as_text=True)
    assert "# TYPE api_keys_requests_total counter" in text
    assert "# TYPE api_keys_request_duration_seconds histogram" in text


# A dual-stack socket shows an IPv4 client as its IPv4-mapped IPv6 address.
@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_every_loopback_address_is_local(client, address):
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": address}).status_code == 200


@pytest.mark.parametrize(
    "address", ["203.0.113.7", "10.0.0.1", "::ffff:203.0.113.7", "::2", "-", ""]
)
def test_anyone_else_gets_the_answer_of_an_unknown_path(client, address):
    answer = client.get("/metrics", environ_base={"REMOTE_ADDR": address})
    assert_as_unknown(answer, client)


def test_a_forwarded_address_is_ignored_without_trusted_proxies(client):
    forged = {"X-Forwarded-For": "127.0.0.1"}
    assert_as_unknown(client.get("/metrics", headers=forged, environ_base=REMOTE), client)


# What a proxy on this machine sends for its client, any client: nginx's X-Real-IP and
# X-Forwarded-For, RFC 7239's Forwarded; a loopback value or one that is no address.
FORWARDING = [
    ("X-Forwarded-For", "203.0.113.7"),
    ("X-Forwarded-For", "127.0.0.1"),
    ("X-Forwarded-For", "10.0.0.1, 127.0.0.1"),
    ("X-Forwarded-For", "::1%lo"),
    ("X-Forwarded-For", "localhost"),
    ("X-Forwarded-For", ""),
    ("X-Real-IP", "127.0.0.1"),
    ("Forwarded", "for=127.0.0.1"),
    ("Forwarded", 'for="[::1]"'),
]


@pytest.mark.parametrize("app_config", [{}, {"TRUSTED_PROXIES": 1}, {"TRUSTED_PROXIES": 2}])
@pytest.mark.parametrize(("header", "value"), FORWARDING)
def test_a_request_a_proxy_forwarded_is_never_local(client, app_config, header, value):
    """Whatever TRUSTED_PROXIES says and whatever client the proxy names: a proxy on this
    machine exposes nothing. The same connection without the header is local."""
    answer = client.get("/metrics", headers={header: value}, environ_base=LOCAL)
    assert_as_unknown(answer, client)
    assert client.get("/metrics", environ_base=LOCAL).status_code == 200


@pytest.mark.parametrize("app_config", [{"METRICS_TOKEN": TOKEN}])
def test_with_a_token_only_its_bearer_reads_from_anywhere(client):
    for scheme in ("Bearer", "bearer", "BEARER"):
        answer = client.get(
            "/metrics", headers={"Authorization": f"{scheme} {TOKEN}"}, environ_base=REMOTE
        )
        assert answer.status_code == 200
    assert_as_unknown(client.get("/metrics", environ_base=LOCAL), client)


@pytest.mark.parametrize("app_config", [{"METRICS_TOKEN": TOKEN}])
@pytest.mark.parametrize(
    "authorization",
    [
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        "Bearer ",
        "Bearer",
        f"Basic {TOKEN}",
        f"Token {TOKEN}",
        TOKEN,
        "Bearer \u00e9t\u00e9",
    ],
)
def test_with_a_token_any_other_authorization_is_an_unknown_path(client, authorization):
    headers = {"Authorization": authorization}
    answer = client.get("/metrics", headers=headers, environ_base=LOCAL)
    assert_as_unknown(answer, client, headers=headers)


@pytest.mark.parametrize(
    "app_config", [{"METRICS_ENABLED": False}, {"METRICS_ENABLED": False, "METRICS_TOKEN": TOKEN}]
)
def test_metrics_switched_off_is_an_unknown_path_for_everyone(client):
    assert_as_unknown(client.get("/metrics", environ_base=LOCAL), client)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert_as_unknown(client.get("/metrics", headers=bearer), client)


@pytest.mark.parametrize(
    "app_config", [{"METRICS_ENABLED": False, "RATELIMIT_AUTH_FAILURES": "1/minute"}]
)
def test_metrics_switched_off_counts_nothing_and_refuses_nothing_more(client, org):
    body = {"name": "n", "kind": "telemetry"}
    assert client.post("/api/keys", json=body, auth=(org.sdk, "")).status_code == 201
    assert client.get("/api/keys").status_code == 401
    assert client.get("/api/keys").status_code == 429


def test_metrics_is_not_part_of_the_api_document(client):
    assert "/metrics" not in client.get("/openapi.json").json["paths"]


# --- What it counts ---------------------------------------------------------------------


def test_requests_are_counted_by_endpoint_name_method_and_status(client, org, make_key):
    key = make_key()
    for _ in range(3):
        assert client.get(f"/api/keys/{identifier_of(key)}", auth=(org.sdk, "")).status_code == 200
    client.get(f"/api/keys/{identifier_of(key)}x", auth=(org.sdk, ""))  # 404, a matched route
    client.get("/no/such/path")
    client.open("/api/keys", method="BREW")
    client.post("/api/keys/x", auth=(org.sdk, ""))  # 405: no such method there
    text = scrape(client)
    assert requests(text, "keys.get_key", "GET", 200) == 3
    assert requests(text, "keys.get_key", "GET", 404) == 1
    assert requests(text, "none", "GET", 404) == 1
    assert requests(text, "none", "other", 405) == 1
    assert requests(text, "none", "POST", 405) == 1
    duration = "api_keys_request_duration_seconds"
    assert value(text, f"{duration}_count", endpoint="keys.get_key") == 4
    assert value(text, f"{duration}_bucket", endpoint="keys.get_key", le="+Inf") == 4
    assert value(text, f"{duration}_sum", endpoint="keys.get_key") > 0
    # A scrape is a request too, counted once it has answered.
    assert requests(scrape(client), "metrics.metrics", "GET", 200) == 1


def test_no_label_holds_a_key_an_identifier_or_an_organizations_name(
    client, make_org, sql, make_host
):
    org = make_org("Initech Metrics Zeta")
    made = client.post(
        "/api/keys",
        json={"name": "Build Robot Quux", "kind": "custom", "scopes": ["monitor:read"]},
        auth=(org.sdk, ""),
    ).json["key"]
    deleted = new_key("ak_")[1]
    bearer = {"Authorization": f"Bearer {org.sdk}"}
    for key in (org.sdk, org.telemetry, made, deleted):
        client.get(f"/api/keys/{key}", auth=(key, ""))
        client.get(f"/api/keys/{identifier_of(key)}...", auth=(org.sdk, ""))
        client.get("/api/forward-auth?scope=site:read", auth=(key, ""))
        client.post("/api/introspect", data={"token": key}, auth=(org.sdk, ""))
        client.post("/mcp", headers={"Authorization": f"Bearer {key}"})
    client.post("/mcp", headers=bearer)
    host = make_host(org.name).test_client()
    for key in (org.sdk, made, deleted):
        host.get("/monitors", auth=(key, ""))
    client.delete(f"/api/keys/{made}", auth=(org.sdk, ""))
    text = scrape(client) + scrape(host)
    secrets = [org.sdk, org.telemetry, made, deleted, org.name, "Build Robot Quux"]
    secrets += [identifier_of(key) for key in (org.sdk, org.telemetry, made, deleted)]
    secrets += [hashlib.sha256(key.encode()).hexdigest() for key in (org.sdk, made)]
    secrets += [identifier for (identifier,) in sql("SELECT identifier FROM api_keys")]
    for secret in secrets:
        assert secret not in text
        assert secret.lower() not in text.lower()
    labels = {label for name, label_set in samples(text) for label in label_set}
    assert {name for name, _ in labels} <= {
        "endpoint",
        "method",
        "status",
        "le",
        "door",
        "outcome",
        "limit",
        "action",
        "kind",
        "state",
    }


@pytest.fixture
def make_host(database_url):
    """The service's own application with a host view behind the embedded extension."""
    hosts: list[Flask] = []

    def make(organization: str) -> Flask:
        host = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": database_url})
        ApiKeys(host, organization=organization)

        @host.get("/monitors")
        @require_scopes("monitor:read")
        def monitors():
            return jsonify(seen=True)

        hosts.append(host)
        return host

    yield make
    sender.stop_all()  # no webhook round later, through the engine disposed below
    reads.release()  # this thread's connection, which dispose leaves open
    for host in hosts:
        with host.app_context():
            db.engine.dispose()


def expire(sql, key: str, at: str = PAST) -> None:
    sql(
        "UPDATE api_keys SET expires_at = :at WHERE identifier = :identifier",
        at=at,
        identifier=identifier_of(key),
    )


def test_key_checks_are_counted_by_door_and_outcome(app, client, org, make_key, sql):
    reader = make_key("custom", ("monitor:read",))
    expired = make_key("custom", ("monitor:read",))
    expire(sql, expired)
    bad = new_key("ak_")[1]
    # The REST API: the managing kinds pass; a telemetry key is forbidden there.
    client.get("/api/keys", auth=(org.sdk, ""))
    client.get("/api/keys", auth=(reader, ""))
    client.get("/api/keys", auth=(org.telemetry, ""))
    client.get("/api/keys", auth=(bad, ""))
    client.get("/api/keys")
    client.get("/api/keys", auth=(expired, ""))
    # MCP: only an sdk_integration key passes (a bodiless POST stops before the protocol).
    client.post("/mcp", headers={"Authorization": f"Bearer {org.sdk}"})
    client.post("/mcp", headers={"Authorization": f"Bearer {reader}"})
    client.post("/mcp", headers={"Authorization": f"Bearer {bad}"})
    # Forward auth: the checked key and the scopes named.
    client.get("/api/forward-auth?scope=monitor:read", auth=(reader, ""))
    client.get("/api/forward-auth?scope=site:read", auth=(reader, ""))
    client.get("/api/forward-auth", auth=(expired, ""))
    # Introspection: the key checked (the asking key is the REST API's).
    for token in (reader, expired, bad, "not a key"):
        client.post("/api/introspect", data={"token": token}, auth=(org.sdk, ""))
    text = scrape(client)
    assert checks(text, "rest", "allowed") == 2 + 4  # the four introspections' asking key
    assert checks(text, "rest", "forbidden") == 1
    assert checks(text, "rest", "unauthorized") == 2
    assert checks(text, "rest", "expired_key") == 1
    assert checks(text, "mcp", "allowed") == 1
    assert checks(text, "mcp", "forbidden") == 1
    assert checks(text, "mcp", "unauthorized") == 1
    assert checks(text, "forward_auth", "allowed") == 1
    assert checks(text, "forward_auth", "forbidden") == 1
    assert checks(text, "forward_auth", "expired_key") == 1
    assert checks(text, "introspection", "allowed") == 1
    assert checks(text, "introspection", "expired_key") == 1
    assert checks(text, "introspection", "unauthorized") == 2
    total = sum(v for (name, _), v in samples(text).items() if name == "api_keys_key_checks_total")
    assert total == 6 + 1 + 2 + 1 + 3 + 3 + 4


def test_the_policys_refusals_are_counted_by_their_code_at_every_door(client, org):
    """A disabled key, one used from outside its allowed_ips, one past its own rate limit
    (docs/design.md, "Key policy"; at /mcp, a tool call): each door counts the
    policy's code."""
    policies = {
        "disabled_key": {"enabled": False},
        "ip_not_allowed": {"allowed_ips": ["10.0.0.0/8"]},
        "rate_limited": {"rate_limit": {"requests": 1, "seconds": 3600}},
    }
    for code, policy in policies.items():
        body = {"name": code, "kind": "sdk_integration", **policy}
        made = client.post("/api/keys", json=body, auth=(org.sdk, ""))
        assert made.status_code == 201, made.json
        key = made.json["key"]
        if code == "rate_limited":
            assert client.get("/api/keys", auth=(key, "")).status_code == 200
        assert client.get("/api/keys", auth=(key, "")).json["code"] == code
        tool_call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}  # a use at /mcp
        mcp = client.post("/mcp", json=tool_call, headers={"Authorization": f"Bearer {key}"})
        assert mcp.json["code"] == code
        assert client.get("/api/forward-auth", auth=(key, "")).json["code"] == code
        asked = client.post("/api/introspect", data={"token": key}, auth=(org.sdk, ""))
        assert asked.json == {"active": False, "code": code} | (
            {"retry_after": asked.json.get("retry_after")} if code == "rate_limited" else {}
        )
    text = scrape(client)
    for code in policies:
        for door in ("rest", "mcp", "forward_auth", "introspection"):
            assert checks(text, door, code) == 1, (door, code)


def test_the_embedded_extensions_checks_are_its_own_door(make_host, org, make_key):
    host = make_host(org.name)
    client = host.test_client()
    reader = make_key("custom", ("monitor:read",))
    writer = make_key("custom", ("monitor:write",))
    assert client.get("/monitors", auth=(reader, "")).status_code == 200
    assert client.get("/monitors", auth=(writer, "")).status_code == 403
    assert client.get("/monitors", auth=(new_key("ak_")[1], "")).status_code == 401
    text = scrape(client)
    assert checks(text, "extension", "allowed") == 1
    assert checks(text, "extension", "forbidden") == 1
    assert checks(text, "extension", "unauthorized") == 1


@pytest.mark.parametrize(
    "app_config",
    [
        {
            "RATELIMIT_AUTH_FAILURES": "2/minute",
            "RATELIMIT_PER_KEY": "2/minute",
            "RATELIMIT_INTROSPECT": "1/minute",
        }
    ],
)
def test_refusals_of_the_abuse_limits_are_counted_by_limit(client, org, make_key):
    for _ in range(4):
        client.get("/api/keys", auth=(org.sdk, ""))
    for _ in range(3):
        client.get("/api/forward-auth", auth=(org.telemetry, ""))
    for _ in range(4):
        client.get("/api/keys", environ_base={"REMOTE_ADDR": "10.0.0.9"})
    text = scrape(client)
    limit = "api_keys_limit_refusals_total"
    assert value(text, limit, limit="per_key") == 2
    assert value(text, limit, limit="introspect") == 2
    assert value(text, limit, limit="auth_failures") == 2
    assert requests(text, "keys.list_keys", "GET", 429) == 4


def test_audit_events_are_counted_by_action(client, org, make_key):
    body = {"name": "ci", "kind": "custom", "scopes": ["site:read"]}
    made = client.post("/api/keys", json=body, auth=(org.sdk, "")).json["key"]
    client.put(f"/api/keys/{made}", json={"name": "ci 2"}, auth=(org.sdk, ""))
    rotated = client.post(f"/api/keys/{made}/rotate", json={}, auth=(org.sdk, "")).json["key"]
    client.delete(f"/api/keys/{rotated}", auth=(org.sdk, ""))
    client.put(f"/api/keys/{org.sdk}", json={"scopes": []}, auth=(org.sdk, ""))  # refused
    text = scrape(client)
    events = "api_keys_audit_events_total"
    # The organization's two starting keys, the one made here, the rotation's successor.
    assert value(text, events, action="key.created") == 2 + 2
    assert value(text, events, action="key.updated") == 1
    assert value(text, events, action="key.rotated") == 1
    assert value(text, events, action="key.deleted") == 1


def test_keys_are_counted_by_kind_and_state_when_scraped(client, org, other_org, make_key, sql):
    for _ in range(3):
        make_key("custom", ("site:read",))
    expire(sql, make_key("custom", ("site:read",)))
    expire(sql, other_org.telemetry)
    deleted = make_key("custom", ("site:read",))
    client.delete(f"/api/keys/{deleted}", auth=(org.sdk, ""))
    expire(sql, org.telemetry, FUTURE)  # expires, but not yet
    text = scrape(client)
    keys = {
        (labels["kind"], labels["state"]): count
        for (name, label_set), count in samples(text).items()
        if name == "api_keys_keys"
        for labels in [dict(label_set)]
    }
    assert keys == {
        ("telemetry", "active"): 1,
        ("telemetry", "expired"): 1,
        ("sdk_integration", "active"): 2,
        ("sdk_integration", "expired"): 0,
        ("custom", "active"): 3,
        ("custom", "expired"): 1,
    }


def test_a_database_that_does_not_answer_leaves_the_keys_out_of_a_scrape(
    make_app, new_database, caplog
):
    """The counts of requests matter most when the database is down: the scrape still
    answers, without the keys it could not read, and the log says why."""
    client = make_app(SQLALCHEMY_DATABASE_URI=new_database()).test_client()  # no tables
    text = scrape(client)
    assert "api_keys_keys" not in text
    assert "# TYPE api_keys_requests_total counter" in text
    assert "the keys could not be counted" in caplog.text


# One process of the service, as a gunicorn worker is one: a request, then a scrape.
ONE_PROCESS = """
import sys
from app import create_app
from app.storage import reads
client = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": sys.argv[1]}).test_client()
client.get("/no-such-path")
print(client.get("/metrics").get_data(as_text=True))
"""


def test_processes_that_share_a_multiprocess_directory_add_up(tmp_path):
    """Multiprocess mode, as gunicorn.conf.py sets it (PROMETHEUS_MULTIPROC_DIR before the
    application is imported): each process writes its own files, and a scrape reads them
    all, those of a process that has ended included."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = service_env(PROMETHEUS_MULTIPROC_DIR=str(folder))
    database = f"sqlite:///{tmp_path}/keys.sqlite3"  # no tables: the keys are left out
    first = run([sys.executable, "-c", ONE_PROCESS, database], env).stdout
    second = run([sys.executable, "-c", ONE_PROCESS, database], env).stdout
    assert requests(first, "none", "GET", 404) == 1
    assert requests(second, "none", "GET", 404) == 2
    assert requests(second, "metrics.metrics", "GET", 200) == 1  # the first's scrape
    assert value(second, "api_keys_request_duration_seconds_count", endpoint="none") == 2
    assert len(list(folder.glob("counter_*.db"))) == 2


def test_a_multiprocess_directory_set_too_late_stops_the_start(make_app, tmp_path, monkeypatch):
    """Set after prometheus_client was imported, it would not be used: every worker would
    count alone, and a scrape show the share of the one that answers."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="PROMETHEUS_MULTIPROC_DIR was set after"):
        make_app(SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path}/keys.sqlite3")

"""Key events for webhooks (docs/design.md, "Webhooks"): written by the audit log's one writer
in the transaction of the change, for the endpoints that take them, with the key as read,
and signed so that the official Standard Webhooks library verifies them unchanged."""

from __future__ import annotations

import json
import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.domain.keyformat import identifier_of
from app.webhooks import sender
from tests import webhooks
from tests.webhooks import body_of, make_endpoint, payloads, verified

receiver, clock = webhooks.receiver, webhooks.clock  # fixtures

ALL = (
    "key.created",
    "key.updated",
    "key.rotated",
    "key.deleted",
    "key.revoked",
    "key.expiring",
    "key.expired",
)


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}


def send(app) -> int:
    return sender.of(app).tick()


def shown(full_key: str) -> str:
    return identifier_of(full_key) + "..."


def test_every_change_of_a_key_is_sent_with_the_key_as_read(app, client, org, receiver):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=ALL)
    made = client.post(
        "/api/keys",
        json={"name": "ci", "kind": "custom", "scopes": ["site:read"]},
        auth=(org.sdk, ""),
    ).json
    url = f"/api/keys/{identifier_of(made['key'])}"
    updated = client.put(url, json={"name": "ci 2"}, auth=(org.sdk, "")).json
    rotated = client.post(f"{url}/rotate", json={"grace_seconds": 60}, auth=(org.sdk, "")).json
    old = client.get(url, auth=(org.sdk, "")).json
    client.delete(url, auth=(org.sdk, ""))
    assert client.post("/api/revoke", json={"keys": [rotated["key"]]}).status_code == 202
    assert send(app) == 6
    got = payloads(endpoint["secret"], receiver.wait_for(6))
    assert [p["type"] for p in got] == [
        "key.created",
        "key.updated",
        "key.created",
        "key.rotated",
        "key.deleted",
        "key.revoked",
    ]
    created, update, replacement, rotation, deletion, revocation = got
    assert created["data"] == {"key": made | {"key": shown(made["key"])}, "actor": shown(org.sdk)}
    assert update["data"] == {
        "key": updated,
        "actor": shown(org.sdk),
        "changes": {"name": ["ci", "ci 2"]},
    }
    assert replacement["data"]["key"] == rotated | {"key": shown(rotated["key"])}
    assert rotation["data"] == {
        "key": old,
        "actor": shown(org.sdk),
        "changes": {"replacement": shown(rotated["key"]), "grace_seconds": 60},
    }
    assert deletion["data"] == {"key": old, "actor": shown(org.sdk)}
    assert revocation["data"]["actor"] == "leak-report"
    assert revocation["data"]["key"]["key"] == shown(rotated["key"])
    for payload in got:
        assert payload["timestamp"].endswith("Z")
    everything = "".join(r.body.decode() for r in receiver.received)
    for full in (made["key"], rotated["key"], org.sdk):
        assert full not in everything
    assert "whsec_" not in everything


def test_the_operators_changes_are_sent_too(app, client, org, receiver, runner):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    result = runner.invoke(
        args=["keys", "create", "--org", org.name, "--kind", "telemetry", "--name", "cli"]
    )
    assert result.exit_code == 0, result.output
    send(app)
    (payload,) = payloads(endpoint["secret"], receiver.wait_for(1))
    assert payload["data"]["actor"] == "operator"
    assert payload["data"]["key"]["name"] == "cli"


def test_only_the_organizations_endpoints_that_take_the_type_get_it(
    app, client, org, other_org, receiver
):
    make_endpoint(client, org.sdk, receiver.url, events=["key.deleted"])
    off = make_endpoint(client, org.sdk, receiver.url, events=["key.created"])
    client.put(f"/api/webhooks/{off['id']}", json={"enabled": False}, auth=(org.sdk, ""))
    make_endpoint(client, other_org.sdk, receiver.url, events=["key.created"])
    client.post("/api/keys", json={"name": "a", "kind": "telemetry"}, auth=(org.sdk, ""))
    assert send(app) == 0
    assert receiver.received == []


def test_a_refused_change_writes_no_event(app, client, org, make_key, receiver, sql):
    make_endpoint(client, org.sdk, receiver.url, events=ALL)
    weak = make_key(scopes=["monitor:read"])
    before = sql("SELECT count(*) FROM webhook_events")[0][0]
    refused = client.post(
        "/api/keys",
        json={"name": "x", "kind": "custom", "scopes": ["site:write"]},
        auth=(weak, ""),
    )
    assert refused.status_code == 403
    assert (
        client.put(
            f"/api/keys/{identifier_of(org.sdk)}", json={"name": "x"}, auth=(weak, "")
        ).status_code
        == 403
    )
    assert sql("SELECT count(*) FROM webhook_events")[0][0] == before
    assert sql("SELECT count(*) FROM webhook_deliveries")[0][0] == before


def test_an_event_is_written_in_the_transaction_of_its_change(
    app, org, monkeypatch, client, receiver, sql
):
    """A change whose event cannot be written does not happen: one transaction."""
    from app.audit import outbox as webhook_outbox

    make_endpoint(client, org.sdk, receiver.url)
    keys_before = sql("SELECT count(*) FROM api_keys")[0][0]

    def broken(*args, **kwargs):
        raise RuntimeError("the event could not be written")

    monkeypatch.setattr(webhook_outbox, "new_delivery_id", broken)
    with pytest.raises(RuntimeError):
        client.post("/api/keys", json={"name": "a", "kind": "telemetry"}, auth=(org.sdk, ""))
    assert sql("SELECT count(*) FROM api_keys")[0][0] == keys_before
    assert sql("SELECT count(*) FROM webhook_events")[0][0] == 0


def test_the_official_library_rejects_a_tampered_body_or_an_old_timestamp(
    app, client, org, receiver
):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    client.post("/api/keys", json={"name": "a", "kind": "telemetry"}, auth=(org.sdk, ""))
    send(app)
    (request,) = receiver.wait_for(1)
    hook = Webhook(endpoint["secret"])
    assert hook.verify(request.body, request.headers)["type"] == "key.created"
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60
    assert request.headers["webhook-id"].startswith("msg_")
    assert request.headers["Content-Type"] == "application/json"
    tampered = request.body.replace(b'"name":"a"', b'"name":"b"')
    assert tampered != request.body
    with pytest.raises(WebhookVerificationError):
        hook.verify(tampered, request.headers)
    old = dict(request.headers, **{"webhook-timestamp": str(int(time.time()) - 600)})
    with pytest.raises(WebhookVerificationError):
        hook.verify(request.body, old)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 43 + "=").verify(request.body, request.headers)


def test_a_replaced_secret_signs_beside_the_new_one_for_a_day(app, client, org, receiver, clock):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    renewed = client.post(f"/api/webhooks/{endpoint['id']}/secret", auth=(org.sdk, "")).json
    client.post("/api/keys", json={"name": "a", "kind": "telemetry"}, auth=(org.sdk, ""))
    send(app)
    (request,) = receiver.wait_for(1)
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    assert verified(endpoint["secret"], request) == verified(renewed["secret"], request)
    clock.advance(hours=24, seconds=1)
    client.post("/api/keys", json={"name": "b", "kind": "telemetry"}, auth=(org.sdk, ""))
    send(app)
    _, later = receiver.wait_for(2)
    assert len(later.headers["webhook-signature"].split(" ")) == 1
    assert verified(renewed["secret"], later)["data"]["key"]["name"] == "b"
    with pytest.raises(WebhookVerificationError):
        verified(endpoint["secret"], later)


def test_the_body_is_sent_as_written(app, client, org, receiver):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    client.post("/api/keys", json={"name": "naïve ☃", "kind": "telemetry"}, auth=(org.sdk, ""))
    send(app)
    (request,) = receiver.wait_for(1)
    assert body_of(request)["data"]["key"]["name"] == "naïve ☃"
    assert json.loads(request.body) == verified(endpoint["secret"], request)

"""A disabled endpoint (docs/design.md, "Webhooks"), by its organization or by 3 days of
failures: the events that happen meanwhile are kept for it, held, and none is sent; enabled
again, its pending deliveries are due at once and go out in the order they happened, each
then on the usual retries. An event held longer than WEBHOOK_RETENTION_DAYS is dropped."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.domain.timestamps import from_iso, iso, utcnow
from app.webhooks import sender
from tests import webhooks
from tests.webhooks import deliveries, failing_then, make_endpoint, new_key, payloads

receiver, clock = webhooks.receiver, webhooks.clock  # fixtures


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}


def send(app) -> int:
    return sender.of(app).tick()


def enable(client, org, endpoint: dict, enabled: bool) -> dict:
    response = client.put(
        f"/api/webhooks/{endpoint['id']}", json={"enabled": enabled}, auth=(org.sdk, "")
    )
    assert response.status_code == 200, response.json
    return response.json


def test_enabling_an_endpoint_again_sends_its_pending_deliveries_at_once(
    app, client, org, receiver, clock
):
    """A delivery whose next try is 2 hours away (4 failed tries) when its endpoint is
    disabled and enabled again is due at once, and goes out."""
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    failing_then(receiver, 4)
    new_key(client, org)
    for delay in (0, 5, 300, 1800):
        clock.advance(seconds=delay)
        assert send(app) == 1
    (waiting,) = deliveries(client, org.sdk, endpoint)["data"]
    assert waiting["tries"] == 4
    assert waiting["next_attempt"] > iso(utcnow() + timedelta(hours=1))
    enable(client, org, endpoint, False)
    enabled = enable(client, org, endpoint, True)
    (due,) = deliveries(client, org.sdk, endpoint)["data"]
    assert due["next_attempt"] <= enabled["updated"]
    assert send(app) == 1
    (delivered,) = deliveries(client, org.sdk, endpoint)["data"]
    assert (delivered["status"], delivered["tries"]) == ("delivered", 5)


def test_events_while_disabled_are_held_then_sent_in_order(app, client, org, receiver, clock):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    enable(client, org, endpoint, False)
    for name in ("k0", "k1", "k2"):
        new_key(client, org, name)
        clock.advance(seconds=1)
    assert send(app) == 0
    assert receiver.received == []
    held = deliveries(client, org.sdk, endpoint)
    assert held["total_count"] == 3
    assert [(d["status"], d["tries"]) for d in held["data"]] == [("pending", 0)] * 3
    clock.advance(hours=5)
    enable(client, org, endpoint, True)
    assert send(app) == 3
    got = payloads(endpoint["secret"], receiver.wait_for(3))
    assert [p["data"]["key"]["name"] for p in got] == ["k0", "k1", "k2"]
    statuses = [d["status"] for d in deliveries(client, org.sdk, endpoint)["data"]]
    assert statuses == ["delivered"] * 3


def test_a_held_event_follows_the_usual_retries_once_enabled(app, client, org, receiver, clock):
    """Held a day, then enabled while its receiver still fails: its first try is at once,
    the next 5 s later, as for any new delivery."""
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    enable(client, org, endpoint, False)
    new_key(client, org)
    clock.advance(days=1)
    receiver.answer = lambda request: (503, {})
    enable(client, org, endpoint, True)
    assert send(app) == 1
    (tried,) = deliveries(client, org.sdk, endpoint)["data"]
    assert (tried["status"], tried["tries"]) == ("pending", 1)
    assert tried["next_attempt"] == iso(from_iso(tried["last_attempt"]) + timedelta(seconds=5))


def test_an_event_held_longer_than_the_retention_is_dropped(app, client, org, receiver, clock, sql):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    listening = make_endpoint(client, org.sdk, receiver.url)
    receiver.answer = lambda request: (503, {})
    enable(client, org, endpoint, False)
    new_key(client, org)
    send(app)  # the enabled endpoint's delivery fails, and stays pending
    worker = sender.of(app)
    clock.advance(days=29)
    assert worker.prune() == 0
    assert deliveries(client, org.sdk, endpoint)["total_count"] == 1
    clock.advance(days=2)
    assert worker.prune() == 1
    assert deliveries(client, org.sdk, endpoint)["total_count"] == 0
    assert deliveries(client, org.sdk, listening)["data"][0]["status"] == "pending"
    assert sql("SELECT count(*) FROM webhook_events")[0][0] == 1


def test_an_expiry_is_announced_to_a_disabled_endpoint_and_held(app, client, org, receiver, clock):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=["key.expiring"])
    enable(client, org, endpoint, False)
    new_key(client, org, "expiring", expires_at=iso(utcnow() + timedelta(hours=12)))
    assert sender.of(app).announce_expiries() == 1
    assert send(app) == 0
    enable(client, org, endpoint, True)
    assert send(app) == 1
    (payload,) = payloads(endpoint["secret"], receiver.wait_for(1))
    assert (payload["type"], payload["data"]["key"]["name"]) == ("key.expiring", "expiring")

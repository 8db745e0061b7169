"""A disabled endpoint (CONTRACT.md section 22), by its organization or by 3 days of
failures: enabled again, its pending deliveries are due at once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.domain.timestamps import iso, utcnow
from app.webhooks import sender
from tests import webhooks
from tests.webhooks import deliveries, failing_then, make_endpoint, new_key

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

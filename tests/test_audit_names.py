"""The audit log names what it can: the acting key of every event a key's request made (a
webhook endpoint's too), and an identity by its name, as it names a key."""

from __future__ import annotations

import pytest

from tests.webhooks import make_endpoint


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}


def logged(client, org, action: str) -> list[dict]:
    return client.get(f"/api/audit?action={action}", auth=(org.sdk, "")).json["data"]


def test_an_endpoints_events_name_the_key_that_acted(client, org):
    endpoint = make_endpoint(client, org.sdk, "http://127.0.0.1:9/hook")
    path = f"/api/webhooks/{endpoint['id']}"
    assert client.put(path, json={"description": "x"}, auth=(org.sdk, "")).status_code == 200
    assert client.post(f"{path}/secret", auth=(org.sdk, "")).status_code == 200
    assert client.delete(path, auth=(org.sdk, "")).status_code == 204
    for action in ("webhook.created", "webhook.updated", "webhook.new_secret", "webhook.deleted"):
        [event] = logged(client, org, action)
        assert (event["actor_name"], event["actor_kind"]) == (
            "SDK Integration",
            "sdk_integration",
        ), action


def test_an_identitys_events_name_it(client, org):
    made = client.post(
        "/api/identities",
        json={"external_id": "team/backend", "name": "Backend team"},
        auth=(org.sdk, ""),
    ).json
    path = f"/api/identities/{made['id']}"
    assert client.put(path, json={"name": "Backend"}, auth=(org.sdk, "")).status_code == 200
    assert client.delete(path, auth=(org.sdk, "")).status_code == 204
    names = [
        (logged(client, org, action)[0]["target"], logged(client, org, action)[0]["target_name"])
        for action in ("identity.created", "identity.updated", "identity.deleted")
    ]
    assert names == [
        (made["id"], "Backend team"),
        (made["id"], "Backend"),
        (made["id"], "Backend"),
    ]

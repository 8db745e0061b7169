"""Webhook endpoints (docs/design.md, "Webhooks"): made, read, changed, deleted and given a new
secret by the organization's sdk_integration keys only, at most 20, each change audited."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from app.domain.timestamps import from_iso, iso, utcnow

URL = "http://127.0.0.1:9/hook"
ALL_EVENTS = [
    "key.created",
    "key.updated",
    "key.rotated",
    "key.deleted",
    "key.revoked",
    "key.quota",
    "key.quota_exhausted",
    "key.expiring",
    "key.expired",
]


@pytest.fixture
def app_config() -> dict:
    # The receivers of these tests listen on this machine.
    return {"WEBHOOK_ALLOW_PRIVATE": True}


def create(client, key: str, **body):
    body = {"url": URL, "events": ["key.created"], **body}
    return client.post("/api/webhooks", json=body, auth=(key, ""))


def audit(client, key: str) -> list[dict]:
    return client.get("/api/audit?page_size=200", auth=(key, "")).json["data"]


def test_create_shows_the_endpoint_and_its_secret_once(client, org):
    response = create(
        client,
        org.sdk,
        events=["key.deleted", "key.created", "key.deleted"],
        description="Our alerts",
    )
    assert response.status_code == 201, response.json
    body = response.json
    assert body["id"].startswith("ep_")
    assert response.headers["Location"] == f"/api/webhooks/{body['id']}"
    assert response.headers["Cache-Control"] == "no-store"
    assert body["url"] == URL
    assert body["events"] == ["key.created", "key.deleted"]  # folded, in the table's order
    assert body["description"] == "Our alerts"
    assert body["enabled"] is True
    assert body["failing_since"] is None
    assert body["created"] == body["updated"]
    assert body["previous_secret_expires_at"] is None
    assert body["secret"].startswith("whsec_")
    assert len(base64.b64decode(body["secret"].removeprefix("whsec_"), validate=True)) == 32
    read = client.get(f"/api/webhooks/{body['id']}", auth=(org.sdk, ""))
    assert read.status_code == 200
    assert "secret" not in read.json
    assert read.json == {k: v for k, v in body.items() if "secret" not in k}
    listed = client.get("/api/webhooks", auth=(org.sdk, ""))
    assert listed.json == {"data": [read.json]}


def test_each_change_is_audited_without_the_secret(client, org):
    made = create(client, org.sdk).json
    url = f"/api/webhooks/{made['id']}"
    changed = client.put(url, json={"description": "ops", "events": ALL_EVENTS}, auth=(org.sdk, ""))
    assert changed.status_code == 200, changed.json
    assert changed.json["description"] == "ops"
    assert changed.json["events"] == ALL_EVENTS
    assert changed.json["updated"] > changed.json["created"]
    renewed = client.post(f"{url}/secret", auth=(org.sdk, ""))
    assert renewed.status_code == 200
    assert client.delete(url, auth=(org.sdk, "")).status_code == 204
    events = audit(client, org.sdk)
    actions = [(e["action"], e["target"]) for e in events[:4]]
    assert actions == [
        ("webhook.deleted", made["id"]),
        ("webhook.new_secret", made["id"]),
        ("webhook.updated", made["id"]),
        ("webhook.created", made["id"]),
    ]
    _, rotated, updated, created = events[:4]
    assert created["details"] == {
        "url": URL,
        "events": ["key.created"],
        "description": "",
        "enabled": True,
    }
    assert updated["details"] == {
        "events": [["key.created"], ALL_EVENTS],
        "description": ["", "ops"],
    }
    assert rotated["details"] == {
        "previous_secret_expires_at": renewed.json["previous_secret_expires_at"]
    }
    text = str(events)
    assert made["secret"] not in text and renewed.json["secret"] not in text
    assert "whsec_" not in text


def test_a_new_secret_leaves_the_old_one_a_day(client, org):
    made = create(client, org.sdk).json
    before = utcnow()
    renewed = client.post(f"/api/webhooks/{made['id']}/secret", auth=(org.sdk, "")).json
    assert renewed["secret"] != made["secret"]
    assert renewed["secret"].startswith("whsec_")
    ends = from_iso(renewed["previous_secret_expires_at"])
    assert before + timedelta(hours=24) <= ends <= utcnow() + timedelta(hours=24)


def test_an_update_changes_only_what_it_names(client, org):
    made = create(client, org.sdk, description="keep").json
    url = f"/api/webhooks/{made['id']}"
    body = client.put(url, json={"enabled": False}, auth=(org.sdk, "")).json
    assert body["enabled"] is False
    assert body["description"] == "keep"
    assert body["url"] == URL
    # What was read may be sent back: read-only fields are ignored.
    echoed = client.put(url, json={**body, "enabled": True}, auth=(org.sdk, ""))
    assert echoed.status_code == 200, echoed.json
    assert echoed.json["enabled"] is True
    # Nothing changed: no event.
    unchanged = client.put(url, json={"enabled": True}, auth=(org.sdk, ""))
    assert unchanged.json["updated"] == echoed.json["updated"]
    actions = [e["action"] for e in audit(client, org.sdk)]
    assert actions.count("webhook.updated") == 2


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"url", "events"}),
        ({"url": URL}, {"events"}),
        ({"url": URL, "events": []}, {"events"}),
        ({"url": URL, "events": ["key.used"]}, {"events"}),
        ({"url": URL, "events": "key.created"}, {"events"}),
        ({"url": "ftp://example.com/", "events": ["key.created"]}, {"url"}),
        ({"url": "not a url", "events": ["key.created"]}, {"url"}),
        ({"url": None, "events": ["key.created"]}, {"url"}),
        ({"url": "https://user:pw@example.com/", "events": ["key.created"]}, {"url"}),
        ({"url": "https://example.com/#x", "events": ["key.created"]}, {"url"}),
        ({"url": "https:///nohost", "events": ["key.created"]}, {"url"}),
        ({"url": "https://example.com:99999/", "events": ["key.created"]}, {"url"}),
        ({"url": "https://" + "a" * 2048 + ".com/", "events": ["key.created"]}, {"url"}),
        ({"url": URL, "events": ["key.created"], "description": "x" * 501}, {"description"}),
        ({"url": URL, "events": ["key.created"], "description": "a\x00"}, {"description"}),
        ({"url": URL, "events": ["key.created"], "enabled": "yes"}, {"enabled"}),
        ({"url": URL, "events": ["key.created"], "secret": "x", "color": 1}, {"color"}),
    ],
)
def test_refused_bodies_name_their_fields_and_write_nothing(client, org, body, fields):
    response = client.post("/api/webhooks", json=body, auth=(org.sdk, ""))
    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    assert response.json["code"] == "validation_error"
    assert set(response.json["errors"]) == fields
    assert client.get("/api/webhooks", auth=(org.sdk, "")).json == {"data": []}


def test_an_update_needs_something_to_change(client, org):
    made = create(client, org.sdk).json
    response = client.put(f"/api/webhooks/{made['id']}", json={"id": "x"}, auth=(org.sdk, ""))
    assert response.status_code == 422
    assert set(response.json["errors"]) == {"url", "events", "description", "enabled"}
    bad = client.put(f"/api/webhooks/{made['id']}", json={"events": []}, auth=(org.sdk, ""))
    assert set(bad.json["errors"]) == {"events"}


def test_only_sdk_integration_keys_manage_webhooks(client, org, make_key):
    from app.domain.scopes import SCOPES

    made = create(client, org.sdk).json
    everything = make_key(scopes=SCOPES)
    paths = [
        ("GET", "/api/webhooks"),
        ("POST", "/api/webhooks"),
        ("GET", f"/api/webhooks/{made['id']}"),
        ("PUT", f"/api/webhooks/{made['id']}"),
        ("DELETE", f"/api/webhooks/{made['id']}"),
        ("POST", f"/api/webhooks/{made['id']}/secret"),
        ("GET", f"/api/webhooks/{made['id']}/deliveries"),
        ("POST", f"/api/webhooks/{made['id']}/deliveries/msg_x/retry"),
    ]
    for method, path in paths:
        body = (
            {"json": {"url": URL, "events": ["key.created"]}} if method in ("POST", "PUT") else {}
        )
        for key in (org.telemetry, everything):
            response = client.open(path, method=method, auth=(key, ""), **body)
            assert response.status_code == 403, (method, path)
            assert response.json["code"] == "forbidden"
        anonymous = client.open(path, method=method, **body)
        assert anonymous.status_code == 401
    assert client.get(f"/api/webhooks/{made['id']}", auth=(org.sdk, "")).json["url"] == URL


def test_another_organizations_endpoints_do_not_exist(client, org, other_org):
    made = create(client, org.sdk).json
    for method, path in [
        ("GET", f"/api/webhooks/{made['id']}"),
        ("PUT", f"/api/webhooks/{made['id']}"),
        ("DELETE", f"/api/webhooks/{made['id']}"),
        ("POST", f"/api/webhooks/{made['id']}/secret"),
        ("GET", f"/api/webhooks/{made['id']}/deliveries"),
        ("POST", f"/api/webhooks/{made['id']}/deliveries/msg_x/retry"),
        ("GET", "/api/webhooks/ep_unknown"),
    ]:
        response = client.open(
            path, method=method, json={"enabled": False}, auth=(other_org.sdk, "")
        )
        assert response.status_code == 404, (method, path)
        assert response.json["code"] == "not_found"
    assert client.get("/api/webhooks", auth=(other_org.sdk, "")).json == {"data": []}
    assert client.get(f"/api/webhooks/{made['id']}", auth=(org.sdk, "")).json["enabled"]


def test_at_most_twenty_endpoints_an_organization(client, org, other_org):
    for number in range(20):
        assert create(client, org.sdk, description=str(number)).status_code == 201
    refused = create(client, org.sdk)
    assert refused.status_code == 409
    assert refused.json["code"] == "webhook_limit_reached"
    assert len(client.get("/api/webhooks", auth=(org.sdk, "")).json["data"]) == 20
    assert create(client, other_org.sdk).status_code == 201
    first = client.get("/api/webhooks", auth=(org.sdk, "")).json["data"][0]
    assert [e["description"] for e in [first]] == ["0"]
    client.delete(f"/api/webhooks/{first['id']}", auth=(org.sdk, ""))
    assert create(client, org.sdk).status_code == 201


def test_requests_follow_the_contracts_order(client, org):
    made = create(client, org.sdk).json
    url = f"/api/webhooks/{made['id']}"
    wrong_type = client.put(url, data="{}", content_type="text/plain", auth=(org.sdk, ""))
    assert wrong_type.status_code == 415
    not_json = client.post(
        "/api/webhooks", data="{", content_type="application/json", auth=(org.sdk, "")
    )
    assert not_json.status_code == 400
    assert client.patch(url, auth=(org.sdk, "")).status_code == 405
    assert iso(utcnow()) > made["created"]

"""docs/webhooks.md tells the truth: its Python receiver, examples/webhooks/receiver.py, runs as
written (a real HTTP server on this machine), accepts a real delivery of every event type
and refuses a tampered one; its JSON blocks
are JSON, and its example event has the key object's fields in their order."""

from __future__ import annotations

import base64
import importlib
import json
import re
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from standardwebhooks import Webhook
from werkzeug.serving import make_server

from app.audit.outbox import EVENT_TYPES
from app.domain.timestamps import iso, utcnow
from app.webhooks import sender
from tests import webhooks
from tests.key_fields import KEY_FIELDS
from tests.webhooks import deliveries, make_endpoint

PROJECT = Path(__file__).resolve().parent.parent
PAGE = PROJECT / "docs" / "webhooks.md"
RECEIVER = PROJECT / "examples" / "webhooks" / "receiver.py"
clock = webhooks.clock  # a fixture
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [text for lang, text in BLOCK.findall(PAGE.read_text()) if lang == language]


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}


def test_every_block_is_python_json_or_shown_text():
    assert {lang for lang, _ in BLOCK.findall(PAGE.read_text())} == {"python", "json", "text"}
    for text in blocks("json"):
        json.loads(text)
    (_, event) = (json.loads(text) for text in blocks("json"))
    assert list(event["data"]["key"]) == list(KEY_FIELDS)


def test_the_page_shows_the_receiver_file_as_it_is():
    (source,) = blocks("python")
    assert source == RECEIVER.read_text()


def every_event(client, org, clock) -> dict[str, str]:
    """One event of each type, made as a client and the service's scans make them; what
    each is about, as the receiver names it."""
    auth = (org.sdk, "")

    def new(**body) -> dict:
        body = {"name": "k", "kind": "custom", "scopes": ["monitor:read"]} | body
        made = client.post("/api/keys", json=body, auth=auth)
        assert made.status_code == 201, made.json
        return made.json

    identity = client.post(
        "/api/identities",
        json={"external_id": "team/backend", "quota": {"requests": 1, "period": "day"}},
        auth=auth,
    ).json
    member = new(identity=identity["id"])
    assert client.get("/api/forward-auth", auth=(member["key"], "")).status_code == 204
    limited = new(quota={"requests": 1, "period": "day"})
    assert client.get("/api/forward-auth", auth=(limited["key"], "")).status_code == 204
    path = f"/api/keys/{limited['identifier']}"
    assert client.put(path, json={"name": "k2"}, auth=auth).status_code == 200
    assert client.post(f"{path}/quota", json={"add": 1}, auth=auth).status_code == 200
    rotated = client.post(f"{path}/rotate", json={}, auth=auth).json
    assert client.delete(f"/api/keys/{rotated['identifier']}", auth=auth).status_code == 204
    assert client.post("/api/revoke", json={"keys": [member["key"]]}).status_code == 202
    expiring = new(expires_at=iso(utcnow() + timedelta(days=10)))
    clock.advance(days=3, seconds=1)  # 7 days before its expiry
    sender.of(client.application).announce_expiries()
    clock.advance(days=7)  # just past it
    sender.of(client.application).announce_expiries()
    return {
        "key.created": limited["identifier"] + "...",
        "key.updated": limited["identifier"] + "...",
        "key.rotated": limited["identifier"] + "...",
        "key.deleted": rotated["identifier"] + "...",
        "key.revoked": member["identifier"] + "...",
        "key.quota": limited["identifier"] + "...",
        "key.quota_exhausted": limited["identifier"] + "...",
        "key.expiring": expiring["identifier"] + "...",
        "key.expired": expiring["identifier"] + "...",
        "identity.quota_exhausted": "team/backend",
    }


def test_the_receiver_accepts_every_event_type(app, client, org, clock, monkeypatch):
    server = make_server("127.0.0.1", 0, None)  # its application is the example's
    port = server.socket.getsockname()[1]
    server.server_close()
    url = f"http://127.0.0.1:{port}/api-keys"
    endpoint = make_endpoint(client, org.sdk, url, events=list(EVENT_TYPES))
    monkeypatch.setenv("WEBHOOK_SECRET", endpoint["secret"])
    monkeypatch.delitem(sys.modules, "examples.webhooks.receiver", raising=False)
    example = importlib.import_module("examples.webhooks.receiver")
    receiver = make_server("127.0.0.1", port, example.app)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        about = every_event(client, org, clock)
        while sender.of(app).tick():
            pass
        sent = deliveries(client, org.sdk, endpoint, "?page_size=100")["data"]
        assert {d["payload"]["type"] for d in sent} == set(EVENT_TYPES)
        assert [(d["status"], d["last_status"]) for d in sent] == [("delivered", 204)] * len(sent)
        seen = {(type_, subject) for _, type_, subject in example.seen}
        assert {(type_, about[type_]) for type_ in EVENT_TYPES} <= seen
        assert sorted(i for i, _, _ in example.seen) == sorted(d["id"] for d in sent)
        body = json.dumps(sent[0]["payload"]).encode()
        tampered = example.app.test_client().post(
            "/api-keys",
            data=body,
            headers={
                "webhook-id": sent[0]["id"],
                "webhook-timestamp": "1",
                "webhook-signature": "v1,AAAA",
            },
        )
        assert tampered.status_code == 400
    finally:
        receiver.shutdown()
        receiver.server_close()


def test_the_receiver_accepts_a_type_it_does_not_know(monkeypatch):
    """A type added later is accepted (2xx), not answered 500 and sent again for a day."""
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    monkeypatch.setenv("WEBHOOK_SECRET", secret)
    monkeypatch.delitem(sys.modules, "examples.webhooks.receiver", raising=False)
    example = importlib.import_module("examples.webhooks.receiver")
    body = json.dumps({"type": "organization.renamed", "timestamp": "x", "data": {}})
    now = datetime.now(UTC)
    signature = Webhook(secret).sign("msg_1", now, body)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp()))}
    answer = example.app.test_client().post(
        "/api-keys", data=body, headers=headers | {"webhook-signature": signature}
    )
    assert answer.status_code == 204
    assert example.seen == [("msg_1", "organization.renamed", None)]

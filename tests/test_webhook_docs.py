"""docs/webhooks.md tells the truth: its Python receiver runs as written (a real HTTP server
on this machine) and accepts a real delivery, and refuses a tampered one; its JSON blocks
are JSON, and its example event has the key object's fields in their order."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from app.domain.keyformat import identifier_of
from app.webhooks import sender
from tests.key_fields import KEY_FIELDS
from tests.webhooks import deliveries, make_endpoint

PAGE = Path(__file__).resolve().parent.parent / "docs" / "webhooks.md"
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


def test_the_receiver_runs_as_written(app, client, org, monkeypatch):
    (source,) = blocks("python")
    server = make_server("127.0.0.1", 0, None)  # its application comes from the page
    port = server.socket.getsockname()[1]
    server.server_close()
    endpoint = make_endpoint(client, org.sdk, f"http://127.0.0.1:{port}/api-keys")
    monkeypatch.setenv("WEBHOOK_SECRET", endpoint["secret"])
    namespace: dict = {"__name__": "receiver"}
    exec(compile(source, str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own code
    receiver = make_server("127.0.0.1", port, namespace["app"])
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        made = client.post(
            "/api/keys", json={"name": "a", "kind": "telemetry"}, auth=(org.sdk, "")
        ).json
        sender.of(app).tick()
        (delivery,) = deliveries(client, org.sdk, endpoint)["data"]
        assert delivery["status"] == "delivered"
        assert delivery["last_status"] == 204
        assert namespace["seen"] == [
            (delivery["id"], "key.created", identifier_of(made["key"]) + "...")
        ]
        body = json.dumps(delivery["payload"]).encode()
        tampered = (
            namespace["app"]
            .test_client()
            .post(
                "/api-keys",
                data=body,
                headers={
                    "webhook-id": delivery["id"],
                    "webhook-timestamp": "1",
                    "webhook-signature": "v1,AAAA",
                },
            )
        )
        assert tampered.status_code == 400
    finally:
        receiver.shutdown()
        receiver.server_close()

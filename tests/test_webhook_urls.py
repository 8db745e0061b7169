"""What a webhook URL may be (CONTRACT.md section 22), through POST and PUT /api/webhooks:
one that could never be delivered (a lone surrogate, port 0) is refused with a 422 naming
`url`, never a 500; a path or query with non-ASCII characters is percent-encoded, as
browsers send it, and delivered."""

from __future__ import annotations

import pytest

from app.webhooks import sender
from tests import webhooks
from tests.webhooks import deliveries, make_endpoint, new_key

receiver = webhooks.receiver  # fixture

URL = "http://127.0.0.1:9/hook"


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}  # the receivers listen on this machine


def refused(response, *words: str) -> str:
    """The message of a 422 naming `url` alone, which must hold `words`."""
    assert response.status_code == 422, response.json
    assert response.mimetype == "application/problem+json"
    assert response.json["code"] == "validation_error"
    assert set(response.json["errors"]) == {"url"}
    (message,) = response.json["errors"]["url"]
    for word in words:
        assert word in message
    return message


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:9/\ud800", ["surrogate"]),
        ("http://127.0.0.1:9/hook?team=\udfff", ["surrogate"]),
        ("http://127.0.0.1:0/hook", ["port"]),
        ("http://127.0.0.1:00/hook", ["port"]),
        ("http://127.0.0.1:9/" + "é" * 700, ["2048"]),  # 4,200 characters once encoded
    ],
)
def test_a_url_that_could_never_be_delivered_is_refused_naming_url(client, org, url, words):
    made = make_endpoint(client, org.sdk, URL)
    created = client.post(
        "/api/webhooks", json={"url": url, "events": ["key.created"]}, auth=(org.sdk, "")
    )
    refused(created, *words)
    changed = client.put(f"/api/webhooks/{made['id']}", json={"url": url}, auth=(org.sdk, ""))
    refused(changed, *words)
    listed = client.get("/api/webhooks", auth=(org.sdk, "")).json["data"]
    assert [endpoint["url"] for endpoint in listed] == [URL]


def test_a_non_ascii_path_is_percent_encoded_and_delivered(app, client, org, receiver):
    url = receiver.url + "/événements?équipe=ops&x=%C3%A9"
    endpoint = make_endpoint(client, org.sdk, url)
    encoded = receiver.url + "/%C3%A9v%C3%A9nements?%C3%A9quipe=ops&x=%C3%A9"
    assert endpoint["url"] == encoded
    assert client.get(f"/api/webhooks/{endpoint['id']}", auth=(org.sdk, "")).json["url"] == encoded
    new_key(client, org)
    assert sender.of(app).tick() == 1
    (request,) = receiver.wait_for(1)
    assert request.path == "/hook/%C3%A9v%C3%A9nements?%C3%A9quipe=ops&x=%C3%A9"
    assert deliveries(client, org.sdk, endpoint)["data"][0]["status"] == "delivered"
    changed = client.put(
        f"/api/webhooks/{endpoint['id']}", json={"url": receiver.url + "/ü"}, auth=(org.sdk, "")
    )
    assert changed.json["url"] == receiver.url + "/%C3%BC"

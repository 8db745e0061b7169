"""What a webhook URL may be (docs/design.md, "Webhooks"), through POST and PUT /api/webhooks:
one that could never be delivered (a lone surrogate, port 0) is refused with a 422 naming
`url`, never a 500; a path or query with non-ASCII characters is percent-encoded, as
browsers send it, and delivered; a refusal that WEBHOOK_ALLOW_PRIVATE would lift names
the setting, and the service warns at start while it is on."""

from __future__ import annotations

import logging

import pytest

from app import create_app
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


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://93.184.216.34/hook", ["https", "WEBHOOK_ALLOW_PRIVATE=true"]),
        ("https://127.0.0.1/hook", ["not a public address", "WEBHOOK_ALLOW_PRIVATE=true"]),
        ("https://[::ffff:10.0.0.1]/hook", ["carries 10.0.0.1", "WEBHOOK_ALLOW_PRIVATE=true"]),
    ],
)
def test_a_refusal_the_setting_would_lift_names_it(make_app, database_url, org, url, words):
    client = make_app(SQLALCHEMY_DATABASE_URI=database_url).test_client()
    response = client.post(
        "/api/webhooks", json={"url": url, "events": ["key.created"]}, auth=(org.sdk, "")
    )
    refused(response, *words)


def test_a_refusal_the_setting_would_not_lift_does_not_name_it(make_app, database_url, org):
    client = make_app(SQLALCHEMY_DATABASE_URI=database_url).test_client()
    response = client.post(
        "/api/webhooks",
        json={"url": "ftp://93.184.216.34/hook", "events": ["key.created"]},
        auth=(org.sdk, ""),
    )
    assert "WEBHOOK_ALLOW_PRIVATE" not in refused(response, "https")


@pytest.mark.parametrize("allowed", [True, False])
def test_the_service_warns_at_start_while_private_targets_are_allowed(
    database_url, caplog, allowed
):
    with caplog.at_level(logging.WARNING):
        made = create_app(
            {
                "TESTING": True,
                "SQLALCHEMY_DATABASE_URI": database_url,
                "WEBHOOK_ALLOW_PRIVATE": allowed,
                "WEBHOOK_SENDER_ENABLED": False,
            }
        )
    warned = [r for r in caplog.records if "WEBHOOK_ALLOW_PRIVATE" in r.getMessage()]
    if allowed:
        (warning,) = warned
        assert warning.levelno == logging.WARNING
        assert "production" in warning.getMessage()
    else:
        assert warned == []
    sender.of(made).stop()

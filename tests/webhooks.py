"""What the webhook tests share: a receiver fixture, a clock the tests move, and the
deliveries a receiver got, verified by the official Standard Webhooks library."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from standardwebhooks import Webhook

from app.domain import timestamps
from tests.receivers import Received, Receiver, start_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = start_receiver()
    yield started
    started.stop()


class Clock:
    """timestamps.utcnow() moved by `offset`: what the sender and its scans read."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def advance(self, **delta: float) -> None:
        self.offset += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    moved = Clock()
    real = timestamps.utcnow
    monkeypatch.setattr(timestamps, "utcnow", lambda: real() + moved.offset)
    return moved


def verified(secret: str, request: Received) -> dict:
    """The payload of a request, which the official library must verify."""
    return Webhook(secret).verify(request.body, request.headers)


def payloads(secret: str, requests: list[Received]) -> list[dict]:
    return [verified(secret, request) for request in requests]


def make_endpoint(client, key: str, url: str, events=("key.created",), **body) -> dict:
    response = client.post(
        "/api/webhooks", json={"url": url, "events": list(events), **body}, auth=(key, "")
    )
    assert response.status_code == 201, response.json
    return response.json


def deliveries(client, key: str, endpoint: dict, query: str = "") -> dict:
    response = client.get(f"/api/webhooks/{endpoint['id']}/deliveries{query}", auth=(key, ""))
    assert response.status_code == 200, response.json
    return response.json


def body_of(request: Received) -> dict:
    return json.loads(request.body)


def new_key(client, org, name: str = "a", **body) -> dict:
    response = client.post(
        "/api/keys", json={"name": name, "kind": "telemetry", **body}, auth=(org.sdk, "")
    )
    assert response.status_code == 201, response.json
    return response.json


def failing_then(receiver: Receiver, failures: int, status: int = 500) -> None:
    """The receiver answers `status` `failures` times, then 204."""
    count = [0]

    def answer(request: Received) -> tuple[int, dict[str, str]]:
        count[0] += 1
        return (status, {}) if count[0] <= failures else (204, {})

    receiver.answer = answer

"""Each try held by one sender (docs/design.md, "Webhooks", "Many hosts"): a sender claims a
delivery right before its try, under a lease that outlasts the try, so that however slowly a
receiver answers within the 5 s timeout no other sender sends the delivery meanwhile, and each try
is counted once."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from app.webhooks import sender
from tests import webhooks
from tests.webhooks import deliveries, make_endpoint, new_key

receiver, clock = webhooks.receiver, webhooks.clock  # fixtures

LEASE = 6.0  # seconds: a little more than a try's 5


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True, "WEBHOOK_LEASE_SECONDS": LEASE}


def another_worker(make_app, database_url) -> sender.Sender:
    """A second application on the test's database, as a second worker."""
    other = make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        WEBHOOK_ALLOW_PRIVATE=True,
        WEBHOOK_LEASE_SECONDS=LEASE,
    )
    return sender.of(other)


def test_a_slow_receiver_gets_each_event_once_from_two_senders(
    app, make_app, database_url, client, org, receiver, sql
):
    """A receiver that takes 2 s to answer, and 4 events: sent one after another they take
    longer than a lease (6 s), and two senders look for due tries all along. Each event
    arrives once, and each delivery counts the one try it had."""
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    events = 4
    for number in range(events):
        new_key(client, org, f"k{number}")
    receiver.delay = 2.0
    workers = [sender.of(app), another_worker(make_app, database_url)]
    deadline = time.monotonic() + 15

    def undelivered() -> int:
        return sql("SELECT count(*) FROM webhook_deliveries WHERE status != 'delivered'")[0][0]

    def run(worker: sender.Sender) -> None:
        while time.monotonic() < deadline and undelivered():
            worker.deliver_due()
            time.sleep(0.05)

    threads = [threading.Thread(target=run, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [request.headers["webhook-id"] for request in receiver.received]
    assert len(ids) == events, f"{len(ids)} requests for {events} events"
    assert len(set(ids)) == events
    listed = deliveries(client, org.sdk, endpoint)["data"]
    assert [(d["status"], d["tries"]) for d in listed] == [("delivered", 1)] * events
    assert sorted(d["id"] for d in listed) == sorted(ids)


def test_a_slow_resolution_does_not_let_another_sender_take_the_try(
    app, make_app, database_url, client, org, receiver, clock, monkeypatch
):
    """The address check before a try (a name resolved) took 4 s of the 6 s lease, and the
    receiver answers 3 s later: the lease is renewed before the request goes, so the other
    sender, looking meanwhile, finds nothing due."""
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    new_key(client, org)
    other = another_worker(make_app, database_url)
    resolve = socket.getaddrinfo
    resolved = threading.Event()

    def slow_resolution(*args, **kwargs):
        if not resolved.is_set():  # the check's, before the first try
            resolved.set()
            clock.advance(seconds=4)
        return resolve(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow_resolution)
    looked: list[int] = []
    asked = threading.Event()

    def answer(request):
        clock.advance(seconds=3)
        if not asked.is_set():  # the other sender looks while the first try is under way
            asked.set()
            looked.append(other.deliver_due())
        return 204, {}

    receiver.answer = answer
    assert sender.of(app).deliver_due() == 1
    assert looked == [0]
    assert len(receiver.received) == 1
    (listed,) = deliveries(client, org.sdk, endpoint)["data"]
    assert (listed["status"], listed["tries"]) == ("delivered", 1)

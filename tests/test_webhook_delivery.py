"""Delivery (docs/design.md, "Webhooks"): at least once, retried on growing delays for more than
a day with the same webhook-id, each try claimed by exactly one sender, an endpoint failing
for 3 days disabled; expiring keys announced once each, whichever worker looks; the
deliveries listed and retried. The clock is the tests' (tests/webhooks.py)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from app.config import DEFAULTS
from app.domain.keyformat import identifier_of
from app.domain.timestamps import iso, utcnow
from app.webhooks import sender
from tests import webhooks
from tests.webhooks import deliveries, failing_then, make_endpoint, new_key, payloads, verified

receiver, clock = webhooks.receiver, webhooks.clock  # fixtures

ALL = [
    "key.created",
    "key.updated",
    "key.rotated",
    "key.deleted",
    "key.revoked",
    "key.expiring",
    "key.expired",
]


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}


def send(app) -> int:
    return sender.of(app).tick()


def test_the_default_retries_last_more_than_a_day_on_growing_delays():
    delays = DEFAULTS["WEBHOOK_RETRY_DELAYS"]
    assert list(delays) == sorted(delays)
    assert delays[0] < delays[-1]
    assert sum(delays) >= 24 * 3600


def test_a_receiver_that_fails_then_recovers_gets_the_event_with_one_id(
    app, client, org, receiver, clock
):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    failing_then(receiver, 2)
    new_key(client, org)
    assert send(app) == 1
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["status"] == "pending"
    assert listed["tries"] == 1
    assert listed["last_status"] == 500
    assert listed["last_error"] == "answered 500"
    assert listed["event"] == "key.created"
    assert listed["next_attempt"] > listed["last_attempt"]
    assert send(app) == 0  # not due yet
    clock.advance(seconds=5)
    assert send(app) == 1
    assert send(app) == 0
    clock.advance(seconds=300)
    assert send(app) == 1
    got = receiver.wait_for(3)
    assert len({request.headers["webhook-id"] for request in got}) == 1
    assert got[0].body == got[2].body
    payloads(endpoint["secret"], got)  # each try verifies
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["status"] == "delivered"
    assert listed["tries"] == 3
    assert listed["last_status"] == 204
    assert listed["last_error"] is None
    assert listed["next_attempt"] is None
    assert listed["id"] == got[0].headers["webhook-id"]
    endpoint_now = client.get(f"/api/webhooks/{endpoint['id']}", auth=(org.sdk, "")).json
    assert endpoint_now["failing_since"] is None


def test_a_delivery_fails_when_its_tries_are_spent(app, client, org, receiver, clock):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    failing_then(receiver, 100, status=503)
    new_key(client, org)
    for delay in (0, *DEFAULTS["WEBHOOK_RETRY_DELAYS"]):
        clock.advance(seconds=delay)
        assert send(app) == 1
    clock.advance(days=2)
    assert send(app) == 0
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["status"] == "failed"
    assert listed["tries"] == 1 + len(DEFAULTS["WEBHOOK_RETRY_DELAYS"])
    assert listed["next_attempt"] is None
    assert len(receiver.received) == listed["tries"]
    failed = deliveries(client, org.sdk, endpoint, "?status=failed")
    assert failed["total_count"] == 1
    assert deliveries(client, org.sdk, endpoint, "?status=pending")["total_count"] == 0


def test_an_endpoint_failing_for_three_days_is_disabled_and_audited(
    app, client, org, receiver, clock
):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    failing_then(receiver, 1000)
    new_key(client, org)
    send(app)
    first = client.get(f"/api/webhooks/{endpoint['id']}", auth=(org.sdk, "")).json
    assert first["failing_since"] is not None
    clock.advance(days=2, hours=23)
    new_key(client, org, "b")
    send(app)
    assert client.get(f"/api/webhooks/{endpoint['id']}", auth=(org.sdk, "")).json["enabled"]
    clock.advance(hours=1)
    new_key(client, org, "c")
    send(app)
    now = client.get(f"/api/webhooks/{endpoint['id']}", auth=(org.sdk, "")).json
    assert now["enabled"] is False
    assert now["failing_since"] == first["failing_since"]
    events = client.get("/api/audit?action=webhook.disabled", auth=(org.sdk, "")).json
    assert events["total_count"] == 1
    (event,) = events["data"]
    assert event["target"] == endpoint["id"]
    assert event["actor"] == "operator"
    # Disabled: nothing more is sent; what happens meanwhile is held for it.
    count = len(receiver.received)
    clock.advance(days=1)
    new_key(client, org, "d")
    send(app)
    assert len(receiver.received) == count
    # Enabled again, its failures are forgotten and its pending deliveries go out.
    receiver.answer = lambda request: (200, {})
    enabled = client.put(
        f"/api/webhooks/{endpoint['id']}", json={"enabled": True}, auth=(org.sdk, "")
    ).json
    assert enabled["failing_since"] is None
    assert send(app) == 4
    names = {verified(endpoint["secret"], r)["data"]["key"]["name"] for r in receiver.received}
    assert names == {"a", "b", "c", "d"}


def test_a_success_resets_the_failures(app, client, org, receiver, clock):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    failing_then(receiver, 1)
    new_key(client, org)
    send(app)
    clock.advance(seconds=5)
    send(app)
    clock.advance(days=4)
    receiver.answer = lambda request: (500, {})
    new_key(client, org, "b")
    send(app)
    now = client.get(f"/api/webhooks/{endpoint['id']}", auth=(org.sdk, "")).json
    assert now["enabled"] is True
    assert now["failing_since"] is not None


def test_a_redirect_is_not_followed(app, client, org, receiver, clock):
    target = webhooks.start_receiver()
    try:
        receiver.answer = lambda request: (307, {"Location": target.url})
        endpoint = make_endpoint(client, org.sdk, receiver.url)
        new_key(client, org)
        send(app)
        assert len(receiver.received) == 1
        assert target.received == []
        listed = deliveries(client, org.sdk, endpoint)["data"][0]
        assert listed["status"] == "pending"
        assert listed["last_status"] == 307
    finally:
        target.stop()


def test_a_receiver_that_does_not_answer_in_five_seconds_fails_the_try(app, client, org, receiver):
    receiver.delay = 9.0
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    new_key(client, org)
    started = utcnow()
    send(app)
    took = utcnow() - started
    # Cut at 5 s, not after the receiver's 9 (a loaded machine took 6.3 s to get there).
    assert timedelta(seconds=4.9) <= took < timedelta(seconds=8.5)
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["status"] == "pending"
    assert listed["last_status"] is None
    assert listed["last_error"] == "timed out: no answer within 5 s"


def test_a_receiver_that_cannot_be_reached_fails_the_try(app, client, org, receiver):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    receiver.stop()
    new_key(client, org)
    send(app)
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["last_error"].startswith("no answer")
    receiver.server = webhooks.start_receiver().server  # for the fixture's stop


def test_two_senders_never_both_send_one_try(app, make_app, database_url, client, org, receiver):
    """Two applications on one database, as two workers: each try is sent once."""
    make_endpoint(client, org.sdk, receiver.url)
    count = 60
    for number in range(count):
        new_key(client, org, f"k{number}")
    others = [
        make_app(SQLALCHEMY_DATABASE_URI=database_url, WEBHOOK_ALLOW_PRIVATE=True) for _ in range(2)
    ]
    senders = [sender.of(app)] + [sender.of(other) for other in others]
    sent = [0] * len(senders)
    start = threading.Barrier(len(senders))

    def run(index: int) -> None:
        start.wait()
        sent[index] = senders[index].tick()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(senders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    got = receiver.wait_for(count)
    ids = [request.headers["webhook-id"] for request in got]
    assert len(ids) == len(set(ids)) == count
    assert sum(sent) == count
    assert send(app) == 0


def test_a_try_whose_sender_died_is_taken_over_after_its_lease(
    app, client, org, receiver, clock, sql
):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    new_key(client, org)
    # A sender claimed the try, then died: its claim stays, under lease.
    lease_until = utcnow() + timedelta(seconds=30)
    sql(
        "UPDATE webhook_deliveries SET claim = 'dead', tries = 1, lease_until = :until",
        until=lease_until,
    )
    assert send(app) == 0
    busy = client.post(
        f"/api/webhooks/{endpoint['id']}/deliveries/"
        f"{deliveries(client, org.sdk, endpoint)['data'][0]['id']}/retry",
        auth=(org.sdk, ""),
    )
    assert busy.status_code == 409
    assert busy.json["code"] == "delivery_in_progress"
    clock.advance(seconds=31)
    assert send(app) == 1
    (request,) = receiver.wait_for(1)
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["tries"] == 2
    assert listed["status"] == "delivered"
    assert request.headers["webhook-id"] == listed["id"]


def test_deliveries_are_listed_newest_first_in_pages(app, client, org, receiver):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=["key.created", "key.deleted"])
    made = [new_key(client, org, f"k{n}") for n in range(3)]
    client.delete(f"/api/keys/{identifier_of(made[0]['key'])}", auth=(org.sdk, ""))
    send(app)
    page = deliveries(client, org.sdk, endpoint, "?page_size=2")
    assert page["total_count"] == 4
    assert page["page"] == 1 and page["page_size"] == 2
    assert [d["event"] for d in page["data"]] == ["key.deleted", "key.created"]
    assert page["data"][0]["payload"]["data"]["key"]["name"] == "k0"
    second = deliveries(client, org.sdk, endpoint, "?page=2&page_size=2")
    assert [d["payload"]["data"]["key"]["name"] for d in second["data"]] == ["k1", "k0"]
    assert deliveries(client, org.sdk, endpoint, "?page=3&page_size=2")["data"] == []
    for query in ("?page=0", "?page_size=201", "?status=lost", "?page=x"):
        response = client.get(
            f"/api/webhooks/{endpoint['id']}/deliveries{query}", auth=(org.sdk, "")
        )
        assert response.status_code == 422, query


def test_a_delivery_can_be_sent_again_with_its_id(app, client, org, receiver):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    new_key(client, org)
    send(app)
    (delivery,) = deliveries(client, org.sdk, endpoint)["data"]
    assert delivery["status"] == "delivered"
    url = f"/api/webhooks/{endpoint['id']}/deliveries/{delivery['id']}/retry"
    retried = client.post(url, auth=(org.sdk, ""))
    assert retried.status_code == 202
    assert retried.json["status"] == "pending"
    assert retried.json["id"] == delivery["id"]
    assert send(app) == 1
    first, again = receiver.wait_for(2)
    assert first.headers["webhook-id"] == again.headers["webhook-id"] == delivery["id"]
    assert deliveries(client, org.sdk, endpoint)["data"][0]["tries"] == 2
    unknown = client.post(
        f"/api/webhooks/{endpoint['id']}/deliveries/msg_nothing/retry", auth=(org.sdk, "")
    )
    assert unknown.status_code == 404


def test_a_deleted_endpoint_gets_nothing_more(app, client, org, receiver):
    endpoint = make_endpoint(client, org.sdk, receiver.url)
    new_key(client, org)
    client.delete(f"/api/webhooks/{endpoint['id']}", auth=(org.sdk, ""))
    assert send(app) == 0
    assert receiver.received == []


def expiring_key(client, org, days: float) -> dict:
    moment = utcnow() + timedelta(days=days)
    return new_key(client, org, "expiring", expires_at=iso(moment))


def test_an_expiring_key_is_announced_once_at_each_notice_whichever_worker_looks(
    app, make_app, database_url, client, org, receiver, clock
):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=["key.expiring", "key.expired"])
    key = expiring_key(client, org, days=10)
    other = sender.of(make_app(SQLALCHEMY_DATABASE_URI=database_url, WEBHOOK_ALLOW_PRIVATE=True))
    workers = [sender.of(app), other]

    def look() -> list[dict]:
        for worker in workers:
            worker.announce_expiries()
            worker.deliver_due()
        return payloads(endpoint["secret"], receiver.received)

    assert look() == []
    clock.advance(days=3, seconds=1)  # 7 days before
    got = look()
    assert [p["type"] for p in got] == ["key.expiring"]
    assert got[0]["data"]["key"]["key"] == identifier_of(key["key"]) + "..."
    assert got[0]["data"]["key"]["expires_at"] == key["expires_at"]
    assert got[0]["data"]["actor"] == "operator"
    assert len(look()) == 1
    clock.advance(days=6)  # 1 day before
    assert [p["type"] for p in look()] == ["key.expiring", "key.expiring"]
    clock.advance(days=1)  # expired
    assert [p["type"] for p in look()] == ["key.expiring", "key.expiring", "key.expired"]
    clock.advance(hours=1)
    assert len(look()) == 3
    events = client.get("/api/audit?key=" + identifier_of(key["key"]), auth=(org.sdk, ""))
    actions = [(e["action"], e["details"].get("notice")) for e in events.json["data"]]
    assert actions[:3] == [
        ("key.expired", "expired"),
        ("key.expiring", "1d"),
        ("key.expiring", "7d"),
    ]


def test_a_key_made_close_to_its_end_gets_the_latest_notice_only(app, client, org, receiver, clock):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=["key.expiring"])
    expiring_key(client, org, days=0.5)
    sender.of(app).announce_expiries()
    send(app)
    (payload,) = payloads(endpoint["secret"], receiver.wait_for(1))
    assert payload["type"] == "key.expiring"
    events = client.get("/api/audit?action=key.expiring", auth=(org.sdk, "")).json["data"]
    assert [e["details"]["notice"] for e in events] == ["1d"]


def test_expiries_are_announced_only_to_organizations_that_listen(
    app, client, org, receiver, clock, sql
):
    make_endpoint(client, org.sdk, receiver.url, events=["key.created"])
    expiring_key(client, org, days=0.5)
    assert sender.of(app).announce_expiries() == 0
    assert sql("SELECT count(*) FROM key_announcements")[0][0] == 0


def test_a_moved_expiry_is_announced_again(app, client, org, receiver, clock):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=["key.expiring"])
    key = expiring_key(client, org, days=0.5)
    sender.of(app).announce_expiries()
    later = iso(utcnow() + timedelta(days=0.7))
    client.put(
        f"/api/keys/{identifier_of(key['key'])}", json={"expires_at": later}, auth=(org.sdk, "")
    )
    sender.of(app).announce_expiries()
    send(app)
    got = payloads(endpoint["secret"], receiver.wait_for(2))
    assert [p["data"]["key"]["expires_at"] for p in got] == [key["expires_at"], later]


def test_the_sender_thread_delivers_without_help(make_app, database_url, org, receiver):
    served = make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        WEBHOOK_ALLOW_PRIVATE=True,
        WEBHOOK_POLL_SECONDS=0.05,
        WEBHOOK_SENDER_ENABLED=True,  # make_app's apps run none unless asked
    )
    client = served.test_client()
    endpoint = make_endpoint(client, org.sdk, receiver.url)  # its first request starts it
    new_key(client, org)
    (request,) = receiver.wait_for(1)
    assert verified(endpoint["secret"], request)["type"] == "key.created"
    sender.of(served).stop()
    assert not sender.of(served).thread.is_alive()


def test_the_sender_thread_outlives_a_database_that_fails(make_app, new_database, caplog):
    served = make_app(SQLALCHEMY_DATABASE_URI=new_database(), WEBHOOK_POLL_SECONDS=0.05)
    worker = sender.of(served)
    worker.start()
    deadline = utcnow() + timedelta(seconds=5)
    while utcnow() < deadline and "a round failed" not in caplog.text:
        threading.Event().wait(0.05)
    assert "webhooks: a round failed: " in caplog.text  # the error's type, no more
    assert "Traceback" not in caplog.text
    assert worker.thread.is_alive()
    worker.stop()
    assert not worker.thread.is_alive()


def test_an_answer_that_is_not_http_fails_the_try(app, client, org):
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def babble() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"hello, this is no HTTP\r\n\r\n")

    thread = threading.Thread(target=babble, daemon=True)
    thread.start()
    try:
        endpoint = make_endpoint(client, org.sdk, f"http://127.0.0.1:{port}/hook")
        new_key(client, org)
        assert send(app) == 1
        listed = deliveries(client, org.sdk, endpoint)["data"][0]
        assert listed["last_error"] == "no answer: BadStatusLine"
        assert listed["status"] == "pending"
    finally:
        thread.join(timeout=5)
        listener.close()


def test_start_all_starts_the_senders_that_may_run(make_app, database_url, org):
    running = make_app(
        SQLALCHEMY_DATABASE_URI=database_url, WEBHOOK_POLL_SECONDS=0.05, WEBHOOK_SENDER_ENABLED=True
    )
    idle = make_app(SQLALCHEMY_DATABASE_URI=database_url, WEBHOOK_SENDER_ENABLED=False)
    sender.start_all()
    assert sender.of(running).thread.is_alive()
    assert sender.of(idle).thread is None
    sender.stop_all()
    assert not sender.of(running).thread.is_alive()


def test_finished_deliveries_are_kept_for_the_retention_then_removed(
    app, client, org, receiver, clock, sql
):
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=["key.created", "key.expiring"])
    new_key(client, org, "delivered")
    send(app)
    expiring_key(client, org, days=0.5)  # its key.created and its key.expiring
    receiver.answer = lambda request: (500, {})
    sender.of(app).announce_expiries()
    send(app)
    worker = sender.of(app)
    clock.advance(days=29)
    assert worker.prune() == 0
    assert deliveries(client, org.sdk, endpoint)["total_count"] == 3
    clock.advance(days=2)
    assert worker.prune() == 1
    left = deliveries(client, org.sdk, endpoint)["data"]
    assert [d["status"] for d in left] == ["pending", "pending"]
    assert sql("SELECT count(*) FROM webhook_events")[0][0] == 2
    assert sql("SELECT count(*) FROM key_announcements")[0][0] == 0  # expired long ago


def test_a_used_up_quota_is_announced_once_a_period(app, client, org, receiver):
    """key.quota_exhausted (docs/design.md, "Webhooks", "Identities"): the use that used up a quota
    records it, once for its period, whichever worker served it; a grant and a new use-up in
    the same period is not announced again. The audit log has it too."""
    endpoint = make_endpoint(client, org.sdk, receiver.url, events=["key.quota_exhausted"])
    quota = {"requests": 1, "period": "day"}
    key = new_key(client, org, kind="custom", scopes=["monitor:read"], quota=quota)["key"]
    assert client.get("/api/forward-auth", auth=(key, "")).status_code == 204
    grant = f"/api/keys/{identifier_of(key)}/quota"
    assert client.post(grant, json={"add": 1}, auth=(org.sdk, "")).status_code == 200
    assert client.get("/api/forward-auth", auth=(key, "")).status_code == 204
    assert client.get("/api/forward-auth", auth=(key, "")).status_code == 429
    send(app)
    (payload,) = payloads(endpoint["secret"], receiver.wait_for(1))
    assert payload["type"] == "key.quota_exhausted"
    assert (payload["data"]["key"]["quota"], payload["data"]["key"]["quota_remaining"]) == (
        quota,
        0,
    )
    events = client.get("/api/audit?action=key.quota_exhausted", auth=(org.sdk, "")).json
    assert [event["details"] for event in events["data"]] == [{"quota": quota}]

"""A check finds its key among the rows its worker has seen (app/access/seen.py) while the
generation it read them under is current: no database read, and every write made through
the service reaches the next check, whatever module makes it (one place bumps: the
session's events)."""

from __future__ import annotations

import os
import socket
import time
import traceback
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis
from sqlalchemy import create_engine, text

from app.access import counting, seen
from app.access.counting import host
from app.domain import keyformat

FORWARD = "/api/forward-auth"
GENERATION = f"api-keys/{counting.GENERATION}"


def generation(app) -> int | None:
    limits = app.extensions["limits"]
    return counting.generation(limits.storage, limits.generation_key)


def disable_by_hand(database_url: str, key: str) -> None:
    """`key` disabled by SQL beside the service: a change no bump tells."""
    engine = create_engine(database_url)
    with engine.begin() as connection:
        change = "UPDATE api_keys SET enabled = false WHERE identifier = :i"
        connection.execute(text(change), {"i": keyformat.identifier_of(key)})
    engine.dispose()


def test_a_change_by_hand_is_seen_at_the_next_write_through_the_service(
    client, org, make_key, database_url
):
    """What a worker serves from memory: a change made to the database by hand (not through
    the service) is not seen until a write through the service bumps the generation."""
    key = make_key()
    assert client.get(FORWARD, auth=(key, "")).status_code == 204
    disable_by_hand(database_url, key)
    assert client.get(FORWARD, auth=(key, "")).status_code == 204  # the row seen
    other = make_key(name="another")  # any write of a key through the service
    assert client.get(FORWARD, auth=(other, "")).status_code == 204
    assert client.get(FORWARD, auth=(key, "")).json["code"] == "disabled_key"


def test_no_row_is_served_longer_than_its_bound_after_its_read(
    client, org, make_key, database_url, monkeypatch
):
    """What no bump tells (here a change by hand) is seen once the row is ROW_SECONDS old."""
    monkeypatch.setattr(seen, "ROW_SECONDS", 0.5)
    key = make_key()
    assert client.get(FORWARD, auth=(key, "")).status_code == 204
    disable_by_hand(database_url, key)
    time.sleep(0.6)
    assert client.get(FORWARD, auth=(key, "")).json["code"] == "disabled_key"


def test_counts_in_a_processs_memory_keep_no_rows(make_app, database_url, org, make_key):
    """memory:// is this process's alone: no command or other process could bump it."""
    app = make_app(SQLALCHEMY_DATABASE_URI=database_url, RATELIMIT_STORAGE_URI="memory://")
    key = make_key()
    assert app.test_client().get(FORWARD, auth=(key, "")).status_code == 204
    assert app.extensions["seen"].rows == {}


def test_a_use_writes_last_used_once_per_resolution_though_its_row_is_seen(
    client, org, make_key, sql
):
    key = make_key()
    for _ in range(5):
        assert client.get(FORWARD, auth=(key, "")).status_code == 204
    [(last_used,)] = sql(
        "SELECT last_used FROM api_keys WHERE identifier = :i", i=keyformat.identifier_of(key)
    )
    assert last_used is not None
    forget = "UPDATE api_keys SET last_used = NULL WHERE identifier = :i"
    sql(forget, i=keyformat.identifier_of(key))
    assert client.get(FORWARD, auth=(key, "")).status_code == 204
    # Written once by this worker within the resolution: not again for the row it keeps.
    assert sql(
        "SELECT last_used FROM api_keys WHERE identifier = :i", i=keyformat.identifier_of(key)
    ) == [(None,)]


# Each write through the API that changes what a check decides, and what the key's next
# check answers after it.
def _revoke(client, org, key, reference):
    return client.delete(f"/api/keys/{reference}", auth=(org.sdk, ""))


def _disable(client, org, key, reference):
    return client.put(f"/api/keys/{reference}", json={"enabled": False}, auth=(org.sdk, ""))


def _narrow(client, org, key, reference):
    return client.put(f"/api/keys/{reference}", json={"scopes": ["site:read"]}, auth=(org.sdk, ""))


def _expire(client, org, key, reference):
    ends = datetime.now(UTC) + timedelta(seconds=1)
    body = {"expires_at": ends.isoformat().replace("+00:00", "Z")}
    answer = client.put(f"/api/keys/{reference}", json=body, auth=(org.sdk, ""))
    time.sleep(max(0.0, (ends - datetime.now(UTC)).total_seconds()) + 0.05)
    return answer


def _fence(client, org, key, reference):
    body = {"allowed_ips": ["192.0.2.1"]}
    return client.put(f"/api/keys/{reference}", json=body, auth=(org.sdk, ""))


def _limit(client, org, key, reference):
    body = {"quota": {"requests": 1, "period": "day"}}
    return client.put(f"/api/keys/{reference}", json=body, auth=(org.sdk, ""))


def _rotate(client, org, key, reference):
    return client.post(f"/api/keys/{reference}/rotate", json={}, auth=(org.sdk, ""))


def _identity_quota(client, org, key, reference):
    body = {"external_id": uuid.uuid4().hex}
    made = client.post("/api/identities", json=body, auth=(org.sdk, ""))
    assert made.status_code == 201, made.json
    identity = made.json["id"]
    joined = client.put(f"/api/keys/{reference}", json={"identity": identity}, auth=(org.sdk, ""))
    assert joined.status_code == 200, joined.json
    assert client.get(FORWARD, auth=(key, "")).status_code == 204  # seen with the identity
    body = {"quota": {"requests": 1, "period": "lifetime"}}
    return client.put(f"/api/identities/{identity}", json=body, auth=(org.sdk, ""))


def _report_leak(client, org, key, reference):
    return client.post("/api/revoke", json={"keys": [key]})


WRITES = {
    _revoke: (401, "unauthorized"),
    _report_leak: (401, "unauthorized"),
    _disable: (401, "disabled_key"),
    _narrow: (403, "forbidden"),
    _expire: (401, "expired_key"),
    _fence: (403, "ip_not_allowed"),
    _limit: (204, None),  # the first use of its quota, then:
    _rotate: (401, "unauthorized"),  # replaced at once (no grace period asked)
    _identity_quota: (204, None),
}


@pytest.mark.parametrize("write", list(WRITES), ids=[w.__name__[1:] for w in WRITES])
def test_a_write_through_the_service_reaches_the_next_check(
    client, org, make_key, app, write, statements
):
    key = make_key(scopes=("monitor:read", "site:read"))
    reference = keyformat.identifier_of(key)
    check = f"{FORWARD}?scope=monitor:read"
    assert client.get(check, auth=(key, "")).status_code == 204
    with statements() as read:
        assert client.get(check, auth=(key, "")).status_code == 204
    assert read == []  # served from the row seen
    before = generation(app)
    answer = write(client, org, key, reference)
    assert answer.status_code < 300, answer.json
    assert generation(app) != before
    status, code = WRITES[write]
    after = client.get(check, auth=(key, ""))
    assert after.status_code == status, after.json
    if code:
        assert after.json["code"] == code
    if write in (_limit, _identity_quota):  # the quota of 1 binds from the next use
        assert client.get(check, auth=(key, "")).json["code"] == "quota_exceeded"


def test_a_use_and_a_read_bump_nothing(client, org, make_key, app, sql, monkeypatch):
    key = make_key()
    before = generation(app)
    limits = app.extensions["limits"]
    bumps = []  # where each bump came from, for the message of a failure
    bump = limits.bump
    monkeypatch.setattr(
        limits, "bump", lambda: (bumps.append("".join(traceback.format_stack(limit=12))), bump())
    )
    assert client.get(FORWARD, auth=(key, "")).status_code == 204  # its last_used written
    [(last_used,)] = sql(
        "SELECT last_used FROM api_keys WHERE identifier = :i", i=keyformat.identifier_of(key)
    )
    assert last_used is not None
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert client.get("/api/audit", auth=(org.sdk, "")).status_code == 200
    assert generation(app) == before, "\n".join(bumps)


def test_a_write_that_fails_bumps_nothing(client, org, app):
    before = generation(app)
    answer = client.post("/api/keys", json={"name": "x", "kind": "nope"}, auth=(org.sdk, ""))
    assert answer.status_code == 422
    assert generation(app) == before


def test_a_counts_file_without_a_generation_is_lengthened_and_keeps_its_counts(tmp_path):
    path = tmp_path / "limits.counts"
    counts = host.HostCounts(f"host://{path}")
    counts.incr("a", 60, amount=3)
    counts.close()
    os.truncate(path, host.SLOTS_END)  # as the service wrote it before the generation
    counts = host.HostCounts(f"host://{path}")
    assert (path.stat().st_size, counts.get("a"), counts.generation()) == (host.SIZE, 3, 0)
    counts.bump()
    other = host.HostCounts(f"host://{path}")  # another worker of the host
    assert other.generation() == 1
    other.close()
    counts.close()


@pytest.fixture
def redis_counts():
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("TEST_REDIS_URL is not set: Redis tests skipped")
    redis = counting.storage(url, {"key_prefix": f"seen-{uuid.uuid4().hex}"}, "")
    yield redis
    connection = redis.get_connection()
    for name in connection.scan_iter(f"{redis.key_prefix}*"):
        connection.delete(name)


def test_redis_begins_a_generation_at_its_clock_and_never_returns_to_one_held(redis_counts):
    """A Redis that lost its data begins again at its clock (microseconds), past any value a
    worker may hold rows of."""
    first = counting.generation(redis_counts, GENERATION)
    assert first > 1_700_000_000_000_000
    counting.bump(redis_counts, GENERATION)
    count, second = counting.attempt(redis_counts, "attempts", 60, GENERATION)
    assert (count, second) == (1, first + 1)
    redis_counts.get_connection().delete(redis_counts.prefixed_key(GENERATION))
    assert counting.generation(redis_counts, GENERATION) > second


def test_a_generation_is_read_in_the_round_trip_that_counts_the_attempt(redis_counts, monkeypatch):
    counting.attempt(redis_counts, "warm", 60, GENERATION)  # its script loaded
    sent = []
    send = redis.connection.Connection.send_packed_command

    def counted(connection, command, *args, **kwargs):
        sent.append(command)
        return send(connection, command, *args, **kwargs)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", counted)
    count, found = counting.attempt(redis_counts, "attempts", 60, GENERATION)
    assert (count, found) == (1, counting.generation(redis_counts, GENERATION))
    assert len(sent) == 2  # the attempt's, then generation()'s


def test_a_worker_keeps_at_most_its_bound_of_rows_and_reads_the_rest_again(
    client, org, make_key, app, monkeypatch, statements
):
    monkeypatch.setattr(seen, "MOST_ROWS", 3)
    keys = [make_key(name=f"key {number}") for number in range(5)]
    for key in keys:
        assert client.get(FORWARD, auth=(key, "")).status_code == 204
    assert len(app.extensions["seen"].rows) == 3
    with statements() as read:
        assert client.get(FORWARD, auth=(keys[-1], "")).status_code == 204  # kept
    assert read == []
    with statements() as read:
        assert client.get(FORWARD, auth=(keys[0], "")).status_code == 204  # read again
    assert len(read) == 1 and "WHERE API_KEYS.DIGEST =" in read[0]


def test_while_redis_does_not_answer_every_check_reads_the_database(
    make_app, database_url, org, make_key, caplog
):
    """No generation can be read: no row is served from memory (a write made meanwhile:
    tests/test_generation.py)."""
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        app = make_app(SQLALCHEMY_DATABASE_URI=database_url, RATELIMIT_STORAGE_URI=url)
        client = app.test_client()
        key = make_key()
        assert client.get(FORWARD, auth=(key, "")).status_code == 204
        assert app.extensions["seen"].rows == {}
        disable_by_hand(database_url, key)
        assert client.get(FORWARD, auth=(key, "")).json["code"] == "disabled_key"

"""Abuse limits (docs/design.md, "Abuse limits"): failed authentications per client address and
requests per key, past them 429 with Retry-After in the problem shape."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from app import create_app
from app.access import counting, limits
from tests.server.conftest import free_port


@pytest.fixture
def app_config():
    return {"RATELIMIT_AUTH_FAILURES": "3/minute", "RATELIMIT_PER_KEY": "5/minute"}


def assert_rate_limited(response):
    assert response.status_code == 429
    assert response.mimetype == "application/problem+json"
    assert response.json["code"] == "rate_limited"
    assert response.json["status"] == 429
    assert 1 <= int(response.headers["Retry-After"]) <= 61


def test_failed_authentications_past_the_limit_get_429_with_retry_after(client):
    for _ in range(3):
        assert client.get("/api/keys", auth=("ak_wrong", "")).status_code == 401
    assert_rate_limited(client.get("/api/keys", auth=("ak_wrong", "")))


def test_a_blocked_address_is_blocked_for_valid_keys_too(client, org):
    for _ in range(3):
        client.get("/api/keys", auth=("ak_wrong", ""))
    assert_rate_limited(client.get("/api/keys", auth=(org.sdk, "")))


def test_successful_requests_do_not_count_as_failures(client, org):
    for _ in range(4):
        assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert client.get("/api/keys", auth=("ak_wrong", "")).status_code == 401


def test_failures_are_counted_per_client_address(client):
    for _ in range(3):
        client.get("/api/keys", auth=("ak_wrong", ""), environ_base={"REMOTE_ADDR": "10.0.0.1"})
    other = client.get("/api/keys", auth=("ak_wrong", ""), environ_base={"REMOTE_ADDR": "10.0.0.2"})
    assert other.status_code == 401


def test_requests_past_the_per_key_limit_get_429(client, org):
    for _ in range(5):
        assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert_rate_limited(client.get("/api/keys", auth=(org.sdk, "")))


def test_the_per_key_limit_spans_every_endpoint(client, org):
    client.get("/api/keys", auth=(org.sdk, ""))
    created = client.post("/api/keys", json={"name": "n", "kind": "telemetry"}, auth=(org.sdk, ""))
    client.get(created.headers["Location"], auth=(org.sdk, ""))
    client.put(created.headers["Location"], json={"name": "m"}, auth=(org.sdk, ""))
    client.delete(created.headers["Location"], auth=(org.sdk, ""))
    assert_rate_limited(client.get("/api/keys", auth=(org.sdk, "")))


def test_one_keys_limit_leaves_other_keys_alone(client, org, make_key):
    other = make_key()
    for _ in range(6):
        client.get("/api/keys", auth=(org.sdk, ""))
    assert client.get("/api/keys", auth=(other, "")).status_code == 200


def test_naming_a_key_without_its_secret_does_not_spend_its_allowance(client, org):
    forged = org.sdk[:-7] + ("A" if org.sdk[-7] != "A" else "B") + org.sdk[-6:]
    for _ in range(2):
        assert client.get("/api/keys", auth=(forged, "")).status_code == 401
    for _ in range(5):
        assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200


def test_health_is_not_limited(client):
    for _ in range(5):
        client.get("/api/keys", auth=("ak_wrong", ""))
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("switch", ["false", "0", "off"])
def test_ratelimit_enabled_false_switches_the_limits_off(switch, monkeypatch, database_url):
    monkeypatch.setenv("RATELIMIT_ENABLED", switch)
    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "RATELIMIT_AUTH_FAILURES": "1/minute"}
    )
    client = app.test_client()
    for _ in range(3):
        assert client.get("/api/keys", auth=("ak_wrong", "")).status_code == 401


@pytest.mark.parametrize(
    ("variable", "value"),
    [("RATELIMIT_AUTH_FAILURES", "lots"), ("RATELIMIT_PER_KEY", "5/fortnight")],
)
def test_a_limit_that_is_not_a_rate_is_refused_at_start(variable, value, monkeypatch, database_url):
    monkeypatch.setenv(variable, value)
    with pytest.raises(RuntimeError, match=variable):
        create_app({"SQLALCHEMY_DATABASE_URI": database_url})


def failing_from(client, forwarded_for: str):
    return client.get(
        "/api/keys",
        auth=("ak_wrong", ""),
        headers={"X-Forwarded-For": forwarded_for},
        environ_base={"REMOTE_ADDR": "127.0.0.1"},  # the proxy
    )


@pytest.mark.parametrize("app_config", [{"RATELIMIT_AUTH_FAILURES": "3/minute"}])
def test_without_trusted_proxies_a_forged_forwarded_for_changes_nothing(client):
    for attempt in range(3):
        assert failing_from(client, f"203.0.113.{attempt}").status_code == 401
    assert_rate_limited(failing_from(client, "203.0.113.99"))


@pytest.mark.parametrize(
    "app_config", [{"RATELIMIT_AUTH_FAILURES": "3/minute", "TRUSTED_PROXIES": 1}]
)
def test_behind_a_trusted_proxy_failures_count_per_forwarded_client(client):
    for _ in range(3):
        assert failing_from(client, "203.0.113.7").status_code == 401
    assert_rate_limited(failing_from(client, "203.0.113.7"))
    assert failing_from(client, "198.51.100.8").status_code == 401  # another client
    # Only the last hop is the trusted proxy's: what the client itself wrote before it is not.
    assert_rate_limited(failing_from(client, "198.51.100.9, 203.0.113.7"))


@pytest.mark.parametrize(
    "app_config", [{"RATELIMIT_AUTH_FAILURES": "3/minute", "TRUSTED_PROXIES": 1}]
)
@pytest.mark.parametrize("forwarded", ["x" * 300, "300.1.2.3", "fe80::1%" + "9" * 200, "\xff\xfe"])
def test_a_forwarded_value_that_is_not_an_address_is_the_connections(client, org, forwarded):
    """What the trusted hop forwards is used only when it is an IP address: a client's
    made-up value neither escapes its own count nor reaches the audit log."""
    body = {"name": "made", "kind": "custom", "scopes": ["site:read"]}
    made = client.post(
        "/api/keys", json=body, auth=(org.sdk, ""), headers={"X-Forwarded-For": forwarded}
    )
    assert made.status_code == 201, made.json
    events = client.get("/api/audit", auth=(org.sdk, "")).json["data"]
    assert events[0]["client_address"] == "127.0.0.1"
    for _ in range(3):
        assert failing_from(client, forwarded).status_code == 401
    assert_rate_limited(failing_from(client, "203.0.113.1, " + forwarded))
    assert_rate_limited(client.get("/api/keys"))  # the connection's address: the same count


@pytest.fixture
def silent_redis() -> Iterator[str]:
    """The URL of a server that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"


def test_a_redis_that_does_not_answer_holds_a_request_about_a_second(
    make_app, database_url, org, silent_redis, caplog
):
    app = make_app(SQLALCHEMY_DATABASE_URI=database_url, RATELIMIT_STORAGE_URI=silent_redis)
    answers = []
    request = threading.Thread(
        target=lambda: answers.append(app.test_client().get("/api/keys", auth=(org.sdk, ""))),
        daemon=True,  # without a socket timeout it would wait for ever
    )
    started = time.monotonic()
    request.start()
    request.join(timeout=10)
    assert answers, "the request still waits for Redis"
    assert answers[0].status_code == 200
    assert time.monotonic() - started < 5
    assert "Rate limit storage unreachable (redis)" in caplog.text


@pytest.mark.parametrize("app_config", [{"RATELIMIT_AUTH_FAILURES": "2/minute"}])
def test_an_unreadable_authorization_is_a_failed_authentication(client, caplog):
    unreadable = {"Authorization": "Basic \xff\xfe\xfd"}
    for _ in range(2):
        response = client.get("/api/keys", headers=unreadable)
        assert (response.status_code, response.json["code"]) == (401, "unauthorized")
    assert_rate_limited(client.get("/api/keys", headers=unreadable))
    assert "unreachable" not in caplog.text  # a client's bytes never switch the storage


def test_a_storage_that_does_not_answer_is_a_503_when_the_fallback_is_off(
    make_app, database_url, org
):
    app = make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        RATELIMIT_STORAGE_URI=f"redis://127.0.0.1:{free_port()}/0",
        RATELIMIT_IN_MEMORY_FALLBACK_ENABLED=False,
    )
    response = app.test_client().get("/api/keys", auth=(org.sdk, ""))
    assert (response.status_code, response.json["code"]) == (503, "unavailable")
    assert response.headers["Retry-After"] == "1"


@pytest.fixture
def redis_later() -> Iterator[tuple[str, Callable[[], None]]]:
    """The URL of a Redis that is not there yet, and how to start it there."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: a Redis that comes back is not tested")
    port = free_port()
    started: list[subprocess.Popen] = []

    def start() -> None:
        command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        started.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    yield f"redis://127.0.0.1:{port}/0", start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def test_the_limits_count_in_redis_again_once_it_answers(
    make_app, database_url, org, redis_later, monkeypatch, caplog
):
    url, start_redis = redis_later
    monkeypatch.setattr(limits, "RETRY_SECONDS", 0.0)
    app = make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        RATELIMIT_STORAGE_URI=url,
        RATELIMIT_PER_KEY="3/minute",
    )
    client = app.test_client()
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert "Rate limit storage unreachable (redis)" in caplog.text
    start_redis()
    for _ in range(3):
        assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert_rate_limited(client.get("/api/keys", auth=(org.sdk, "")))
    assert "answers again" in caplog.text
    counters = redis.Redis.from_url(url)
    try:
        assert list(counters.scan_iter(match="*RATELIMIT_PER_KEY*")), "not counted in Redis"
    finally:
        counters.close()


@pytest.mark.parametrize(  # usage's thread is its own (tests/test_usage.py)
    "app_config",
    [
        {
            "RATELIMIT_AUTH_FAILURES": "3/minute",
            "RATELIMIT_PER_KEY": "5/minute",
            "RATELIMIT_STORAGE_URI": "memory://",
            "USAGE_ENABLED": False,
        }
    ],
)
def test_counting_in_memory_starts_no_thread(client, org):
    """limits' MemoryStorage starts a timer thread 10 ms after each sweep while requests
    come; the service's memory counts sweep in the request instead."""
    before = threading.active_count()
    for _ in range(3):
        assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
        assert threading.active_count() == before
        time.sleep(0.02)  # MemoryStorage's timer would have run and ended
    storage = client.application.extensions["limits"].storage
    assert isinstance(storage, counting.MemoryCounts)
    assert not storage.timer.is_alive()


def test_memory_counts_restart_with_each_period_and_drop_ended_ones():
    counts = counting.MemoryCounts()
    assert [counts.incr("a", 0.05), counts.incr("a", 0.05)] == [1, 2]
    assert counts.incr("b", 60) == 1
    time.sleep(0.06)
    assert counts.get("a") == 0
    assert counts.incr("a", 0.05) == 1  # a new period
    time.sleep(0.06)
    counts.sweep_at = 0.0  # a sweep is due
    counts.incr("c", 60)
    assert set(counts.storage) == set(counts.expirations) == {"b", "c"}


@pytest.mark.parametrize("rate", limits.RATES)
@pytest.mark.parametrize("identifier", ["::1", "ak_0123456789ab", "198.51.100.7"])
def test_each_counter_key_is_the_one_the_limits_library_builds(rate, identifier):
    """Keys made once per rate (limits.counter_key) count where `limits`' own
    FixedWindowRateLimiter would, so that servers of this and of an earlier version,
    sharing one Redis, count together."""
    app = create_app({"RATELIMIT_KEY_PREFIX": "prefix-7", rate: "17 per 3 minutes"})
    counted = app.extensions["limits"]
    head, tail = counted.keys[rate]
    item = counted.rates[rate]
    assert head + identifier + tail == item.key_for("prefix-7", rate, identifier)


def test_while_redis_does_not_answer_quotas_are_refused_and_rate_limits_counted_on_the_host(
    make_app, database_url, org
):
    app = make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        RATELIMIT_STORAGE_URI=f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
    )
    client = app.test_client()
    assert client.get("/healthz").json == {"status": "ok", "counts": "degraded"}
    body = {"name": "metered", "kind": "custom", "scopes": ["monitor:read"]}
    made = client.post(
        "/api/keys", json={**body, "quota": {"requests": 5, "period": "day"}}, auth=(org.sdk, "")
    )
    # Made and shown once, whatever Redis does; what is left of its quota cannot be read.
    assert made.status_code == 201, made.json
    assert (made.json["quota"], made.json["quota_remaining"]) == (
        {"requests": 5, "period": "day"},
        None,
    )
    refused = client.get("/api/forward-auth", auth=(made.json["key"], ""))
    assert (refused.status_code, refused.json["code"]) == (503, "counts_unavailable")
    assert 1 <= int(refused.headers["Retry-After"]) <= 10
    grant = client.post(
        f"/api/keys/{made.json['key'][:15]}/quota", json={"add": 1}, auth=(org.sdk, "")
    )
    assert (grant.status_code, grant.json["code"]) == (503, "counts_unavailable")
    limited = client.post(
        "/api/keys", json={**body, "rate_limit": {"requests": 2, "seconds": 60}}, auth=(org.sdk, "")
    )
    assert limited.status_code == 201, limited.json
    statuses = [
        client.get("/api/forward-auth", auth=(limited.json["key"], "")).status_code
        for _ in range(3)
    ]
    assert statuses == [204, 204, 429]
    storage = app.extensions["limits"].fallback
    assert isinstance(storage, counting.HostCounts)  # the host's file, not a worker's memory

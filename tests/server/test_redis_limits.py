"""The abuse limits counted in Redis (RATELIMIT_STORAGE_URI=redis://...): two servers of
several workers each, on one database and one Redis, share every count, so that a client
gets 429 at the configured number whichever process answers; and a Redis that does not
answer leaves the service serving, limits counted in the host's file, with a warning
(tests/server/test_redis_down.py: quotas refused meanwhile).

The Redis tests need TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0); each test counts
under a key prefix of its own, so that runs at the same time never share counters, and
removes its keys afterwards.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from tests.server.conftest import free_port
from tests.server.test_access_log import raw_request
from tests.server.test_gunicorn import in_parallel, sdk_key
from tests.server.test_hostile_bytes import UNREADABLE, request_bytes, send, status_of

TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "")
needs_redis = pytest.mark.skipif(
    not TEST_REDIS_URL, reason="TEST_REDIS_URL is not set: the limits in Redis are not tested"
)

PER_KEY = 6
AUTH_FAILURES = 4


def limits_env(storage: str, prefix: str) -> dict[str, str]:
    return {
        "RATELIMIT_STORAGE_URI": storage,
        "RATELIMIT_KEY_PREFIX": prefix,
        "RATELIMIT_PER_KEY": f"{PER_KEY}/minute",
        "RATELIMIT_AUTH_FAILURES": f"{AUTH_FAILURES}/minute",
    }


def assert_rate_limited(response) -> None:
    assert response.status == 429, response.body
    assert response.headers["Content-Type"] == "application/problem+json"
    assert 1 <= int(response.headers["Retry-After"]) <= 61
    body = response.json()
    assert (body["status"], body["code"]) == (429, "rate_limited")


@needs_redis
def test_two_servers_on_one_redis_share_the_per_key_and_failed_authentication_counts(
    start_server, redis_prefix
):
    env = limits_env(TEST_REDIS_URL, redis_prefix)
    first = start_server(workers=2, env=env)
    # A second host: its own gunicorn and workers, the same database and Redis.
    second = start_server(workers=2, env={**env, "DATABASE_URL": first.database})
    key = sdk_key(first)  # one request of the allowance
    servers = [first, second]
    for number in range(1, PER_KEY):
        answer = servers[number % 2].request("GET", "/api/keys", key)
        assert answer.status == 200, (number, answer.body)
    for server in servers:
        assert_rate_limited(server.request("GET", "/api/keys", key))

    wrong = "Bearer ak_wrong"
    for number in range(AUTH_FAILURES):
        assert raw_request(servers[number % 2], "GET", "/api/keys", wrong) == 401
    for server in servers:
        assert_rate_limited(server.request("GET", "/api/keys"))
    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        assert list(client.scan_iter(match=f"*{redis_prefix}*")), "no counter in Redis"
    finally:
        client.close()


def test_an_unreachable_redis_leaves_the_service_serving_with_limits_in_the_hosts_file(
    start_server,
):
    closed = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    server = start_server(workers=2, env=limits_env(closed, "unreachable"))
    key = sdk_key(server)
    for _ in range(1, PER_KEY):
        answer = server.request("GET", "/api/keys", key)
        assert answer.status == 200, answer.body
    assert_rate_limited(server.request("GET", "/api/keys", key))
    assert "Rate limit storage unreachable (redis)" in server.output()


@needs_redis
def test_hostile_requests_leave_the_per_key_count_shared_in_redis(start_server, redis_prefix):
    """Requests whose Authorization cannot be read, a non-ASCII Basic among them, used to
    switch a worker to counting in its own memory; after them, two workers still share
    one count in Redis."""
    workers = 2
    env = limits_env(TEST_REDIS_URL, redis_prefix) | {
        "RATELIMIT_AUTH_FAILURES": "1000/minute",
        "TRUSTED_PROXIES": "1",
    }
    server = start_server(workers=workers, env=env)
    key = sdk_key(server)  # one request of the allowance
    hostile = [
        request_bytes(method, b"/api/keys", b"", headers, b"")
        for method in (b"GET", b"POST")
        for value in UNREADABLE
        for headers in (
            {b"Authorization": value},
            {b"Authorization": value, b"X-Forwarded-For": b"\xff" * 200},
            {b"Authorization": value, b"Content-Type": b"\xfe\x00"},
        )
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda request: send(server.port, request), hostile))
    assert {status_of(answer) for answer in answers} <= {400, 401}, answers
    seen = in_parallel(PER_KEY - 1, lambda: server.request("GET", "/api/keys", key))
    assert [answer.status for answer in seen] == [200] * (PER_KEY - 1)
    refused = in_parallel(2 * workers, lambda: server.request("GET", "/api/keys", key))
    for answer in refused:
        assert_rate_limited(answer)
    output = server.output()
    assert "storage unreachable" not in output and "Traceback" not in output, output[-3000:]


@needs_redis
def test_a_keys_own_rate_limit_is_one_count_in_redis_for_two_servers(start_server, redis_prefix):
    """A key's own rate_limit (docs/design.md, "Key policy") is counted in the limits' storage:
    three uses a minute in all, whichever server and worker answers, every door together."""
    env = limits_env(TEST_REDIS_URL, redis_prefix) | {"RATELIMIT_PER_KEY": "1000/minute"}
    first = start_server(workers=2, env=env)
    second = start_server(workers=2, env={**env, "DATABASE_URL": first.database})
    body = {
        "name": "limited",
        "kind": "sdk_integration",
        "rate_limit": {"requests": 3, "seconds": 60},
    }
    limited = first.request("POST", "/api/keys", sdk_key(first), body).json()["key"]
    uses = [
        first.request("GET", "/api/keys?page_size=1", limited),
        second.request("GET", "/api/forward-auth", limited),
        first.request("GET", "/api/keys?page_size=1", limited),
    ]
    assert [answer.status for answer in uses] == [200, 204, 200]
    remaining = [answer.headers["RateLimit"].split(";")[1] for answer in uses]
    assert remaining == ["r=2", "r=1", "r=0"]  # one count, not one per process
    for server in (first, second):
        refused = server.request("GET", "/api/keys", limited)
        assert_rate_limited(refused)
        assert refused.headers["RateLimit-Policy"] == '"key";q=3;w=60'
    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        assert list(client.scan_iter(match=f"*{redis_prefix}*key*")), "no key count in Redis"
    finally:
        client.close()

"""Quotas through real gunicorn servers (docs/design.md, "Quotas"): exact for uses sent at
once to every worker of a host, and to two hosts sharing Redis; the same count after a
worker is killed and after the service restarts."""

from __future__ import annotations

import os
import signal
import time

from tests.server.test_gunicorn import in_parallel, sdk_key
from tests.server.test_host_limits import ALLOWED, DEFAULT_WORKERS
from tests.server.test_redis_limits import TEST_REDIS_URL, limits_env, needs_redis

QUOTA = {"requests": 7, "period": "day"}


def key_with_quota(server, manager: str, quota: dict = QUOTA) -> str:
    body = {"name": "metered", "kind": "custom", "scopes": ["monitor:read"], "quota": quota}
    answer = server.request("POST", "/api/keys", manager, body)
    assert answer.status == 201, answer.body
    return answer.json()["key"]


def remaining(server, manager: str, key: str) -> int:
    answer = server.request("GET", f"/api/keys/{key[:15]}", manager)
    assert answer.status == 200, answer.body
    return answer.json()["quota_remaining"]


def test_uses_sent_at_once_to_every_worker_pass_exactly_the_quota(start_server):
    server = start_server(workers=DEFAULT_WORKERS)
    manager = sdk_key(server)
    for _ in range(3):
        key = key_with_quota(server, manager)
        # Forward auth: a GET of /api/keys manages keys, which spends no quota.
        statuses = in_parallel(
            40, lambda k=key: server.request("GET", "/api/forward-auth", k).status
        )
        assert sum(status in ALLOWED for status in statuses) == 7, statuses
        assert statuses.count(429) == 33, statuses
        assert remaining(server, manager, key) == 0


@needs_redis
def test_two_servers_sharing_redis_pass_exactly_the_quota(start_server, redis_prefix):
    # Uses of a spent quota are no failed authentications: the address is not blocked.
    env = limits_env(TEST_REDIS_URL, redis_prefix) | {"RATELIMIT_PER_KEY": "6000/minute"}
    first = start_server(workers=2, env=env)
    second = start_server(workers=2, env={**env, "DATABASE_URL": first.database})
    manager = sdk_key(first)
    key = key_with_quota(first, manager)
    servers = iter([first, second] * 20)
    check = "/api/forward-auth"
    statuses = in_parallel(40, lambda: next(servers).request("GET", check, key).status)
    assert sum(status in ALLOWED for status in statuses) == 7, statuses
    assert remaining(second, manager, key) == 0


def test_the_count_survives_a_killed_worker_and_a_restart(start_server, tmp_path):
    counts = {"RATELIMIT_STORAGE_URI": f"host://{tmp_path}/kept.counts"}
    server = start_server(workers=2, env=counts)
    manager = sdk_key(server)
    key = key_with_quota(server, manager, {"requests": 10, "period": "month"})
    for _ in range(3):
        assert server.request("GET", "/api/forward-auth", key).status == 204
    for pid in server.worker_pids():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while len(server.worker_pids()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    server.wait_until_ready(4)  # the two replacements are ready too
    assert remaining(server, manager, key) == 7
    server.stop()
    again = start_server(workers=2, env={**counts, "DATABASE_URL": server.database})
    assert remaining(again, manager, key) == 7
    assert again.request("GET", "/api/forward-auth", key).status == 204
    assert remaining(again, manager, key) == 6

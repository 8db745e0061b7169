"""A Redis that stops answering (docs/design.md, "Many hosts": Redis down), with a Redis of the
test's own (paused with SIGSTOP, killed with SIGKILL and started again on its port): under
gunicorn with several workers, a use that would spend a quota is refused with 503
`counts_unavailable`, never allowed; a key's rate limit holds across all the workers of the
host, counted in its file; /healthz says "degraded"; and once Redis answers again, the
counts continue from its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.server.conftest import free_port
from tests.server.test_gunicorn import in_parallel, sdk_key
from tests.server.test_host_limits import ALLOWED
from tests.server.test_quotas import key_with_quota

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"
)

# The workers ask Redis again every 10 seconds (app/access/limits.py's RETRY_SECONDS).
BACK_WITHIN = 25.0
# A request while Redis is paused waits at most its socket timeout (1 s) once per worker.
PAUSED_ANSWER_WITHIN = 5.0


class OwnRedis:
    """A redis-server of the test's own, on a free port, keeping its keys on disk at each
    write, so that one killed and started again has every count it acknowledged; or, not
    `persistent`, keeping nothing, so that one started again has lost every key."""

    def __init__(self, folder: Path, persistent: bool = True) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.persistent = persistent

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--dir", str(self.folder), "--save", ""]
        if self.persistent:
            command += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            command += ["--appendonly", "no"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                if client.ping():
                    return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def signal(self, number: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, number)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()


def env_for(own_redis: OwnRedis) -> dict[str, str]:
    """The server counts in the test's Redis, and in its own file (tests/server/conftest.py's
    launch) while Redis does not answer."""
    return {"RATELIMIT_STORAGE_URI": own_redis.url, "RATELIMIT_PER_KEY": "6000/minute"}


def key_with_rate(server, manager: str, requests: int) -> str:
    body = {
        "name": "limited",
        "kind": "custom",
        "scopes": ["monitor:read"],
        "rate_limit": {"requests": requests, "seconds": 3600},
    }
    answer = server.request("POST", "/api/keys", manager, body)
    assert answer.status == 201, answer.body
    return answer.json()["key"]


def use(server, key: str):
    return server.request("GET", "/api/forward-auth", key)


def assert_counts_unavailable(answer) -> None:
    assert answer.status == 503, answer.body
    assert answer.json()["code"] == "counts_unavailable"
    assert int(answer.headers["Retry-After"]) >= 1


def health(server) -> dict:
    answer = server.request("GET", "/healthz")
    assert answer.status == 200, answer.body
    return answer.json()


def wait_until_counting_in_redis(server, key: str, expected: int) -> None:
    """Every worker back on Redis: `expected` statuses of a key's use, many times over."""
    deadline = time.monotonic() + BACK_WITHIN
    while True:
        statuses = in_parallel(6, lambda: use(server, key).status)
        if statuses == [expected] * 6:
            return
        assert time.monotonic() < deadline, statuses
        time.sleep(1)


def test_a_paused_redis_refuses_quotas_and_keeps_rate_limits_per_host(start_server, own_redis):
    server = start_server(workers=3, env=env_for(own_redis))
    manager = sdk_key(server)
    spent = key_with_quota(server, manager, {"requests": 3, "period": "lifetime"})
    for _ in range(3):
        assert use(server, spent).status in ALLOWED
    assert use(server, spent).status == 429
    halfway = key_with_quota(server, manager, {"requests": 4, "period": "day"})
    assert use(server, halfway).status in ALLOWED
    limited = key_with_rate(server, manager, 5)
    assert use(server, limited).status in ALLOWED  # one of 5 counted in Redis
    assert health(server)["counts"] == "ok"

    own_redis.signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        answers = in_parallel(9, lambda: use(server, spent))
        assert time.monotonic() - started < PAUSED_ANSWER_WITHIN
        for answer in answers:
            assert_counts_unavailable(answer)
        for answer in in_parallel(6, lambda: use(server, halfway)):
            assert_counts_unavailable(answer)
        # Counted afresh in the host's file, shared by the three workers: 5, not 15.
        statuses = in_parallel(15, lambda: use(server, limited).status)
        assert sum(status in ALLOWED for status in statuses) == 5, statuses
        assert statuses.count(429) == 10, statuses
        assert health(server)["counts"] == "degraded"
        assert "api_keys_counts_degraded 1.0" in server.request("GET", "/metrics").body.decode()
    finally:
        own_redis.signal(signal.SIGCONT)

    wait_until_counting_in_redis(server, spent, 429)
    assert health(server)["counts"] == "ok"
    # Redis's counts continue: 3 more uses of 4, none lost, none counted twice.
    statuses = in_parallel(6, lambda: use(server, halfway).status)
    assert sum(status in ALLOWED for status in statuses) == 3, statuses
    # The rate limit is Redis's again: 1 used before the outage, 4 left.
    statuses = in_parallel(8, lambda: use(server, limited).status)
    assert sum(status in ALLOWED for status in statuses) == 4, statuses
    output = server.output()
    assert "Rate limit storage unreachable (redis)" in output
    assert "Rate limit storage answers again" in output
    assert "Traceback" not in output, output[-3000:]


def test_a_killed_redis_started_again_keeps_every_quota_spent(start_server, own_redis):
    server = start_server(workers=3, env=env_for(own_redis))
    manager = sdk_key(server)
    spent = key_with_quota(server, manager, {"requests": 2, "period": "lifetime"})
    for _ in range(2):
        assert use(server, spent).status in ALLOWED
    assert use(server, spent).status == 429

    own_redis.signal(signal.SIGKILL)
    own_redis.process.wait()
    for answer in in_parallel(9, lambda: use(server, spent)):
        assert_counts_unavailable(answer)
    assert health(server)["counts"] == "degraded"

    own_redis.start()
    wait_until_counting_in_redis(server, spent, 429)
    assert health(server)["counts"] == "ok"


def test_a_worker_that_serves_nothing_says_when_redis_answers_again(start_server, own_redis):
    """The gauge api_keys_counts_degraded is the highest of the live workers': each worker
    that counted in the host's file asks Redis again at its heartbeat, not only at its next
    request, so that workers left idle after an outage do not keep it at 1."""
    env = env_for(own_redis) | {"HOSTS_HEARTBEAT_SECONDS": "1"}
    server = start_server(workers=3, env=env)
    key = sdk_key(server)
    own_redis.signal(signal.SIGSTOP)
    try:
        statuses = in_parallel(24, lambda: use(server, key).status)  # every worker, likely
        assert set(statuses) <= set(ALLOWED), statuses
        assert "api_keys_counts_degraded 1.0" in server.request("GET", "/metrics").body.decode()
    finally:
        own_redis.signal(signal.SIGCONT)
    deadline = time.monotonic() + BACK_WITHIN
    while "api_keys_counts_degraded 0.0" not in (
        metrics := server.request("GET", "/metrics").body.decode()
    ):
        assert time.monotonic() < deadline, [m for m in metrics.splitlines() if "degraded" in m]
        time.sleep(1)

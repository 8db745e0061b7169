"""A Redis that loses its data (a FLUSHDB, a restart without persistence) renews no quota:
under gunicorn with several workers, the service notices that its counts are gone, refuses
every use that would spend a quota with 503 `counts_unavailable` while it rebuilds each
current period's count from the usage in the database, then serves exactly what is left;
/healthz says "rebuilding" meanwhile. Uses are written to the database every half second
here, and each test waits for them before Redis loses its data (what was not yet written is
what a loss still costs: docs/operations.md)."""

from __future__ import annotations

import signal
import time

import pytest
import redis

from tests.server.test_gunicorn import in_parallel, sdk_key
from tests.server.test_host_limits import ALLOWED
from tests.server.test_identity_limits import identity_with_keys
from tests.server.test_quotas import key_with_quota
from tests.server.test_redis_down import (
    OwnRedis,
    assert_counts_unavailable,
    env_for,
    health,
    pytestmark,  # noqa: F401 (skipped without redis-server)
    use,
)

# Where the service keeps the mark of its counts, and the lock of the worker that rebuilds
# them (app/access/counting/rebuild.py), under the default RATELIMIT_KEY_PREFIX.
MARK = "LIMITS:api-keys/counts"
LOCK = "LIMITS:api-keys/counts/rebuilding"
FLUSH = {"USAGE_FLUSH_SECONDS": "0.5"}
WRITTEN_WITHIN = 30.0


def redis_server(folder, persistent: bool):
    folder.mkdir()
    server = OwnRedis(folder, persistent)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def kept_redis(tmp_path):
    yield from redis_server(tmp_path / "redis", persistent=True)


@pytest.fixture
def volatile_redis(tmp_path):
    yield from redis_server(tmp_path / "redis", persistent=False)


def written(server, uses: int) -> None:
    """Wait until the database holds `uses` uses let through of the keys with a quota or an
    identity (not the manager's, which made them)."""
    deadline = time.monotonic() + WRITTEN_WITHIN
    statement = (
        "SELECT COALESCE(SUM(count), 0) FROM key_usage JOIN api_keys ON api_keys.id = key_id"
        " WHERE outcome = 'allowed' AND scope = ''"
        " AND (quota_requests IS NOT NULL OR identity_id IS NOT NULL)"
    )
    while server.query(statement)[0][0] < uses:
        assert time.monotonic() < deadline, server.query(statement)
        time.sleep(0.2)


def allowed(server, key: str, uses: int) -> int:
    """`uses` uses of `key` sent at once, those answered 503 `counts_unavailable` (while the
    counts are rebuilt) sent again after their Retry-After: how many were let through (the
    rest 429)."""
    statuses: list[int] = []
    deadline = time.monotonic() + WRITTEN_WITHIN
    while uses:
        answers = in_parallel(uses, lambda: use(server, key))
        statuses += [answer.status for answer in answers if answer.status != 503]
        refused = [answer for answer in answers if answer.status == 503]
        for answer in refused:
            assert_counts_unavailable(answer)
        uses = len(refused)
        if uses:
            assert time.monotonic() < deadline, "the counts are never rebuilt"
            time.sleep(int(refused[0].headers["Retry-After"]))
    assert all(status in ALLOWED or status == 429 for status in statuses), statuses
    return sum(status in ALLOWED for status in statuses)


def spent_five_each(server) -> list[str]:
    """A lifetime quota of 10, a day's of 10 and an identity's of 10, 5 of each spent and
    written."""
    manager = sdk_key(server)
    lifetime = key_with_quota(server, manager, {"requests": 10, "period": "lifetime"})
    day = key_with_quota(server, manager, {"requests": 10, "period": "day"})
    _, (held, other) = identity_with_keys(server, manager, 10, keys=2)
    for key, uses in ((lifetime, 5), (day, 5), (held, 3), (other, 2)):
        for _ in range(uses):
            assert use(server, key).status in ALLOWED
    written(server, 15)
    return [lifetime, day, held]


def test_a_flushed_redis_renews_no_quota(start_server, kept_redis):
    server = start_server(workers=3, env=env_for(kept_redis) | FLUSH)
    keys = spent_five_each(server)
    assert health(server)["counts"] == "ok"
    client = redis.Redis(port=kept_redis.port)
    client.flushdb()
    client.set(LOCK, "held by the test", ex=60)  # as if a worker were rebuilding
    for key in keys:
        for answer in in_parallel(6, lambda k=key: use(server, k)):
            assert_counts_unavailable(answer)
    assert health(server)["counts"] == "rebuilding"
    client.delete(LOCK)
    assert [allowed(server, key, 20) for key in keys] == [5, 5, 5]
    assert health(server)["counts"] == "ok"
    assert client.exists(MARK)
    output = server.output()
    assert "Traceback" not in output, output[-3000:]


def test_a_redis_restarted_without_persistence_renews_no_quota(start_server, volatile_redis):
    server = start_server(workers=3, env=env_for(volatile_redis) | FLUSH)
    keys = spent_five_each(server)
    volatile_redis.signal(signal.SIGKILL)
    volatile_redis.process.wait()
    volatile_redis.start()
    assert [allowed(server, key, 20) for key in keys] == [5, 5, 5]
    assert health(server)["counts"] == "ok"


def test_a_grant_is_rebuilt_too(start_server, kept_redis):
    server = start_server(workers=3, env=env_for(kept_redis) | FLUSH)
    manager = sdk_key(server)
    key = key_with_quota(server, manager, {"requests": 4, "period": "lifetime"})
    assert allowed(server, key, 6) == 4
    granted = server.request("POST", f"/api/keys/{key[:15]}/quota", manager, {"add": 5})
    assert granted.status == 200, granted.body
    assert allowed(server, key, 2) == 2
    written(server, 6)
    redis.Redis(port=kept_redis.port).flushdb()
    assert allowed(server, key, 10) == 3

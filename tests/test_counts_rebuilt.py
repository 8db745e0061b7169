"""The quotas' counts rebuilt after Redis lost them (app/access/rebuild.py): a Redis that
answers without the mark of its counts (here: the test's prefix emptied, as a FLUSHDB
would) renews no quota, neither a period's nor a lifetime's nor a grant's; while another
worker rebuilds (its lock held), uses of a quota are refused 503 `counts_unavailable` and
/healthz says "rebuilding"; a Redis that kept its counts but lost only the mark keeps them.
Needs TEST_REDIS_URL."""

from __future__ import annotations

import os
import uuid

import pytest
import redis

from app import create_app
from app.access import counting, policy, rebuild
from app.extensions import db
from app.usage import counter as usage_counter
from tests.test_database_down import UNREACHABLE
from tests.test_makers import made, use
from tests.test_quotas import key_with

REDIS_URL = os.environ.get("TEST_REDIS_URL", "")
PREFIX = f"rebuild-test-{uuid.uuid4().hex}"
FORWARD = "/api/forward-auth"
LIFETIME = {"requests": 10, "period": "lifetime"}


@pytest.fixture
def app_config() -> dict:
    if not REDIS_URL:
        pytest.skip("TEST_REDIS_URL is not set: Redis tests skipped")
    return {"RATELIMIT_STORAGE_URI": REDIS_URL, "RATELIMIT_KEY_PREFIX": PREFIX}


@pytest.fixture
def connection():
    if not REDIS_URL:
        pytest.skip("TEST_REDIS_URL is not set: Redis tests skipped")
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    lose(client)
    client.close()


def lose(connection) -> None:
    """Every key of the test's prefix gone, as a FLUSHDB takes them."""
    for name in connection.scan_iter(f"*{PREFIX}*"):
        connection.delete(name)


def statuses(client, key: str, times: int) -> list[int]:
    return [client.get(FORWARD, auth=(key, "")).status_code for _ in range(times)]


def written(client) -> None:
    """The uses so far written to the database, as the usage's thread writes them."""
    client.application.extensions[usage_counter.EXTENSION].flush()


def lock(connection) -> str:
    return f"LIMITS:{PREFIX}/{counting.MARK}{rebuild.LOCK}"


def health(client) -> str:
    answer = client.get("/healthz")
    assert answer.status_code == 200, answer.json
    return answer.json["counts"]


def test_a_lost_redis_renews_neither_a_lifetime_nor_a_day_quota(client, org, connection):
    lifetime = key_with(client, org, quota=LIFETIME)["key"]
    day = key_with(client, org, quota={"requests": 10, "period": "day"})["key"]
    assert statuses(client, lifetime, 5) == [204] * 5
    assert statuses(client, day, 5) == [204] * 5
    written(client)
    lose(connection)
    assert statuses(client, lifetime, 20) == [204] * 5 + [429] * 15
    assert statuses(client, day, 20) == [204] * 5 + [429] * 15
    assert connection.exists(f"LIMITS:{PREFIX}/{counting.MARK}")
    assert health(client) == "ok"


def test_while_another_worker_rebuilds_quotas_are_refused_and_health_says_so(
    client, org, connection
):
    key = key_with(client, org, quota=LIFETIME)["key"]
    unlimited = key_with(client, org)["key"]
    assert statuses(client, key, 3) == [204] * 3
    written(client)
    lose(connection)
    connection.set(lock(connection), "another worker", ex=60)
    refused = client.get(FORWARD, auth=(key, ""))
    assert refused.status_code == 503, refused.json
    assert refused.json["code"] == "counts_unavailable"
    assert int(refused.headers["Retry-After"]) >= 1
    assert client.get(f"/api/keys/{key[:15]}", auth=(org.sdk, "")).json["quota_remaining"] is None
    grant = client.post(f"/api/keys/{key[:15]}/quota", auth=(org.sdk, ""), json={"add": 1})
    assert grant.status_code == 503, grant.json
    assert statuses(client, unlimited, 2) == [204] * 2  # no quota: nothing to wait for
    assert health(client) == "rebuilding"
    connection.delete(lock(connection))
    client.application.extensions["limits"].rebuilder.retry_at = 0  # its next try is now
    assert health(client) == "ok"  # rebuilt by the check itself
    answer = client.get(f"/api/keys/{key[:15]}", auth=(org.sdk, ""))
    assert answer.json["quota_remaining"] == 7


@pytest.mark.parametrize("grant", [{"add": 5}, {"set_remaining": 9}])
def test_a_grant_is_rebuilt_with_the_uses(client, org, connection, grant):
    key = key_with(client, org, quota={"requests": 4, "period": "lifetime"})["key"]
    assert statuses(client, key, 5) == [204] * 4 + [429]
    answer = client.post(f"/api/keys/{key[:15]}/quota", auth=(org.sdk, ""), json=grant)
    assert answer.status_code == 200, answer.json
    assert statuses(client, key, 2) == [204] * 2
    left = answer.json["quota_remaining"] - 2
    written(client)
    lose(connection)
    assert client.get(f"/api/keys/{key[:15]}", auth=(org.sdk, "")).json["quota_remaining"] == left
    assert statuses(client, key, 10) == [204] * left + [429] * (10 - left)


def test_a_makers_quota_is_rebuilt_with_the_uses_of_the_keys_it_made(client, org, connection):
    maker = made(client, org.sdk, quota={"requests": 6, "period": "week"})["key"]
    child = made(client, maker)["key"]  # the maker's first use
    assert [use(client, key).status_code for key in (maker, child, child)] == [204] * 3
    written(client)
    lose(connection)
    assert [use(client, child).status_code for _ in range(3)] == [204, 204, 429]
    assert use(client, maker).status_code == 429


def test_uses_refused_before_spending_are_not_counted(client, org, connection):
    key = key_with(client, org, quota=LIFETIME)["key"]
    update = client.put(f"/api/keys/{key[:15]}", auth=(org.sdk, ""), json={"enabled": False})
    assert update.status_code == 200, update.json
    assert statuses(client, key, 3) == [401] * 3
    client.put(f"/api/keys/{key[:15]}", auth=(org.sdk, ""), json={"enabled": True})
    assert statuses(client, key, 2) == [204] * 2
    written(client)
    lose(connection)
    assert statuses(client, key, 10) == [204] * 8 + [429] * 2


def test_a_redis_that_kept_its_counts_keeps_them(client, org, connection):
    key = key_with(client, org, quota=LIFETIME)["key"]
    assert statuses(client, key, 4) == [204] * 4  # not written to the database yet
    connection.delete(f"LIMITS:{PREFIX}/{counting.MARK}")
    assert statuses(client, key, 10) == [204] * 6 + [429] * 4


def test_the_uses_that_spend_nothing_are_the_policys_refusals_before_spending():
    before = {policy.EXPIRED_KEY, policy.DISABLED_KEY, policy.IP_NOT_ALLOWED}
    assert set(rebuild.UNSPENT) == before | policy.SPENT


def test_a_rate_limits_window_starts_again_and_is_served_meanwhile(client, org, connection):
    """The rate limits' windows are not rebuilt: a loss lets through at most one window's
    allowance more, and a key with a rate limit alone waits for no rebuild."""
    key = key_with(client, org, rate_limit={"requests": 5, "seconds": 3600})["key"]
    assert statuses(client, key, 3) == [204] * 3
    lose(connection)
    connection.set(lock(connection), "another worker", ex=60)
    assert statuses(client, key, 6) == [204] * 5 + [429]


def test_a_database_that_fails_leaves_the_counts_unrebuilt_and_the_lock_free(connection, caplog):
    app = create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": UNREACHABLE["sqlite"],
            "RATELIMIT_STORAGE_URI": REDIS_URL,
            "RATELIMIT_KEY_PREFIX": PREFIX,
        }
    )
    limits = app.extensions["limits"]
    with app.app_context():
        assert limits.rebuilder.rebuild() is False
        assert "could not be rebuilt: the database failed" in caplog.text
        assert not connection.exists(lock(connection))
        assert limits.state() == "rebuilding"  # not tried again within a second
        db.engine.dispose()

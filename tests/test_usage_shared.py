"""Usage counted in Redis where the limits count there (app/usage/shared.py, docs/design.md,
"Many hosts"): each use is in Redis before its answer, no worker's memory holds it, and each
batch taken from there is written once into key_usage, whoever takes it and however often:
a writer killed before it removed its batch, two workers taking one batch at once. Redis
silent: counted in the worker's memory as before. Needs TEST_REDIS_URL."""

from __future__ import annotations

import os
import threading
import uuid
from datetime import datetime

import pytest
import redis

from app.extensions import db
from app.usage import counter as usage_counter
from app.usage import shared
from tests.conftest import _app
from tests.test_usage import FORWARD, shown

REDIS_URL = os.environ.get("TEST_REDIS_URL", "")
PREFIX = f"usage-test-{uuid.uuid4().hex}"


@pytest.fixture
def app_config() -> dict:
    if not REDIS_URL:
        pytest.skip("TEST_REDIS_URL is not set: Redis tests skipped")
    return {"RATELIMIT_STORAGE_URI": REDIS_URL, "RATELIMIT_KEY_PREFIX": PREFIX}


@pytest.fixture(autouse=True)
def redis_emptied() -> None:
    """The test's keys in Redis (its prefix) gone after it."""
    yield
    if REDIS_URL:
        connection = redis.Redis.from_url(REDIS_URL)
        for name in connection.scan_iter(f"*{PREFIX}*"):
            connection.delete(name)
        connection.close()


def use(client, key: str, times: int = 1) -> None:
    for _ in range(times):
        assert client.get(FORWARD, auth=(key, "")).status_code == 204


def counted(client, org, key: str) -> int:
    answer = client.get(f"/api/keys/{shown(key)}/usage", auth=(org.sdk, ""))
    assert answer.status_code == 200, answer.json
    return answer.json["total"]["allowed"]


def usage_of(app) -> usage_counter.Usage:
    return app.extensions[usage_counter.EXTENSION]


def batches(app) -> set[str]:
    usage = usage_of(app)
    return {batch.decode() for batch in usage.shared.connection.zrange(usage.shared.batches, 0, -1)}


def test_each_use_is_in_redis_before_its_answer_and_a_batch_writes_it_once(client, org, make_key):
    key = make_key()
    use(client, key, 3)
    usage = usage_of(client.application)
    assert usage.counts == {}  # no worker's memory holds a use
    assert sum(int(n) for n in usage.shared.connection.hvals(usage.shared.usage)) == 3
    assert counted(client, org, key) == 0  # not written yet
    usage.flush()
    assert not usage.shared.connection.exists(usage.shared.usage)  # taken as a batch
    assert batches(client.application) == set()  # written, removed
    assert counted(client, org, key) == 3
    usage.flush()  # nothing left to write
    assert counted(client, org, key) == 3


def test_a_batch_whose_writer_was_killed_before_writing_it_is_written_by_another(
    client, org, make_key, monkeypatch
):
    key = make_key()
    use(client, key, 4)
    usage = usage_of(client.application)
    taken = list(usage.shared.take())  # renamed to a batch, then the writer dies
    assert len(taken) == 1 and batches(client.application) == set(taken)
    use(client, key)  # counted in a new hash
    usage.flush()
    assert counted(client, org, key) == 1  # the orphan is not ORPHAN_SECONDS old yet
    monkeypatch.setattr(shared, "ORPHAN_SECONDS", 0)
    usage.flush()
    assert counted(client, org, key) == 5
    assert batches(client.application) == set()


def test_a_batch_written_but_not_removed_is_not_written_twice(client, org, make_key, monkeypatch):
    key = make_key()
    use(client, key, 2)
    usage = usage_of(client.application)
    batch = next(usage.shared.take())
    assert usage._write(usage.shared.counts(batch), batch)  # written; killed before removal
    assert counted(client, org, key) == 2
    monkeypatch.setattr(shared, "ORPHAN_SECONDS", 0)
    usage.flush()  # finds it, sees it recorded, removes it
    assert counted(client, org, key) == 2
    assert batches(client.application) == set()


def test_two_workers_taking_the_same_batches_at_once_write_each_once(
    app, client, org, make_key, monkeypatch
):
    """Workers of two hosts (two applications on one database and one Redis) each take every
    orphan at once, many times over."""
    other = _app(app.config["SQLALCHEMY_DATABASE_URI"], **app_config_of(app))
    try:
        key = make_key()
        monkeypatch.setattr(shared, "ORPHAN_SECONDS", 0)
        written = 0
        for _ in range(10):
            use(client, key, 3)
            list(usage_of(app).shared.take())  # an orphan of 3 uses
            written += 3
            together = threading.Barrier(2)
            threads = [
                threading.Thread(target=flush_at_once, args=(a, together)) for a in (app, other)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert counted(client, org, key) == written
        assert batches(app) == set()
    finally:
        usage_counter.stop(other)
        with other.app_context():
            db.engine.dispose()


def flush_at_once(app, together: threading.Barrier) -> None:
    together.wait()
    usage_of(app).flush()


def app_config_of(app) -> dict:
    return {name: app.config[name] for name in ("RATELIMIT_STORAGE_URI", "RATELIMIT_KEY_PREFIX")}


def test_a_silent_redis_counts_in_memory_and_the_batch_writes_it(client, org, make_key):
    key = make_key()
    usage = usage_of(client.application)
    limits = usage.limits
    use(client, key)
    with client.application.app_context():
        limits.silent()  # as a failed operation of Redis's makes it
    use(client, key, 2)
    assert sum(usage.counts.values()) == 2  # in memory, not in Redis
    usage.flush()  # the memory's; Redis's waits until it answers again
    assert counted(client, org, key) == 2
    limits.retry_at = 0  # asked again now: it answers
    usage.flush()
    assert counted(client, org, key) == 3


def test_a_failed_write_to_redis_is_counted_in_memory(client, org, make_key, monkeypatch):
    key = make_key()
    usage = usage_of(client.application)

    def fails(*args, **kwargs):
        raise redis.exceptions.ConnectionError("Redis is gone")

    monkeypatch.setattr(usage.shared, "add", fails)
    use(client, key, 2)
    assert sum(usage.counts.values()) == 2
    assert not usage.limits.answers()
    usage.flush()
    assert counted(client, org, key) == 2


def test_a_count_that_cannot_be_read_is_left_out_and_the_batches_after_it_are_written(
    client, org, make_key, monkeypatch, caplog
):
    """A field of another format (a version to come, a hand's) never stops the batches."""
    key = make_key()
    usage = usage_of(client.application)
    connection = usage.shared.connection
    connection.hset(usage.shared.usage, mapping={"not|a|count": 1, b"\xff|1|allowed|": 1})
    assert list(usage.shared.take())  # an orphan with nothing readable
    use(client, key, 2)
    assert list(usage.shared.take())  # a later one, with the uses
    monkeypatch.setattr(shared, "ORPHAN_SECONDS", 0)
    usage.flush()
    assert counted(client, org, key) == 2
    assert batches(client.application) == set()
    assert "cannot be read, left out" in caplog.text


def test_the_take_run_twice_never_overwrites_its_batch(client, org, make_key):
    """A script retried (a client's retry after a lost answer) makes no second batch over the
    first: the uses added between stay in the hash."""
    key = make_key()
    usage = usage_of(client.application)
    keys = [usage.shared.usage, usage.shared.batches, usage.shared.prefix + "twice"]
    use(client, key, 2)
    assert usage.shared.take_script(keys, ["twice", 60_000])[0] == 1
    use(client, key)
    assert usage.shared.take_script(keys, ["twice", 60_000])[0] == 0
    assert sum(usage.shared.counts("twice").values()) == 2
    assert sum(int(n) for n in usage.shared.connection.hvals(usage.shared.usage)) == 1


def test_a_batchs_record_is_removed_with_the_old_hours(client, org, make_key, sql):
    key = make_key()
    usage = usage_of(client.application)
    use(client, key)
    usage.flush()  # written and recorded; the first batch of the worker prunes
    assert len(sql("SELECT id FROM usage_batches")) == 1
    sql("UPDATE usage_batches SET written = :old", old=datetime(2000, 1, 1))
    use(client, key)
    usage.flush()  # pruned less than an hour ago: kept
    assert len(sql("SELECT id FROM usage_batches WHERE written < '2001-01-01'")) == 1
    usage.pruned -= usage_counter.PRUNE_SECONDS
    use(client, key)
    usage.flush()
    assert sql("SELECT id FROM usage_batches WHERE written < '2001-01-01'") == []
    assert len(sql("SELECT id FROM usage_batches")) == 2  # the later batches' records
    assert counted(client, org, key) == 3

"""A change answered as done reaches every worker's next check whatever Redis does
(app/access/seen.py): a write whose bump of the generation no Redis took is answered only once
no row read before its commit can be served anywhere; and the generation is the deployment's
own, under RATELIMIT_KEY_PREFIX, so that deployments sharing a Redis bump apart. Each worker
here is an app of its own on the test's database, counting in a Redis of the test's own."""

from __future__ import annotations

import shutil
import socket
import time

import pytest
import redis

from app.access import seen
from app.domain import keyformat

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"
)

CHECK = "/api/forward-auth"


def refusing_url() -> str:
    """A Redis that refuses every connection: a port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def worker(make_app, database_url: str, url: str, prefix: str = "api-keys"):
    return make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        RATELIMIT_STORAGE_URI=url,
        RATELIMIT_KEY_PREFIX=prefix,
    ).test_client()


@pytest.mark.parametrize("write", ["delete", "disable"])
def test_a_write_that_redis_did_not_take_is_answered_once_no_row_before_it_is_served(
    make_app, database_url, org, make_key, own_redis, monkeypatch, write
):
    """The writer cannot reach Redis; another worker, which can, read the key's row before the
    write and reads an unchanged generation after it: the answer waits until that row is
    older than ROW_SECONDS, so that the other worker's next check reads the database."""
    monkeypatch.setattr(seen, "ROW_SECONDS", 1.0)
    reader = worker(make_app, database_url, own_redis.url)
    writer = worker(make_app, database_url, refusing_url())
    key = make_key(scopes=("monitor:read",))
    assert reader.get(CHECK, auth=(key, "")).status_code == 204  # its row kept
    location = f"/api/keys/{keyformat.identifier_of(key)}"
    started = time.monotonic()
    if write == "delete":
        answer = writer.delete(location, auth=(org.sdk, ""))
    else:
        answer = writer.put(location, json={"enabled": False}, auth=(org.sdk, ""))
    assert answer.status_code in (200, 204), answer.json
    waited = time.monotonic() - started
    assert reader.get(CHECK, auth=(key, "")).status_code == 401  # not the row it had
    assert waited >= seen.ROW_SECONDS


def test_a_write_redis_takes_is_answered_at_once(
    make_app, database_url, org, make_key, own_redis, monkeypatch
):
    reader = worker(make_app, database_url, own_redis.url)
    writer = worker(make_app, database_url, own_redis.url)
    key = make_key(scopes=("monitor:read",))
    assert reader.get(CHECK, auth=(key, "")).status_code == 204
    started = time.monotonic()
    answer = writer.put(
        f"/api/keys/{keyformat.identifier_of(key)}", json={"enabled": False}, auth=(org.sdk, "")
    )
    assert answer.status_code == 200, answer.json
    assert time.monotonic() - started < seen.ROW_SECONDS / 2
    assert reader.get(CHECK, auth=(key, "")).json["code"] == "disabled_key"


def test_a_new_key_written_while_redis_is_silent_is_answered_at_once(
    make_app, database_url, org, own_redis
):
    """A row only added makes no row seen stale: nothing to wait for."""
    writer = worker(make_app, database_url, refusing_url())
    started = time.monotonic()
    body = {"name": "new", "kind": "custom", "scopes": ["monitor:read"]}
    answer = writer.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert answer.status_code == 201, answer.json
    assert time.monotonic() - started < seen.ROW_SECONDS / 2


def test_two_deployments_sharing_a_redis_keep_their_generations_apart(
    make_app, database_url, org, make_key, own_redis
):
    first = worker(make_app, database_url, own_redis.url, "first")
    second = worker(make_app, database_url, own_redis.url, "second")
    limits = {
        name: client.application.extensions["limits"]
        for name, client in (("first", first), ("second", second))
    }
    before = {name: each.generation() for name, each in limits.items()}
    body = {"name": "new", "kind": "custom", "scopes": ["monitor:read"]}
    assert first.post("/api/keys", json=body, auth=(org.sdk, "")).status_code == 201
    after = {name: each.generation() for name, each in limits.items()}
    assert after["first"] > before["first"]
    assert after["second"] == before["second"]
    names = {name.decode() for name in redis.Redis(port=own_redis.port).scan_iter("*generation*")}
    assert names == {"LIMITS:first/generation", "LIMITS:second/generation"}

"""Limits that bind holders (docs/design.md, "Identities"), served: 30 uses sent at once, spread
over an identity's 3 keys with a quota of 5, pass exactly 5 under gunicorn's default
number of workers counting in the host's file, and on two servers sharing one database and
one Redis; a partner key with a quota of 3 and the keys it makes get 3 uses in all."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.server.test_gunicorn import sdk_key
from tests.server.test_redis_limits import TEST_REDIS_URL, needs_redis

# gunicorn.conf.py's default: two workers per CPU, plus one.
DEFAULT_WORKERS = 2 * (os.cpu_count() or 1) + 1
USES = 30


def identity_with_keys(server, manager: str, quota: int, keys: int = 3) -> tuple[str, list[str]]:
    made = server.request(
        "POST",
        "/api/identities",
        manager,
        {"external_id": "customer-42", "quota": {"requests": quota, "period": "day"}},
    )
    assert made.status == 201, made.body
    identity = made.json()["id"]
    held = []
    for number in range(keys):
        body = {"name": f"held {number}", "kind": "custom", "scopes": ["monitor:read"]}
        answer = server.request("POST", "/api/keys", manager, body | {"identity": identity})
        assert answer.status == 201, answer.body
        held.append(answer.json()["key"])
    return identity, held


def uses_at_once(servers: list, keys: list[str]) -> list[int]:
    """USES forward-auth checks at once, spread over `keys` and `servers`."""

    def use(number: int) -> int:
        server = servers[number % len(servers)]
        return server.request("GET", "/api/forward-auth", keys[number % len(keys)]).status

    with ThreadPoolExecutor(max_workers=USES) as pool:
        return list(pool.map(use, range(USES)))


def test_an_identitys_quota_holds_across_the_default_workers(start_server):
    server = start_server(workers=DEFAULT_WORKERS)
    manager = sdk_key(server)
    identity, keys = identity_with_keys(server, manager, quota=5)
    statuses = uses_at_once([server], keys)
    assert statuses.count(204) == 5, statuses
    assert set(statuses) == {204, 429}, statuses
    read = server.request("GET", f"/api/identities/{identity}", manager).json()
    assert read["quota_remaining"] == 0


@needs_redis
def test_an_identitys_quota_holds_on_two_servers_sharing_redis(start_server, redis_prefix):
    env = {"RATELIMIT_STORAGE_URI": TEST_REDIS_URL, "RATELIMIT_KEY_PREFIX": redis_prefix}
    first = start_server(workers=2, env=env)
    second = start_server(workers=2, env={**env, "DATABASE_URL": first.database})
    manager = sdk_key(first)
    _, keys = identity_with_keys(first, manager, quota=5)
    statuses = uses_at_once([first, second], keys)
    assert statuses.count(204) == 5, statuses


@pytest.mark.parametrize("generations", [5])
def test_a_partner_and_every_key_it_makes_get_its_quota_in_all(start_server, generations):
    server = start_server(workers=DEFAULT_WORKERS)
    manager = sdk_key(server)
    body = {"name": "partner", "kind": "sdk_integration", "quota": {"requests": 3, "period": "day"}}
    keys = [server.request("POST", "/api/keys", manager, body).json()["key"]]
    allowed = 0
    for _ in range(generations):
        made = server.request(
            "POST", "/api/keys", keys[-1], {"name": "g", "kind": "sdk_integration"}
        )
        if made.status == 201:
            allowed += 1
            keys.append(made.json()["key"])
    statuses = uses_at_once([server], keys)
    allowed += statuses.count(204)
    assert allowed == 3, (allowed, statuses)

"""Each worker answers checks from the rows of keys it has seen (app/access/seen.py), and every
change made through the service reaches every worker once it is answered: many trials of a
key seen by every worker, then revoked, disabled, narrowed or fenced, then checked at once
on every worker. Counted on one host (its file) and on two servers sharing Redis; the late
checks must be 0. The trials are many because a late check is a race, which one lucky run
would not show."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.server.conftest import Server
from tests.server.test_gunicorn import in_parallel, sdk_key

WORKERS = 3
TRIALS = 16  # four of each change
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "")
# The checks of revoked and disabled keys are failed authentications: not limited here.
ENV = {"RATELIMIT_AUTH_FAILURES": "10000/minute"}
CHECK = "/api/forward-auth?scope=monitor:read"
# Each change, as its PUT body (None: DELETE), and what a check answers after it.
CHANGES = {
    "revoke": (None, 401),
    "disable": ({"enabled": False}, 401),
    "narrow": ({"scopes": ["site:read"]}, 403),
    "fence": ({"allowed_ips": ["192.0.2.1"]}, 403),
}


def trials(servers: list[Server]) -> Counter:
    """Every change TRIALS / 4 times: the answers of the checks made after it was answered
    (status per change), on every worker of every server."""
    sdk = sdk_key(servers[0])
    answers: Counter = Counter()
    for trial in range(TRIALS):
        name = list(CHANGES)[trial % len(CHANGES)]
        body, _ = CHANGES[name]
        made = servers[trial % len(servers)].request(
            "POST",
            "/api/keys",
            sdk,
            {"name": f"trial {trial}", "kind": "custom", "scopes": ["monitor:read", "site:read"]},
        )
        assert made.status == 201, made.body
        key = made.json()["key"]
        for server in servers:  # every worker reads and keeps its row
            warm = in_parallel(6 * WORKERS, lambda s=server, k=key: s.request("GET", CHECK, k))
            assert {answer.status for answer in warm} == {204}
        writer = servers[(trial + 1) % len(servers)]
        location = made.headers["Location"]
        changed = (
            writer.request("DELETE", location, sdk)
            if body is None
            else writer.request("PUT", location, sdk, body)
        )
        assert changed.status in (200, 204), changed.body
        for server in servers:
            after = in_parallel(4 * WORKERS, lambda s=server, k=key: s.request("GET", CHECK, k))
            answers.update((name, answer.status) for answer in after)
    return answers


def assert_none_late(answers: Counter, servers: int) -> None:
    per_change = TRIALS // len(CHANGES) * 4 * WORKERS * servers
    expected = Counter({(name, status): per_change for name, (_, status) in CHANGES.items()})
    assert answers == expected  # any 204 there is a late check


def test_no_worker_of_a_host_lets_a_changed_key_through_after_the_answer(start_server):
    server = start_server(workers=WORKERS, env=ENV)
    assert_none_late(trials([server]), 1)


@pytest.mark.skipif(not TEST_REDIS_URL, reason="TEST_REDIS_URL is not set: Redis not tested")
def test_no_worker_of_two_servers_on_one_redis_lets_a_changed_key_through(
    start_server, redis_prefix
):
    env = {**ENV, "RATELIMIT_STORAGE_URI": TEST_REDIS_URL, "RATELIMIT_KEY_PREFIX": redis_prefix}
    first = start_server(workers=WORKERS, env=env)
    second = start_server(workers=WORKERS, env={**env, "DATABASE_URL": first.database})
    assert_none_late(trials([first, second]), 2)

"""A change answered as done is refused by every worker of every host on its next request,
whatever Redis does (app/access/seen.py): five workers, each holding the rows of three keys,
a Redis of the test's own paused (SIGSTOP) for 1.5 seconds from before, during or after a
delete, a disable and a narrowing of those keys (or from before them until they are
answered), checks from many threads before and after (and, in half the trials, during) the
pause. Any check sent after a change's answer that
passes is a late one: there must be none, on one host and on two sharing PostgreSQL (or
SQLite) and Redis.
"""

from __future__ import annotations

import random
import shutil
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.server.conftest import Server
from tests.server.test_gunicorn import in_parallel, sdk_key
from tests.server.test_redis_down import OwnRedis

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"
)

WORKERS = 5
HOST_WORKERS = 3  # each of two hosts, on a machine of few cores
LIMITLESS = "100000/minute"
ENV = {
    "RATELIMIT_AUTH_FAILURES": LIMITLESS,  # the checks of changed keys fail: not limited here
    "RATELIMIT_PER_KEY": LIMITLESS,
    "RATELIMIT_INTROSPECT": LIMITLESS,
}
CHECK = "/api/forward-auth?scope=monitor:read"
PASSED = 204
# Each change as its request body (None: DELETE).
CHANGES = {"delete": None, "disable": {"enabled": False}, "narrow": {"scopes": ["site:read"]}}
TIMINGS = ("before", "during", "after", "throughout")
PAUSE = 1.5  # seconds Redis is stopped (but throughout: until the changes are answered)
CHECK_AFTER = 6.0  # seconds of checks after the pause: longer than a row is ever kept
CHECKERS = 8


class Checks:
    """Threads checking every key on every server, in turn, while `on` is set: each check's
    key, the time it was sent and its status."""

    def __init__(self, servers: list[Server], keys: dict[str, str]) -> None:
        self.servers, self.keys = servers, keys
        self.on = threading.Event()
        self.done = threading.Event()
        self.made: list[tuple[str, float, int]] = []
        self.lock = threading.Lock()
        self.flying = 0
        self.pool = ThreadPoolExecutor(max_workers=CHECKERS)
        self.futures = [self.pool.submit(self._check, n) for n in range(CHECKERS)]

    def _check(self, n: int) -> None:
        names = list(self.keys)
        turn = n
        while not self.done.is_set():
            if not self.on.wait(0.05):
                continue
            name = names[turn % len(names)]
            server = self.servers[turn // len(names) % len(self.servers)]
            turn += 1
            with self.lock:
                self.flying += 1
            sent = time.monotonic()
            try:
                status = server.request("GET", CHECK, self.keys[name]).status
            finally:
                with self.lock:
                    self.flying -= 1
            with self.lock:
                self.made.append((name, sent, status))

    def pause(self) -> None:
        """No check sent until `on` is set again, and none still waiting for its answer."""
        self.on.clear()
        while True:
            with self.lock:
                if self.flying == 0:
                    return
            time.sleep(0.01)

    def stop(self) -> None:
        self.done.set()
        self.on.set()
        for future in self.futures:
            future.result()
        self.pool.shutdown()


def warm(servers: list[Server], keys: dict[str, str]) -> None:
    """Every worker of every server reads and keeps each key's row: many checks at once."""
    for server in servers:
        for key in keys.values():
            answers = in_parallel(8 * WORKERS, lambda s=server, k=key: s.request("GET", CHECK, k))
            assert {answer.status for answer in answers} == {PASSED}


def trial(servers, sdk, redis: OwnRedis, timing: str, busy: bool) -> tuple[Counter, float]:
    """One pause of Redis around the three changes: the checks sent after each change's
    answer that passed, by change, and the seconds the changes took to be answered."""
    made = {}
    for name in CHANGES:
        answer = servers[0].request(
            "POST",
            "/api/keys",
            sdk,
            {"name": name, "kind": "custom", "scopes": ["monitor:read", "site:read"]},
        )
        assert answer.status == 201, answer.body
        made[name] = (answer.json()["key"], answer.headers["Location"])
    keys = {name: key for name, (key, _) in made.items()}
    warm(servers, keys)
    checks = Checks(servers, keys)
    answered: dict[str, float] = {}
    took: list[float] = []  # seconds until every change was answered
    writer = servers[-1]

    def change(name: str) -> None:
        body, location = CHANGES[name], made[name][1]
        if body is None:
            answer = writer.request("DELETE", location, sdk)
        else:
            answer = writer.request("PUT", location, sdk, body)
        answered[name] = time.monotonic()
        assert answer.status in (200, 204), answer.body

    def changes() -> None:
        started = time.monotonic()
        in_parallel_each(change, list(CHANGES))
        took.append(time.monotonic() - started)

    def stopped(after: float, seconds: float) -> threading.Thread:
        """Redis stopped `after` seconds from now, for `seconds`."""

        def stop() -> None:
            time.sleep(after)
            redis.signal(signal.SIGSTOP)
            time.sleep(seconds)
            redis.signal(signal.SIGCONT)

        thread = threading.Thread(target=stop)
        thread.start()
        return thread

    try:
        checks.on.set()
        time.sleep(0.5)
        if not busy:
            checks.pause()  # the workers see no request while Redis is stopped
        if timing == "before":  # the writers find Redis silent: they count in their file
            stall = stopped(0, PAUSE)
            time.sleep(0.2)
            changes()
            stall.join()
        elif timing == "during":  # stopped while the changes are made, at some point
            stall = stopped(random.uniform(0, 0.03), PAUSE)  # noqa: S311
            changes()
            stall.join()
        elif timing == "after":  # stopped once they are answered
            changes()
            stopped(0, PAUSE).join()
        else:  # stopped until they are answered
            redis.signal(signal.SIGSTOP)
            time.sleep(0.2)
            changes()
            redis.signal(signal.SIGCONT)
        checks.on.set()
        time.sleep(CHECK_AFTER)
    finally:
        redis.signal(signal.SIGCONT)
        checks.stop()
    late = Counter()
    for name, sent, status in checks.made:
        if sent > answered[name] and status == PASSED:
            late[name] += 1
    late.update({name: 0 for name in CHANGES})
    if sum(late.values()):
        last = max(sent - answered[name] for name, sent, status in checks.made if status == PASSED)
        print(f"late checks up to {last:.1f} s after the answer")
    after = sum(1 for name, sent, _ in checks.made if sent > answered[name])
    assert after > 10 * len(CHANGES), after  # the checks after the answers were made
    return late, took[0]


def in_parallel_each(call, items: list) -> None:
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        for result in pool.map(call, items):
            assert result is None


def trials(servers: list[Server], redis: OwnRedis, rounds: int) -> dict:
    sdk = sdk_key(servers[0])
    found = {}
    for number in range(rounds):
        for timing in TIMINGS:
            busy = number % 2 == 1
            found[(number, timing, "busy" if busy else "idle")] = trial(
                servers, sdk, redis, timing, busy
            )
    print("\nlate checks (trial, pause, checks during it): by change; seconds to answer")
    for (number, timing, mode), (late, took) in found.items():
        print(number, timing, mode, dict(late), f"{took:.1f}")
    return found


def assert_none_late(found: dict) -> None:
    late = {trial: dict(counts) for trial, (counts, _) in found.items() if sum(counts.values())}
    assert late == {}


def env_for(redis: OwnRedis) -> dict[str, str]:
    return {**ENV, "RATELIMIT_STORAGE_URI": redis.url}


def test_no_check_passes_after_a_change_with_redis_paused_around_it(start_server, own_redis):
    server = start_server(workers=WORKERS, env=env_for(own_redis))
    assert_none_late(trials([server], own_redis, rounds=4))


def test_no_check_of_two_hosts_passes_after_a_change_with_redis_paused(start_server, own_redis):
    first = start_server(workers=HOST_WORKERS, env=env_for(own_redis))
    second = start_server(
        workers=HOST_WORKERS, env={**env_for(own_redis), "DATABASE_URL": first.database}
    )
    assert_none_late(trials([first, second], own_redis, rounds=2))

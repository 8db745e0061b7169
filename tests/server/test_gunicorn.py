"""The service under real gunicorn workers (docs/design.md, "Authentication"): the first start
makes one organization however many workers race, a deleted or expired key fails on every
worker at once, and a killed worker is replaced with the data intact. HOST may be an IPv6
address (`HOST=::1 make run`).

The tests that only look at a first start (its organizations, keys and output) share one
server as it first started; those that change things share another, each in an
organization of its own."""

from __future__ import annotations

import http.client
import os
import runpy
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from tests.printed import FULL_KEY_CANDIDATE, NOT_SHOWN_AGAIN
from tests.processes import GUNICORN, PROJECT, run, service_env
from tests.server.conftest import (
    READY,
    START_TIMEOUT,
    Org,
    Server,
    free_port,
    serving,
)

WORKERS = 3


@pytest.fixture(scope="module")
def first_start(tmp_path_factory) -> Iterator[Server]:
    """A server as several workers first started it, for the tests that only look at it: none
    of them writes anything, so each sees the first start's organizations, keys and output."""
    with serving(tmp_path_factory, "first-start", 2 * WORKERS) as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """One server for the tests that change things, each in an organization of its own
    (server_org); a test that kills a worker waits until its replacement is ready."""
    with serving(tmp_path_factory, "gunicorn", WORKERS) as server:
        yield server


def organizations(server) -> list[str]:
    return [name for (name,) in server.query("SELECT name FROM organizations")]


def key_count(server) -> int:
    [(count,)] = server.query("SELECT count(*) FROM api_keys")
    return count


def printed_keys(server) -> list[str]:
    return FULL_KEY_CANDIDATE.findall(server.output())


def sdk_key(server) -> str:
    """The printed key that may manage keys: the SDK Integration key."""
    statuses = {key: server.request("GET", "/api/keys", key).status for key in printed_keys(server)}
    assert sorted(statuses.values()) == [200, 403], statuses
    return next(key for key, status in statuses.items() if status == 200)


def in_parallel(count: int, call) -> list:
    """`count` calls at once, each on its own connection: several workers must answer."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(lambda _: call(), range(count)))


def test_first_start_with_several_workers_makes_exactly_one_default_organization(first_start):
    assert organizations(first_start) == ["default"]
    assert key_count(first_start) == 2


def test_first_start_prints_the_two_keys_exactly_once(first_start):
    output = first_start.output()
    keys = printed_keys(first_start)
    assert len(keys) == 2 and len(set(keys)) == 2, output
    notices = [line for line in output.splitlines() if NOT_SHOWN_AGAIN.search(line)]
    assert len(notices) == 1, output


def test_printed_sdk_key_authenticates_over_http(first_start):
    server = first_start
    sdk = sdk_key(server)
    answers = in_parallel(2 * WORKERS, lambda: server.request("GET", "/api/keys", sdk))
    assert [answer.status for answer in answers] == [200] * (2 * WORKERS)
    listing = answers[0].json()
    assert {(k["name"], k["kind"]) for k in listing["data"]} == {
        ("Telemetry", "telemetry"),
        ("SDK Integration", "sdk_integration"),
    }


def test_healthz_answers_without_authentication(first_start):
    answer = first_start.request("GET", "/healthz")
    assert (answer.status, answer.json()) == (200, {"status": "ok", "counts": "ok"})


def test_deleted_key_is_refused_by_every_worker_at_once(server, server_org: Org):
    sdk = server_org.sdk
    body = {"name": "doomed", "kind": "custom", "scopes": ["monitor:read"]}
    created = server.request("POST", "/api/keys", sdk, body)
    assert created.status == 201, created.body
    doomed = created.json()["key"]
    # Every worker gets the chance to authenticate (and so to cache) the key first.
    warm = in_parallel(3 * WORKERS, lambda: server.request("GET", "/api/keys", doomed))
    assert {answer.status for answer in warm} == {200}
    deleted = server.request("DELETE", created.headers["Location"], sdk)
    assert deleted.status == 204, deleted.body
    after = in_parallel(3 * WORKERS, lambda: server.request("GET", "/api/keys", doomed))
    after += [server.request("GET", "/api/keys", doomed) for _ in range(2 * WORKERS)]
    assert [answer.status for answer in after] == [401] * (5 * WORKERS)
    assert all(a.headers.get("WWW-Authenticate") == 'Basic realm="api"' for a in after)


def test_killed_worker_is_replaced_and_the_data_is_still_there(server, server_org: Org):
    sdk = server_org.sdk
    body = {"name": "survivor", "kind": "custom", "scopes": ["site:read"]}
    created = server.request("POST", "/api/keys", sdk, body)
    assert created.status == 201, created.body
    survivor = created.json()["key"]
    made = sorted(organizations(server))
    before = server.worker_pids()
    assert len(before) == WORKERS, before
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    server.wait_until_ready(len(server.ready_pids) + 1)  # a new worker has loaded the app
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = server.worker_pids()
        if victim not in now and len(now) == WORKERS:
            break
        time.sleep(0.05)
    assert victim not in now and len(now) == WORKERS, (before, now)
    assert server.ready_pids[-1] in now
    answers = in_parallel(3 * WORKERS, lambda: server.request("GET", "/api/keys", survivor))
    assert {answer.status for answer in answers} == {200}
    names = {key["name"] for key in answers[0].json()["data"]}
    assert names == {"Telemetry", "SDK Integration", "survivor"}
    assert sorted(organizations(server)) == made  # the new worker made no organization
    assert len(printed_keys(server)) == 2  # nor printed any key


def test_a_key_expires_on_every_worker_at_its_instant(server, server_org: Org):
    """Expiry set after every worker has seen the key, and a rotation's grace period: both
    end on every worker at the instant, with 401 expired_key."""
    sdk = server_org.sdk
    body = {"name": "short-lived", "kind": "custom", "scopes": ["monitor:read"]}
    made = server.request("POST", "/api/keys", sdk, body).json()["key"]
    rotated = server.request("POST", "/api/keys", sdk, body).json()["key"]
    for key in (made, rotated):
        warm = in_parallel(3 * WORKERS, lambda key=key: server.request("GET", "/api/keys", key))
        assert {answer.status for answer in warm} == {200}
    ends = datetime.now(UTC) + timedelta(seconds=2)
    expiry = {"expires_at": ends.isoformat()}
    assert server.request("PUT", f"/api/keys/{made}", sdk, expiry).status == 200
    rotation = server.request("POST", f"/api/keys/{rotated}/rotate", sdk, {"grace_seconds": 2})
    assert rotation.status == 201, rotation.body
    replacement = rotation.json()["key"]
    for key in (made, rotated):
        during = in_parallel(3 * WORKERS, lambda key=key: server.request("GET", "/api/keys", key))
        assert {answer.status for answer in during} == {200}
    time.sleep(max(0.0, (ends - datetime.now(UTC)).total_seconds()) + 0.5)
    for key in (made, rotated):
        after = in_parallel(3 * WORKERS, lambda key=key: server.request("GET", "/api/keys", key))
        after += [server.request("GET", "/api/keys", key) for _ in range(2 * WORKERS)]
        assert [answer.status for answer in after] == [401] * (5 * WORKERS)
        assert {answer.json()["code"] for answer in after} == {"expired_key"}
    answers = in_parallel(3 * WORKERS, lambda: server.request("GET", "/api/keys", replacement))
    assert {answer.status for answer in answers} == {200}


def test_importing_wsgi_builds_the_application_and_touches_no_database(tmp_path):
    """The first start is gunicorn's on_starting (or `flask first-start`), never an import:
    importing wsgi.py forks nothing and neither migrates nor creates anything."""
    database = tmp_path / "untouched.sqlite3"
    env = service_env(DATABASE_URL=f"sqlite:///{database}")
    completed = run([sys.executable, "-c", "import wsgi; print(wsgi.app.name)"], env)
    assert completed.stdout.split()[0] == "app"
    assert not database.exists()
    assert FULL_KEY_CANDIDATE.findall(completed.stdout + completed.stderr) == []


def test_a_first_start_that_fails_stops_gunicorn_with_its_message(tmp_path):
    """A database file that cannot be made: gunicorn exits before any worker, saying why."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    env = service_env(DATABASE_URL=f"sqlite:///{blocked}/keys.sqlite3")  # a folder in a file
    gunicorn = [*GUNICORN, "--bind", f"127.0.0.1:{free_port()}", "wsgi:app"]
    completed = run(gunicorn, env, check=False, timeout=START_TIMEOUT)
    assert completed.returncode != 0
    assert READY not in completed.stderr
    assert "a-file" in completed.stderr


@pytest.mark.parametrize(
    ("host", "bind"),
    [
        (None, "127.0.0.1:5000"),
        ("192.0.2.1", "192.0.2.1:5000"),
        ("::1", "[::1]:5000"),
        ("::", "[::]:5000"),
        ("[::1]", "[::1]:5000"),
        ("fe80::1%eth0", "[fe80::1%eth0]:5000"),
    ],
)
def test_gunicorn_conf_brackets_an_ipv6_host(monkeypatch, host, bind):
    monkeypatch.delenv("PORT", raising=False)
    if host is None:
        monkeypatch.delenv("HOST", raising=False)
    else:
        monkeypatch.setenv("HOST", host)
    assert runpy.run_path(str(PROJECT / "gunicorn.conf.py"))["bind"] == [bind]


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_host_may_be_an_ipv6_address(tmp_path):
    """`HOST=::1 make run`: gunicorn listens on [::1]:PORT and the service answers there."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
        probe.bind(("::1", 0))
        port = probe.getsockname()[1]
    env = service_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'keys.sqlite3'}", HOST="::1", PORT=str(port)
    )
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            [*GUNICORN, "--workers", "1", "wsgi:app"],
            cwd=PROJECT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT  # a bound for a hang, not a speed
        while READY not in stderr.read_text():
            assert process.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        assert f"Listening at: http://[::1]:{port}" in stderr.read_text()
        connection = http.client.HTTPConnection("::1", port, timeout=10)
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        process.terminate()
        process.wait(timeout=15)

"""Every limit counted once per host, as `make run` serves (docs/design.md, "Promises kept by
default"): gunicorn with its default number of workers and the default storage (host://, a file
every worker shares), no server to install. Of any number of uses of a key limited to R, sent at
once or one after another, on new connections that any worker may take, through the REST API and
forward auth together, exactly R pass. A storage that would count in each worker is
refused at start, and the master process never builds the application."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from app.domain import keyformat
from tests.processes import GUNICORN, PROJECT, service_env
from tests.server.conftest import free_port, serving
from tests.server.test_gunicorn import in_parallel, sdk_key

# gunicorn.conf.py's default: two workers per CPU, plus one.
DEFAULT_WORKERS = 2 * (os.cpu_count() or 1) + 1
# The default storage, in the project's instance folder: each test's keys are its own.
DEFAULT = {"RATELIMIT_STORAGE_URI": "host://"}
DOORS = ("/api/keys", "/api/forward-auth")
ALLOWED = {200, 204}


def limited_key(server, manager: str, requests: int, seconds: int) -> str:
    body = {
        "name": "limited",
        "kind": "custom",
        "scopes": ["monitor:read"],
        "rate_limit": {"requests": requests, "seconds": seconds},
    }
    answer = server.request("POST", "/api/keys", manager, body)
    assert answer.status == 201, answer.body
    return answer.json()["key"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server as `make run` starts it, for the module's tests (each uses keys of its own)."""
    with serving(tmp_path_factory, "host-limits", DEFAULT_WORKERS, DEFAULT) as server:
        yield server, sdk_key(server)


@pytest.mark.parametrize("trial", range(3))
def test_uses_sent_at_once_through_both_doors_pass_exactly_the_limit(served, trial):
    server, manager = served
    key = limited_key(server, manager, requests=5, seconds=60)
    calls = iter(range(40))

    def use():
        return server.request("GET", DOORS[next(calls) % 2], key).status

    statuses = in_parallel(40, use)
    assert sum(status in ALLOWED for status in statuses) == 5, statuses
    assert statuses.count(429) == 35, statuses


def test_a_limit_per_hour_holds_for_uses_sent_at_once(served):
    server, manager = served
    key = limited_key(server, manager, requests=10, seconds=3600)
    statuses = in_parallel(32, lambda: server.request("GET", "/api/forward-auth", key).status)
    assert sum(status in ALLOWED for status in statuses) == 10, statuses


def test_uses_one_after_another_see_the_remaining_count_go_down(served):
    server, manager = served
    key = limited_key(server, manager, requests=5, seconds=60)
    answers = [server.request("GET", DOORS[number % 2], key) for number in range(12)]
    assert [answer.status in ALLOWED for answer in answers] == [True] * 5 + [False] * 7
    remaining = [
        int(re.search(r";r=(\d+)", answer.headers["RateLimit"]).group(1)) for answer in answers
    ]
    assert remaining == [4, 3, 2, 1, 0] + [0] * 7
    assert all(answer.status == 429 for answer in answers[5:])


@pytest.mark.parametrize("trial", range(3))
def test_failed_authentications_at_once_are_counted_exactly(start_server, trial):
    """At most the limit's number of guesses is tried: an address's attempt is counted
    before its key is looked up, and given back when the key is valid."""
    # The address's count in a file of this server's own (each trial starts afresh).
    server = start_server(workers=DEFAULT_WORKERS, env={"RATELIMIT_AUTH_FAILURES": "5/minute"})
    guesses = iter([keyformat.new_key("ak_")[0] for _ in range(30)])  # well formed, unknown
    statuses = in_parallel(30, lambda: server.request("GET", "/api/keys", next(guesses)).status)
    assert statuses.count(401) == 5, statuses
    assert statuses.count(429) == 25, statuses


def serve(tmp_path: Path, workers: int, env: dict[str, str]) -> subprocess.Popen:
    settings = {"DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite3", **env}
    command = [*GUNICORN, "--workers", str(workers)]
    command += ["--bind", f"127.0.0.1:{free_port()}", "wsgi:app"]
    return subprocess.Popen(
        command,
        cwd=PROJECT,
        env=service_env(**settings),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_counting_in_each_workers_memory_is_refused_at_start_naming_the_fix(tmp_path):
    process = serve(tmp_path, 3, {"RATELIMIT_STORAGE_URI": "memory://"})
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"gunicorn served with counts in each worker:\n{output}")
    assert process.returncode != 0, output
    assert "RATELIMIT_STORAGE_URI=memory:// counts in each worker's own memory" in output
    assert "host://" in output and "redis://" in output
    assert "Worker ready" not in output


def test_one_worker_may_count_in_its_memory(start_server):
    server = start_server(workers=1, env={"RATELIMIT_STORAGE_URI": "memory://"})
    assert server.request("GET", "/healthz").status == 200


def test_the_master_process_does_not_build_the_application(served):
    """Only the workers import the application: the master maps none of its compiled
    dependencies and stays small."""
    server, _ = served
    master = server.process.pid
    maps = Path(f"/proc/{master}/maps").read_text()
    for library in ("orjson", "sqlalchemy", "pydantic_core", "psycopg"):
        assert library not in maps, library
    status = Path(f"/proc/{master}/status").read_text()
    rss_kib = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))
    assert rss_kib < 40 * 1024, rss_kib

"""Hosts recorded in the database (docs/design.md, "Many hosts": per-host counting is never
silently wrong): a second host that would count in its own file (host://) beside a host
serving the same database is refused at start, naming redis://; a host counting in its own
file that finds another host later answers /healthz 503 with the reason, sets
api_keys_counts_apart and says so in the log."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.server.conftest import launch
from tests.server.test_redis_limits import TEST_REDIS_URL, needs_redis

BEAT = {"HOSTS_HEARTBEAT_SECONDS": "1"}


def test_a_second_host_counting_in_its_own_file_is_refused_at_start(start_server, tmp_path):
    first = start_server(workers=2, env=BEAT)
    assert first.query("SELECT storage FROM hosts") == [("host",)]
    second = launch(tmp_path / "second", 2, {**BEAT, "DATABASE_URL": first.database})
    try:
        second.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        second.stop()
        pytest.fail(f"the second host served beside the first:\n{second.output()}")
    output = second.output()
    assert second.process.returncode != 0, output
    assert "another host" in output and "RATELIMIT_STORAGE_URI=redis://" in output, output
    assert "Worker ready" not in output
    assert first.request("GET", "/healthz").status == 200  # the first host is not harmed


@needs_redis
def test_a_host_counting_in_its_own_file_reports_another_host_found_later(
    start_server, redis_prefix
):
    alone = start_server(workers=2, env=BEAT)
    assert alone.request("GET", "/healthz").json() == {"status": "ok", "counts": "ok"}
    shared = {"RATELIMIT_STORAGE_URI": TEST_REDIS_URL, "RATELIMIT_KEY_PREFIX": redis_prefix}
    other = start_server(workers=2, env={**BEAT, **shared, "DATABASE_URL": alone.database})
    assert other.request("GET", "/healthz").status == 200  # Redis: it counts with any host
    deadline = time.monotonic() + 30
    while (answer := alone.request("GET", "/healthz")).status != 503:
        assert time.monotonic() < deadline, answer.body
        time.sleep(0.5)
    assert answer.json()["code"] == "unavailable"
    assert "another host" in answer.json()["detail"]
    assert "RATELIMIT_STORAGE_URI=redis://" in answer.json()["detail"]
    assert "api_keys_counts_apart 1.0" in alone.request("GET", "/metrics").body.decode()
    assert "RATELIMIT_STORAGE_URI=host:// counts the limits" in alone.output()
    assert sorted(row[0] for row in alone.query("SELECT storage FROM hosts")) == [
        "host",
        "redis",
    ]

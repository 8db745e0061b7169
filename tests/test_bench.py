"""`make bench` is not part of the suite; this only checks that its scripts load, that the
yardstick answers, that wrk's output is read right, that a missing wrk is named, and that
a baseline checkout answers the compared scenarios beside this one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench import bare, run

WRK_OUTPUT = """\
Running 5s test @ http://127.0.0.1:5000/ping
  2 threads and 32 connections
  Latency Distribution
     50%    4.21ms
     75%    5.00ms
     90%    6.10ms
     99%  812.00us
  30000 requests in 5.00s, 4.50MB read
  Non-2xx or 3xx responses: 12
Requests/sec:   6000.50
"""


def test_the_bare_app_answers_ping():
    assert bare.app.test_client().get("/ping").json == {"status": "ok"}


def test_wrk_output_is_read_in_milliseconds():
    assert run.parse_wrk(WRK_OUTPUT) == {
        "rps": 6000.5,
        "p50_ms": 4.21,
        "p99_ms": 0.812,
        "non_2xx": 12,
        "socket_errors": None,
    }


def test_a_missing_wrk_is_named_with_its_install_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SystemExit, match=r"apt-get install -y wrk"):
        run.main()


def test_the_profiler_script_parses():
    ast.parse((Path(run.BENCH) / "profile.py").read_text())


def test_a_baseline_answers_each_compared_scenario_right_after_this_checkout():
    plan = [
        run.Scenario("get", "small", "/api/keys/x"),
        run.Scenario("create", "small", "/api/keys"),
        run.Scenario("get_big", "big", "/api/keys/y"),
    ]
    assert [(s.name, s.server, s.path) for s in run.with_baseline(plan)] == [
        ("get", "small", "/api/keys/x"),
        ("get@baseline", "small@baseline", "/api/keys/x"),
        ("create", "small", "/api/keys"),
        ("get_big", "big", "/api/keys/y"),
        ("get_big@baseline", "big@baseline", "/api/keys/y"),
    ]

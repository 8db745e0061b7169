"""`make bench` is not part of the suite; this only checks that its scripts load, that the
yardstick answers, that wrk's output is read right, that a missing wrk is named, that a
baseline checkout answers the compared scenarios beside this one, that the memory script's
mixed run asks every endpoint but /mcp, and that after it a served worker's peak is within
its bound."""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import runpy
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from bench import bare, mixed, run
from bench.seed import Seeded
from tests import processes

TARGETS = [f"ak_r{n}" for n in range(8)]
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


def test_the_mcp_scenario_calls_get_key_on_gets_key_with_a_bearer_key():
    seeded = Seeded("ak_reader", "ak_target...", "ak_writer", "ak_written", TARGETS, 100)
    plan = {scenario.name: scenario for scenario in run.scenarios(seeded, seeded)}
    mcp, get = plan["mcp_get_key"], plan["get"]
    assert (mcp.path, mcp.script, mcp.auth) == ("/mcp", "mcp.lua", get.auth)
    env = mcp.env()
    assert env["BENCH_KEY"] == "ak_reader"
    message = json.loads(env["BENCH_BODY"])
    assert message["method"] == "tools/call"
    assert message["params"] == {"name": "get_key", "arguments": {"key": "ak_target..."}}
    assert (Path(run.BENCH) / "mcp.lua").is_file()


def test_the_rotate_scenario_follows_chains_from_fresh_keys_for_each_run(monkeypatch):
    """A rotated key answers 409, so each wrk run (the warm-up included) starts CHAINS
    chains from keys nobody rotated, and rotate.lua follows each to its newest key."""
    monkeypatch.setattr(run, "CHAINS", 3)
    seeded = Seeded("ak_reader", "ak_target...", "ak_writer", "ak_written", TARGETS, 100)
    plan = {scenario.name: scenario for scenario in run.scenarios(seeded, seeded)}
    rotate = plan["rotate"]
    assert (rotate.script, rotate.auth, rotate.expect) == ("rotate.lua", "ak_writer", 201)
    first, second = rotate.env(), rotate.env()
    assert json.loads(first["BENCH_BODY"]) == {"grace_seconds": 3600}
    assert first["BENCH_TARGETS"] == "ak_r0,ak_r1,ak_r2"
    assert second["BENCH_TARGETS"] == "ak_r3,ak_r4,ak_r5"
    script = (Path(run.BENCH) / "rotate.lua").read_text()
    assert '"/api/keys/" .. identifier .. "/rotate"' in script
    stale = plan["unused_since_50_big"]
    assert (stale.server, stale.path.partition("?")[2]) == (
        "big",
        "unused_since=2999-01-01T00:00:00Z",
    )


def test_the_checks_scenarios_ask_forward_auth_and_introspection_with_the_reader():
    seeded = Seeded("ak_reader", "ak_target...", "ak_writer", "ak_written", TARGETS, 100)
    plan = {scenario.name: scenario for scenario in run.scenarios(seeded, seeded)}
    forward, introspect = plan["forward_auth"], plan["introspect"]
    assert (forward.path, forward.auth, forward.expect) == (
        "/api/forward-auth?scope=monitor:read",
        "ak_reader",
        204,
    )
    assert (introspect.path, introspect.script, introspect.auth) == (
        "/api/introspect",
        "post.lua",
        "ak_reader",
    )
    assert json.loads(introspect.env()["BENCH_BODY"]) == {"token": "ak_reader"}


def test_the_service_is_measured_as_make_run_serves_it(monkeypatch):
    """Limits on in each worker's memory (none of their settings but unspendable
    allowances), gunicorn.conf.py with its access log; limits off only on its own line."""
    monkeypatch.setenv("BENCH_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing answers there
    settings = run.service_settings("sqlite:///small", "sqlite:///big")
    assert set(settings) == {"service", "mcp", "limits_off", "unobserved", "big"}
    assert settings["mcp"] == settings["service"]  # its own workers: their RSS apart
    for name in ("service", "big"):
        assert set(settings[name]) == {"DATABASE_URL", *run.UNSPENDABLE}
    assert settings["limits_off"]["RATELIMIT_ENABLED"] == "false"
    assert settings["unobserved"] == settings["service"] | run.UNOBSERVED


def test_bare_flask_is_served_with_the_projects_settings_and_no_access_log(monkeypatch):
    project = runpy.run_path(str(run.PROJECT / "gunicorn.conf.py"))
    monkeypatch.delenv("BENCH_BARE_ACCESS_LOG", raising=False)
    bare_settings = runpy.run_path(str(run.BARE_CONFIG))
    assert project["accesslog"] == "-"
    assert bare_settings["accesslog"] is None
    assert bare_settings["workers"] == project["workers"]
    assert bare_settings["logger_class"] == project["logger_class"]
    monkeypatch.setenv("BENCH_BARE_ACCESS_LOG", "on")
    assert runpy.run_path(str(run.BARE_CONFIG))["accesslog"] == "-"


def test_bench_scenarios_names_the_scenarios_to_run():
    plan = [run.Scenario(name, "big", "/api/keys") for name in ("get_big", "list_50")]
    assert run.chosen(plan, "") == plan
    assert [scenario.name for scenario in run.chosen(plan, " list_50, nothing")] == ["list_50"]


# A worker's peak as `make run` serves (SQLite, the limits counted per host, usage,
# metrics, webhooks sent), after the mixed run of every endpoint but /mcp (bench/mixed.py):
# 62.9 to 63.3 MiB measured over ten rounds (bench/README.md, "A worker's memory"; the aim
# of 60 is not met), held here with 1.2 MiB for the noise of a shared machine.
WORKER_PEAK_MIB = 64.5
# Not served by the mixed run: /mcp (measured apart, after it), Flask's own static folder
# (the service has none).
UNMIXED = {"mcp.mcp", "static"}
# Forward auth answers every method alike (a gateway forwards its request's): the mixed run
# asks GET and POST.
ALIKE = {("checks.forward_auth", method) for method in ("PUT", "PATCH", "DELETE")}


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}  # the mixed run's receiver is on this machine


def test_the_mixed_run_asks_every_endpoint_and_method_but_mcp_and_none_fails(app, client, org):
    hook, stop = mixed.receiver()
    asked, answers = set(), Counter()
    adapter = app.url_map.bind("localhost")
    basic = "Basic " + base64.b64encode(f"{org.sdk}:".encode()).decode()

    def ask(method, path, body=None, auth=basic, headers=None):
        endpoint, _ = adapter.match(path.partition("?")[0], method)
        asked.add((endpoint, method))
        sent = (headers or {}) | ({"Authorization": auth} if auth else {})
        with client.open(path, method=method, json=body, headers=sent) as answer:
            answers[answer.status_code] += 1
            return answer.status_code, answer.get_json(silent=True)

    try:
        mixed.mixed_round(ask, org.sdk, hook, 0)
        time.sleep(2)  # the sender delivers the round's event, so that a retry has one
        mixed.mixed_round(ask, org.sdk, hook, 1)
    finally:
        stop()
    every = {
        (rule.endpoint, method)
        for rule in app.url_map.iter_rules()
        if rule.endpoint not in UNMIXED
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    assert every - asked - ALIKE == set()
    assert max(answers) < 500 and answers[401] == 2, answers


def test_after_the_mixed_run_each_served_worker_peaks_within_its_bound():
    env = os.environ | {
        "BENCH_MEMORY_ROUNDS": "3",
        "BENCH_MEMORY_DATABASES": "sqlite",
        "BENCH_MEMORY_MCP": "off",
    }
    printed = processes.run([sys.executable, "-m", "bench.memory"], env, timeout=240).stdout
    answered = re.search(
        r"^sqlite, after 3 mixed rounds: (\d+) requests, answers by status: (.*)$", printed, re.M
    )
    assert answered, printed
    assert not re.search(r"\b5\d\d:", answered[2]), printed
    peaks = [float(peak) for peak in re.findall(r"^worker \d+: VmHWM (\d+\.\d)", printed, re.M)]
    assert len(peaks) == 2, printed
    assert max(peaks) <= WORKER_PEAK_MIB, printed
    assert re.search(
        r"^master \d+: VmHWM [\d.]+, VmRSS [\d.]+, Pss [\d.]+, Uss [\d.]+ MiB$", printed, re.M
    )

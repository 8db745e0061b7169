"""`make bench`: the service under gunicorn against a bare Flask app with the same gunicorn
settings, driven by wrk in alternating rounds; medians, ratios and peak RSS per worker;
then bench/memory.py's mixed run of every endpoint, each worker's peak after it.

Settings come from the environment (see bench/README.md): BENCH_KEYS, BENCH_BIG_KEYS,
BENCH_WORKERS, BENCH_WORKER_CLASS, BENCH_ROUNDS, BENCH_DURATION, BENCH_THREADS,
BENCH_CONNECTIONS, BENCH_OUTPUT.
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from app.config import ENVIRONMENT
from bench.seed import Seeded, seed

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
BIN = Path(sys.executable).parent
READY = "Worker ready (pid: "
# gunicorn's settings for bare Flask: the project's, without the first start and the log.
BARE_CONFIG = BENCH / "bare.conf.py"
WRK_MISSING = "wrk is not installed: run `apt-get install -y wrk` (or your system's equivalent)"
# The deep list page: the last full page of the reading organization of the small database,
# asked of both databases, so that the big one does the same work on a bigger table.
PAGE_SIZE = 50


def setting(name: str, default: int | str) -> int | str:
    value = os.environ.get(f"BENCH_{name}", default)
    return int(value) if isinstance(default, int) else value


# Chains of rotations per wrk run of `rotate`: one per connection keeps every connection
# busy, and one per thread more, since wrk asks for one request to check the script first.
CHAINS = setting("CONNECTIONS", 32) + setting("THREADS", 2)


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    port: int
    stderr: Path
    workers: list[int] = field(default_factory=list)

    def peak_rss_mb(self) -> dict[str, float]:
        """VmHWM (peak resident set) of each worker, in MB."""
        peaks = {}
        for pid in self.workers:
            status = Path(f"/proc/{pid}/status").read_text()
            kilobytes = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))
            peaks[str(pid)] = round(kilobytes / 1024, 1)
        return peaks

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(
    name: str,
    app: str,
    workdir: Path,
    env: dict[str, str],
    project: Path = PROJECT,
    config: Path | None = None,
) -> Server:
    """gunicorn with `config` (the project's gunicorn.conf.py unless given), the benchmark's
    workers and class (`project`: this checkout, or the baseline's)."""
    port = free_port()
    server_env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT}
    server_env |= {"PYTHONPATH": str(project), **env}
    workers = setting("WORKERS", 4)
    config = config or project / "gunicorn.conf.py"
    # As `make run` starts it: the interpreter optimized (-OO), for both services.
    command = [str(BIN / "python"), "-OO", "-m", "gunicorn", "--config", str(config)]
    command += ["--workers", str(workers), "--worker-class", setting("WORKER_CLASS", "sync")]
    command += ["--bind", f"127.0.0.1:{port}", app]
    stderr = workdir / f"{name}.stderr"
    with stderr.open("wb") as err:
        process = subprocess.Popen(  # noqa: S603 (gunicorn, with arguments of our own)
            command,
            cwd=project,
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the access log: written, as in production, unread
            stderr=err,
        )
    server = Server(name, process, port, stderr)
    deadline = time.monotonic() + 60
    while len(server.workers) < workers:
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            sys.exit(f"{name}: gunicorn did not start:\n{stderr.read_text()}")
        server.workers = [
            int(line.split(READY, 1)[1].split(")")[0])
            for line in stderr.read_text().splitlines()
            if READY in line
        ]
        time.sleep(0.1)
    return server


def ready_bare(server: Server) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/ping")
    if connection.getresponse().status != 200:
        sys.exit(f"{server.name}: GET /ping did not answer 200")


@dataclass
class Scenario:
    name: str
    server: str
    path: str
    script: str | None = None
    auth: str | None = None  # the full key to authenticate with
    expect: int = 200
    body: str | None = None  # what the script sends (BENCH_BODY): mcp.lua, post.lua
    # Fresh keys for rotate.lua: each run (warm-up included) takes CHAINS of its own.
    targets: list[str] = field(default_factory=list)

    def command(self, port: int, seconds: int) -> list[str]:
        threads, connections = setting("THREADS", 2), setting("CONNECTIONS", 32)
        command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"]
        if self.script:
            command += ["-s", str(BENCH / self.script)]
        return [*command, f"http://127.0.0.1:{port}{self.path}"]

    def env(self) -> dict[str, str]:
        if self.auth is None:
            return dict(os.environ)
        basic = base64.b64encode(f"{self.auth}:".encode()).decode()
        fresh, self.targets = self.targets[:CHAINS], self.targets[CHAINS:]
        return os.environ | {
            "BENCH_AUTH": basic,
            "BENCH_KEY": self.auth,
            "BENCH_BODY": self.body or "",
            "BENCH_TARGETS": ",".join(fresh),
            "BENCH_THREADS": str(setting("THREADS", 2)),
        }


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _milliseconds(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(number) * _UNITS[unit]


def parse_wrk(output: str) -> dict:
    """Requests/s, p50 and p99 (ms) and the count of unexpected answers from wrk's text."""
    percentiles = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", output, re.MULTILINE))
    other = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)$", output, re.MULTILINE)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50_ms": round(_milliseconds(percentiles["50"]), 3),
        "p99_ms": round(_milliseconds(percentiles["99"]), 3),
        "non_2xx": int(other.group(1)) if other else 0,
        "socket_errors": errors.group(1) if errors else None,
    }


def drive(scenario: Scenario, port: int, seconds: int) -> dict:
    completed = subprocess.run(  # noqa: S603 (wrk, with arguments of our own)
        scenario.command(port, seconds),
        env=scenario.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return parse_wrk(completed.stdout)


def get_key_call(reference: str) -> str:
    """The MCP tools/call of get_key: the twin of `get`, through the SDK."""
    params = {"name": "get_key", "arguments": {"key": reference}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})


FORWARD_AUTH = "/api/forward-auth?scope=monitor:read"


# The list filtered by one metadata member: 1 key in TEAMS of the organization (250 of
# 25,000 at 100,000 keys), its count and first page through ix_key_metadata_lookup.
TEAM = "/api/keys?metadata%5Bteam%5D=team-7"


def chosen(plan: list[Scenario], names: str) -> list[Scenario]:
    """The scenarios named in BENCH_SCENARIOS (comma-separated); every one when empty."""
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    return [scenario for scenario in plan if not wanted or scenario.name in wanted]


def scenarios(small: Seeded, big: Seeded) -> list[Scenario]:
    deep = f"/api/keys?page={small.keys_per_organization // PAGE_SIZE}"
    get = f"/api/keys/{small.read_target}"
    update = f"/api/keys/{small.write_target}"
    mcp_get = get_key_call(small.read_target)
    grace = json.dumps({"grace_seconds": 3600})
    stale = "/api/keys?unused_since=2999-01-01T00:00:00Z"  # every key: the whole count
    checked = json.dumps({"token": small.reader})  # a live key of the same organization
    reader, writer = small.reader, small.writer
    return [
        Scenario("bare_flask", "bare", "/ping"),
        Scenario("bare_flask_logged", "bare_logged", "/ping"),
        Scenario("get", "service", get, "auth.lua", reader),
        Scenario("get_unobserved", "unobserved", get, "auth.lua", reader),
        Scenario("get_redis", "redis", get, "auth.lua", reader),
        Scenario("get_limits_off", "limits_off", get, "auth.lua", reader),
        Scenario("list_50", "service", "/api/keys", "auth.lua", reader),
        Scenario("list_50_redis", "redis", "/api/keys", "auth.lua", reader),
        Scenario("deep_list_50", "service", deep, "auth.lua", reader),
        Scenario("create", "service", "/api/keys", "create.lua", writer, expect=201),
        Scenario("update", "service", update, "update.lua", writer),
        Scenario("rotate", "service", "/", "rotate.lua", writer, 201, grace, small.rotate_targets),
        Scenario("forward_auth", "service", FORWARD_AUTH, "auth.lua", reader, expect=204),
        Scenario(
            "forward_auth_unobserved", "unobserved", FORWARD_AUTH, "auth.lua", reader, expect=204
        ),
        # A key with a rate limit and a quota of its own, never spent (bench/seed.py).
        Scenario("get_metered", "service", get, "auth.lua", small.metered),
        Scenario(
            "forward_auth_metered", "service", FORWARD_AUTH, "auth.lua", small.metered, expect=204
        ),
        # The same key held by an identity with a rate limit and a quota of its own.
        Scenario("forward_auth_held", "service", FORWARD_AUTH, "auth.lua", small.held, expect=204),
        Scenario("introspect", "service", "/api/introspect", "post.lua", reader, body=checked),
        Scenario("unauthenticated_401", "service", get, expect=401),
        Scenario("mcp_get_key", "mcp", "/mcp", "mcp.lua", reader, body=mcp_get),
        Scenario("get_big", "big", f"/api/keys/{big.read_target}", "auth.lua", big.reader),
        Scenario("deep_list_50_big", "big", deep, "auth.lua", big.reader),
        Scenario("unused_since_50_big", "big", stale, "auth.lua", big.reader),
        Scenario("list_metadata_50_big", "big", TEAM, "auth.lua", big.reader),
    ]


# The scenarios a baseline checkout (BENCH_BASELINE) answers too, in the same rounds.
COMPARED = ("get", "list_50", "deep_list_50", "get_big", "deep_list_50_big", "get_redis")
BASELINE = "@baseline"


def copied(url: str) -> str:
    """A copy of the SQLite database at `url`, without its hosts, for a baseline's servers:
    on the service's, a baseline counting in its own checkout's instance folder is another
    host counting apart, which its first start refuses (app/serving/hosts.py)."""
    path = Path(url.removeprefix("sqlite:///"))
    copy = path.with_name(f"{path.stem}{BASELINE}{path.suffix}")
    if copy.exists():  # made for another server of the same database (service, redis)
        return f"sqlite:///{copy}"
    source, target = sqlite3.connect(path), sqlite3.connect(copy)
    source.backup(target)
    with target:
        target.execute("DELETE FROM hosts")  # the service's, seen on the original
    source.close()
    target.close()
    return f"sqlite:///{copy}"


def with_baseline(plan: list[Scenario]) -> list[Scenario]:
    """Each compared scenario followed by the same against the baseline's servers."""
    both = []
    for scenario in plan:
        both.append(scenario)
        if scenario.name in COMPARED:
            both.append(
                dataclasses.replace(
                    scenario, name=scenario.name + BASELINE, server=scenario.server + BASELINE
                )
            )
    return both


# The service as `make run` serves it: the abuse limits on, counting every request, with
# allowances wrk cannot spend (so that none is refused), and the access log on.
UNSPENDABLE = {
    "RATELIMIT_AUTH_FAILURES": "1000000000/minute",
    "RATELIMIT_PER_KEY": "1000000000/minute",
    "RATELIMIT_INTROSPECT": "1000000000/minute",
}


# The same without the usage counting and the metrics, to show what they cost.
UNOBSERVED = {"USAGE_ENABLED": "false", "METRICS_ENABLED": "false"}


def redis_url() -> str | None:
    """BENCH_REDIS_URL (this machine's Redis by default) when it answers a PING."""
    url = str(setting("REDIS_URL", "redis://127.0.0.1:6379/0"))
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=2).ping()
    except Exception as error:  # any failure: the Redis lines are left out
        print(f"Redis at {url} does not answer ({error}): no *_redis lines")
        return None
    return url


def service_settings(small_url: str, big_url: str) -> dict[str, dict[str, str]]:
    """Each service server's environment, by name: the Redis one only when Redis answers.
    `mcp` is `service` again, for /mcp alone: a worker that serves /mcp loads the MCP SDK
    (about 40 MB), and `service`'s peak RSS is that of a worker that never does."""
    settings = {
        "service": {"DATABASE_URL": small_url, **UNSPENDABLE},
        "mcp": {"DATABASE_URL": small_url, **UNSPENDABLE},
        "limits_off": {"DATABASE_URL": small_url, "RATELIMIT_ENABLED": "false"},
        "unobserved": {"DATABASE_URL": small_url, **UNSPENDABLE, **UNOBSERVED},
        "big": {"DATABASE_URL": big_url, **UNSPENDABLE},
    }
    url = redis_url()
    if url:
        counted = {"RATELIMIT_STORAGE_URI": url, "RATELIMIT_KEY_PREFIX": f"bench-{os.getpid()}"}
        settings["redis"] = settings["service"] | counted
    return settings


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def summarize(runs: dict[str, list[dict]]) -> dict[str, dict]:
    summary = {}
    for name, rounds in runs.items():
        summary[name] = {
            "rps": round(statistics.median(r["rps"] for r in rounds), 1),
            "p50_ms": round(statistics.median(r["p50_ms"] for r in rounds), 3),
            "p99_ms": round(statistics.median(r["p99_ms"] for r in rounds), 3),
            "rounds": rounds,
        }
    for name, entry in summary.items():
        ratios = [r["rps"] / r["bare_rps"] for r in runs[name]] if name != "bare_flask" else [1]
        entry["ratio_to_bare"] = round(statistics.median(ratios), 3)
    return summary


def table(summary: dict[str, dict], rss: dict[str, dict[str, float]], servers: dict) -> str:
    lines = [
        f"{'scenario':<22}{'req/s':>9}{'ratio':>8}{'p50 ms':>9}{'p99 ms':>9}{'RSS MB':>9}",
    ]
    for name, entry in summary.items():
        peak = max(rss[servers[name]].values())
        lines.append(
            f"{name:<22}{entry['rps']:>9.0f}{entry['ratio_to_bare']:>8.2f}"
            f"{entry['p50_ms']:>9.2f}{entry['p99_ms']:>9.2f}{peak:>9.1f}"
        )
    return "\n".join(lines)


def main() -> None:
    if shutil.which("wrk") is None:
        sys.exit(WRK_MISSING)
    keys, big_keys = setting("KEYS", 10_000), setting("BIG_KEYS", 100_000)
    rounds, seconds = setting("ROUNDS", 3), setting("DURATION", 5)
    output = Path(setting("OUTPUT", str(BENCH / "results" / "latest.json")))
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        workdir = Path(scratch)
        started = time.monotonic()
        small_url, big_url = (
            f"sqlite:///{workdir}/small.sqlite3",
            f"sqlite:///{workdir}/big.sqlite3",
        )
        small = seed(small_url, keys, rotations=CHAINS * (rounds + 1))  # +1: the warm-up
        big = seed(big_url, big_keys, metadata=True)
        print(f"seeded {keys} and {big_keys} keys in {time.monotonic() - started:.1f} s")
        settings = service_settings(small_url, big_url)
        servers = {}
        try:
            # Bare Flask: without an access log (the ceiling), and with the project's.
            servers["bare"] = start("bare", "bench.bare:app", workdir, {}, config=BARE_CONFIG)
            logged = {"BENCH_BARE_ACCESS_LOG": "on"}
            servers["bare_logged"] = start(
                "bare_logged", "bench.bare:app", workdir, logged, config=BARE_CONFIG
            )
            for name, env in settings.items():
                servers[name] = start(name, "wsgi:app", workdir, env)
            yardstick, *plan = scenarios(small, big)
            plan = [scenario for scenario in plan if scenario.server in servers]
            plan = chosen(plan, setting("SCENARIOS", ""))
            baseline = setting("BASELINE", "")
            if baseline:
                for name in ("service", "big", "redis"):
                    if name not in settings:
                        continue
                    servers[name + BASELINE] = start(
                        name + BASELINE,
                        "wsgi:app",
                        workdir,
                        settings[name] | {"DATABASE_URL": copied(settings[name]["DATABASE_URL"])},
                        Path(baseline).resolve(),
                    )
                plan = with_baseline(plan)
            ready_bare(servers["bare"])
            for scenario in (yardstick, *plan):  # warm up: caches, first use of the keys
                drive(scenario, servers[scenario.server].port, 1)
            runs: dict[str, list[dict]] = {"bare_flask": []} | {s.name: [] for s in plan}
            for number in range(rounds):
                for scenario in plan:
                    # Bare Flask right before each scenario: the ratio compares runs a few
                    # seconds apart, so that the load of a shared machine weighs on both.
                    bare = drive(yardstick, servers["bare"].port, seconds)
                    result = drive(scenario, servers[scenario.server].port, seconds)
                    refusals = scenario.expect >= 400
                    if bool(result["non_2xx"]) != refusals:
                        sys.exit(f"{scenario.name}: not the {scenario.expect} answers expected")
                    runs["bare_flask"].append(bare)
                    runs[scenario.name].append(result | {"bare_rps": bare["rps"]})
                    ratio = result["rps"] / bare["rps"]
                    print(f"round {number + 1} {scenario.name}: {ratio:.2f} of bare Flask")
            rss = {name: server.peak_rss_mb() for name, server in servers.items()}
        finally:
            for server in servers.values():
                server.stop()
    summary = summarize(runs)
    by_scenario = {scenario.name: scenario.server for scenario in (yardstick, *plan)}
    result = {
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "settings": {
            "keys": keys,
            "big_keys": big_keys,
            "workers": setting("WORKERS", 4),
            "worker_class": setting("WORKER_CLASS", "sync"),
            "threads": setting("THREADS", 2),
            "connections": setting("CONNECTIONS", 32),
            "rounds": rounds,
            "seconds": seconds,
            "baseline": setting("BASELINE", "") or None,
        },
        "scenarios": {
            name: entry | {"server": by_scenario[name]} for name, entry in summary.items()
        },
        "peak_rss_mb": rss,
        # Cost per request with 100,000 keys over cost with 10,000, from the ratios to bare
        # Flask (so that a change of the machine's load between them cancels out).
        "big_vs_small_cost": {
            name + suffix: round(
                summary[name + suffix]["ratio_to_bare"]
                / summary[f"{name}_big{suffix}"]["ratio_to_bare"],
                3,
            )
            for name in ("get", "deep_list_50")
            for suffix in ("", BASELINE)
            if name + suffix in summary and f"{name}_big{suffix}" in summary
        },
    }
    # Each worker's peak after a mixed run of every endpoint, then after /mcp: no wrk.
    from bench import memory

    result["memory_after_mixed_run"] = memory.main()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(table(summary, rss, by_scenario))
    print("cost of 100k keys vs 10k (1.00 = same):", result["big_vs_small_cost"])
    print(f"written to {output}")


if __name__ == "__main__":
    main()

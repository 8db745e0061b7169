"""The peak memory of a served worker, as `make run` configures the service (the limits
counted per host, usage, metrics, webhooks sent): gunicorn with two workers on a fresh
database, a mixed run of every endpoint but /mcp (bench/mixed.py: keys, their pages, an
Idempotency-Key create and its retry, rotation, an import, identities, webhooks, usage, the
audit log, forward auth, introspection, /openapi.json, the page, /metrics, /healthz), then
each process's peak resident set (`VmHWM`) with what it holds now (its resident set, and
from /proc/PID/smaps_rollup its proportional and its unique set); then /mcp, and the same
again. On SQLite, then on PostgreSQL with the limits in Redis when both answer.

    python -m bench.memory                    # BENCH_MEMORY_ROUNDS mixed rounds [10]
    BENCH_MEMORY_ROUNDS=0 python -m bench.memory   # workers that have loaded the app only
    BENCH_MEMORY_DATABASES=sqlite python -m bench.memory   # [sqlite,postgresql]
    BENCH_MEMORY_MCP=off python -m bench.memory      # without /mcp afterwards [on]

`make bench` runs it after its wrk rounds and writes its figures beside theirs. No wrk here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from app.config import ENVIRONMENT
from bench import mixed
from bench.run import free_port, redis_url

PROJECT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
WORKERS = 2
MCP_ROUNDS = 10  # each worker serves /mcp at least once, all but surely
POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_{name}", default)


def figures(pid: int) -> dict[str, float]:
    """The peak resident set (VmHWM) of `pid`, its resident, proportional (Pss) and unique
    (Uss: its private pages) sets now, in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()

    def kilobytes(text: str, name: str) -> int:
        return int(re.search(rf"^{name}:\s+(\d+) kB", text, re.MULTILINE)[1])

    private = kilobytes(rollup, "Private_Clean") + kilobytes(rollup, "Private_Dirty")
    found = {
        "VmHWM": kilobytes(status, "VmHWM"),
        "VmRSS": kilobytes(status, "VmRSS"),
        "Pss": kilobytes(rollup, "Pss"),
        "Uss": private,
    }
    return {name: round(value / 1024, 1) for name, value in found.items()}


@contextmanager
def postgres_database(url: str):
    """A fresh database beside the one at `url` (dropped at the end): its URL."""
    import psycopg

    name = f"bench_memory_{os.getpid()}"
    base = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def databases() -> list[tuple[str, dict[str, str] | None]]:
    """The configurations to measure, by name, with their settings; None for one skipped."""
    wanted = setting("MEMORY_DATABASES", "sqlite,postgresql").split(",")
    chosen: list[tuple[str, dict[str, str] | None]] = []
    if "sqlite" in wanted:
        chosen.append(("sqlite", {}))
    if "postgresql" in wanted:
        try:
            import psycopg

            url = setting("POSTGRES_URL", POSTGRES)
            psycopg.connect(url.replace("+psycopg", ""), connect_timeout=3).close()
        except Exception as error:  # any failure: the PostgreSQL figures are left out
            print(f"PostgreSQL at {url} does not answer ({error}): no PostgreSQL figures")
            chosen.append(("postgresql+redis", None))
            return chosen
        redis = redis_url()
        limits = {"RATELIMIT_STORAGE_URI": redis, "RATELIMIT_KEY_PREFIX": f"bench-{os.getpid()}"}
        chosen.append(("postgresql+redis" if redis else "postgresql", limits if redis else {}))
    return chosen


@contextmanager
def served(folder: Path, settings: dict[str, str]):
    """The service under gunicorn as `make run` starts it, two workers loaded and none asked:
    its port, master, workers and an sdk_integration key of the default organization."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT} | {
        "DATABASE_URL": f"sqlite:///{folder / 'keys.sqlite3'}",
        "RATELIMIT_STORAGE_URI": f"host://{folder / 'limits.counts'}",
        "PORT": str(port),
        "WEB_CONCURRENCY": str(WORKERS),
        # The mixed run's webhook receiver listens on this machine.
        "WEBHOOK_ALLOW_PRIVATE": "true",
        "METRICS_TOKEN": "",
        **settings,
    }
    env = {name: value for name, value in env.items() if value != ""}
    flask = [str(BIN / "flask"), "--app", "app"]
    # Only SQLite upgrades itself at the first start; another database is upgraded first.
    upgraded = env["DATABASE_URL"].startswith("sqlite")
    for step in ([] if upgraded else [["db", "upgrade"]]) + [["first-start"]]:
        done = subprocess.run(  # noqa: S603 (flask, with arguments of our own)
            [*flask, *step], cwd=PROJECT, env=env, capture_output=True, text=True
        )
        if done.returncode:
            raise RuntimeError(f"flask {' '.join(step)}: {done.stderr}")
    create = [*flask, "keys", "create", "--org", "default", "--kind", "sdk_integration"]
    created = subprocess.run(  # noqa: S603 (flask, with arguments of our own)
        [*create, "--name", "memory", "--json"],
        cwd=PROJECT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    key = json.loads(created.stdout)["key"]
    path = folder / "gunicorn.log"
    log = path.open("wb")
    server = subprocess.Popen(  # noqa: S603 (gunicorn, with arguments of our own)
        [str(BIN / "python"), "-OO", "-m", "gunicorn", "wsgi:app"],
        cwd=PROJECT,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        # Each worker loaded (the line gunicorn.conf.py's post_worker_init logs), none asked.
        deadline = time.monotonic() + 180
        while path.read_text().count("Worker ready (pid: ") < WORKERS:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(path.read_text())
            time.sleep(0.1)
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text()
        yield port, server.pid, [int(pid) for pid in children.split()], key
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        log.close()


def report(name: str, stage: str, answers: Counter, master: int, workers: list[int]) -> dict:
    """Printed and returned: the answers by status and each process's figures."""
    by_status = dict(sorted(answers.items()))
    print(f"{name}, {stage}: {sum(answers.values())} requests, answers by status: {by_status}")
    measured = {"answers": by_status, "master": figures(master), "workers": {}}
    for role, pid in [("master", master)] + [("worker", pid) for pid in workers]:
        found = figures(pid)
        if role == "worker":
            measured["workers"][str(pid)] = found
        shown = ", ".join(f"{field} {value:.1f}" for field, value in found.items())
        print(f"{role} {pid}: {shown} MiB")
    return measured


def measure(name: str, settings: dict[str, str], rounds: int) -> dict:
    """The mixed run's figures, then /mcp's, of one configuration."""
    folder = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    stop_receiver = lambda: None  # noqa: E731
    try:
        with served(folder, settings) as (port, master, workers, key):
            hook, stop_receiver = mixed.receiver()
            answers: Counter = Counter()
            ask = mixed.asker(port, key, answers)
            for number in range(rounds):
                mixed.mixed_round(ask, key, hook, number)
            time.sleep(2 if rounds else 0)  # the senders' deliveries of the last round
            stage = f"after {rounds} mixed rounds"
            result = {"mixed": report(name, stage, answers, master, workers)}
            if rounds and setting("MEMORY_MCP", "on") == "on":
                answers.clear()
                for _ in range(MCP_ROUNDS):
                    mixed.mcp_round(ask, key)
                result["mcp"] = report(name, "then /mcp", answers, master, workers)
            return result
    finally:
        stop_receiver()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> dict:
    rounds = int(setting("MEMORY_ROUNDS", "10"))
    results = {}
    for name, settings in databases():
        if settings is None:
            continue
        if name.startswith("postgresql"):
            with postgres_database(setting("POSTGRES_URL", POSTGRES)) as url:
                results[name] = measure(name, settings | {"DATABASE_URL": url}, rounds)
        else:
            results[name] = measure(name, settings, rounds)
    return results


if __name__ == "__main__":
    main()

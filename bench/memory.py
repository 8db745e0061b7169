"""The peak memory of a served worker, as `make run` configures the service (the limits
counted per host, usage, metrics): gunicorn with two workers on a fresh database, then
every kind of request but /mcp (the key list, a key, forward auth, introspection, the page,
/metrics, /openapi.json) a few hundred times, then each process's peak resident set
(`VmHWM`) and what it is made of.

    python -m bench.memory               # 900 requests
    BENCH_REQUESTS=0 python -m bench.memory   # a worker that has loaded the application only
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.run import free_port

PROJECT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def status(pid: int) -> dict[str, float]:
    """VmHWM, VmRSS and its parts (anonymous, files) of `pid`, in MiB."""
    text = Path(f"/proc/{pid}/status").read_text()
    fields = ("VmHWM", "VmRSS", "RssAnon", "RssFile")
    return {name: int(re.search(rf"{name}:\s+(\d+) kB", text)[1]) / 1024 for name in fields}


def main() -> None:
    requests = int(os.environ.get("BENCH_REQUESTS", "900"))
    folder = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    port = free_port()
    env = os.environ | {
        "DATABASE_URL": f"sqlite:///{folder / 'keys.sqlite3'}",
        "RATELIMIT_STORAGE_URI": f"host://{folder / 'limits.counts'}",
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
    }
    flask = [str(BIN / "flask"), "--app", "app"]
    first_start = [*flask, "first-start"]
    subprocess.run(first_start, cwd=PROJECT, env=env, check=True, capture_output=True)  # noqa: S603
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
    basic = "Basic " + base64.b64encode(f"{key}:".encode()).decode()
    log = (folder / "gunicorn.log").open("wb")
    server = subprocess.Popen(  # noqa: S603 (gunicorn, with arguments of our own)
        [str(BIN / "python"), "-OO", "-m", "gunicorn", "wsgi:app"],
        cwd=PROJECT,
        env=env,
        stdout=log,
        stderr=log,
    )
    kinds = [
        ("GET", "/api/keys", None),
        ("GET", f"/api/keys/{key}", None),
        ("GET", "/api/forward-auth?scope=monitor:read", None),
        ("POST", "/api/introspect", json.dumps({"token": key}).encode()),
        ("GET", "/", None),
        ("GET", "/metrics", None),
        ("GET", "/openapi.json", None),
    ]

    def ask(method: str, path: str, body: bytes | None) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            data=body,
            method=method,
            headers={"Authorization": basic, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310
                return answer.status
        except urllib.error.HTTPError as error:
            return error.code

    try:
        # Both workers loaded (the line gunicorn.conf.py's post_worker_init logs), none asked.
        deadline = time.monotonic() + 180
        while (folder / "gunicorn.log").read_text().count("Worker ready (pid: ") < 2:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError((folder / "gunicorn.log").read_text())
            time.sleep(0.1)
        answers: dict[int, int] = {}
        for number in range(requests):
            code = ask(*kinds[number % len(kinds)])
            answers[code] = answers.get(code, 0) + 1
        workers = [
            int(pid)
            for pid in Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        ]
        print(f"{requests} requests, answers by status: {answers}")
        for name, pid in [("master", server.pid)] + [("worker", pid) for pid in workers]:
            figures = ", ".join(f"{field} {value:.1f}" for field, value in status(pid).items())
            print(f"{name} {pid}: {figures} MiB")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

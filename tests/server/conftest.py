"""A real gunicorn serving wsgi:app, as `make run` starts it, on a fresh SQLite file.

Every server is bound to 127.0.0.1 on a free port, started with several workers, waited
for until each worker has loaded the application, and always stopped when its test ends.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.config import ENVIRONMENT

PROJECT = Path(__file__).resolve().parents[2]
GUNICORN = PROJECT / ".venv" / "bin" / "gunicorn"
START_TIMEOUT = 15.0
REQUEST_TIMEOUT = 5.0
# Test-only gunicorn hook: a log line once a worker has loaded wsgi:app (after the
# first-start bootstrap), so that a test knows when every worker is ready.
READY = "test-hook worker ready pid="
HOOKS = f"""
def post_worker_init(worker):
    worker.log.info("{READY}%s", worker.pid)
"""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Server:
    """A running gunicorn master and what it has printed."""

    process: subprocess.Popen
    port: int
    database: Path
    stdout: Path
    stderr: Path
    workers: int
    ready_pids: list[int] = field(default_factory=list)

    def output(self) -> str:
        """Everything gunicorn and its workers printed so far, stdout then stderr."""
        return self.stdout.read_text() + self.stderr.read_text()

    def request(
        self, method: str, path: str, key: str | None = None, body: dict | None = None
    ) -> Response:
        """One request on a new connection (so that any worker may answer it)."""
        headers = {"Connection": "close"}
        if key is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{key}:".encode()).decode()
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
        try:
            connection.request(method, path, body=data, headers=headers)
            answer = connection.getresponse()
            return Response(answer.status, dict(answer.getheaders()), answer.read())
        finally:
            connection.close()

    def worker_pids(self) -> set[int]:
        """The master's live child processes (its workers)."""
        children = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces, so split after its ")".
            state, parent = stat.rsplit(")", 1)[1].split()[:2]
            if int(parent) == self.process.pid and state != "Z":
                children.add(int(entry.name))
        return children

    def wait_until_ready(self, count: int, timeout: float = START_TIMEOUT) -> list[int]:
        """Wait until `count` workers in all have loaded the app; their pids, in order."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"gunicorn exited with {self.process.returncode}:\n{self.output()}")
            pids = [
                int(line.split(READY, 1)[1].split()[0])
                for line in self.stderr.read_text().splitlines()
                if READY in line
            ]
            if len(pids) >= count:
                self.ready_pids = pids
                return pids
            time.sleep(0.05)
        pytest.fail(f"gunicorn's workers were not ready in {timeout} s:\n{self.output()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def start_server(tmp_path) -> Iterator[Callable[..., Server]]:
    """Start gunicorn on a fresh, empty SQLite file; every server is stopped afterwards."""
    servers: list[Server] = []

    def start(workers: int = 3) -> Server:
        run = tmp_path / f"server-{len(servers)}"
        run.mkdir()
        database = run / "x.sqlite3"
        database.touch()  # a brand new, empty file
        hooks = run / "hooks.py"
        hooks.write_text(HOOKS)
        env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT}
        env |= {"DATABASE_URL": f"sqlite:///{database}", "PYTHONUNBUFFERED": "1"}
        port = free_port()
        stdout, stderr = run / "stdout.txt", run / "stderr.txt"
        command = [str(GUNICORN), "--workers", str(workers), "--bind", f"127.0.0.1:{port}"]
        command += ["--no-control-socket", "--config", str(hooks), "--graceful-timeout", "5"]
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen(
                [*command, "wsgi:app"],
                cwd=PROJECT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        server = Server(process, port, database, stdout, stderr, workers)
        servers.append(server)
        server.wait_until_ready(workers)
        return server

    yield start
    for server in servers:
        server.stop()

"""A real gunicorn serving wsgi:app with the project's gunicorn.conf.py, as `make run`
starts it, on a fresh database: a new SQLite file, or a new PostgreSQL database (upgraded
with `flask --app app db upgrade` first, as an operator does) when TEST_DATABASE_URL is set.

Every server is bound to 127.0.0.1 on a free port, started with several workers, waited
for until each worker has loaded the application, and always stopped (and its PostgreSQL
database dropped) when its test ends.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from flask import Flask
from sqlalchemy import create_engine, text

from app import create_app
from app.extensions import db
from app.keys.operator import create_organization
from app.storage import reads
from tests.databases import drop_database, new_database_url
from tests.processes import GUNICORN, PROJECT, run_flask, service_env

# Bounds that tell a hang from a slow start or answer, not targets: on a loaded machine (the
# suite in parallel processes beside other work) a start takes many times its idle 3 s.
START_TIMEOUT = 180.0
REQUEST_TIMEOUT = 60.0
# gunicorn.conf.py's post_worker_init prints this once a worker has loaded wsgi:app
# (after the first-start bootstrap): the worker can answer.
READY = "Worker ready (pid: "


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
    database: str  # its URL
    env: dict[str, str]
    stdout: Path
    stderr: Path
    workers: int
    ready_pids: list[int] = field(default_factory=list)

    def query(self, statement: str) -> list:
        """Rows of one SQL statement, read beside the server."""
        engine = create_engine(self.database, hide_parameters=True)
        try:
            with engine.connect() as connection:
                return connection.execute(text(statement)).all()
        finally:
            engine.dispose()

    def flask(self, *args: str) -> subprocess.CompletedProcess:
        """`flask --app app ...` on the server's database, as the operator runs it."""
        return run_flask(self.env, *args)

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
                int(line.split(READY, 1)[1].split(")")[0])
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


def launch(run: Path, workers: int = 3, env: dict[str, str] | None = None) -> Server:
    """Start gunicorn on a fresh, empty database, keeping its files in the folder `run`;
    the caller stops it and drops its database."""
    run.mkdir()
    database = new_database_url(run, "x.sqlite3")
    # Its limits count in a file of its own (by default, the project's instance folder).
    counts = f"host://{run}/limits.counts"
    settings = {
        "DATABASE_URL": database,
        "RATELIMIT_STORAGE_URI": counts,
        # And while Redis does not answer, for a server that counts there.
        "RATELIMIT_FALLBACK_STORAGE_URI": f"host://{run}/fallback.counts",
        "PYTHONUNBUFFERED": "1",
    }
    server_env = service_env(**{**settings, **(env or {})})
    if not database.startswith("sqlite"):
        run_flask(server_env, "db", "upgrade")
    port = free_port()
    stdout, stderr = run / "stdout.txt", run / "stderr.txt"
    command = [*GUNICORN, "--workers", str(workers)]
    command += ["--bind", f"127.0.0.1:{port}", "--graceful-timeout", "5"]
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [*command, "wsgi:app"],
            cwd=PROJECT,  # where gunicorn.conf.py is read from
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    return Server(process, port, database, server_env, stdout, stderr, workers)


def stop(server: Server) -> None:
    server.stop()
    drop_database(server.database)


@contextmanager
def serving(
    tmp_path_factory, name: str, workers: int, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """A server started in a new folder named after `name`, ready; stopped afterwards. For the
    module-scoped servers that a module's tests share."""
    server = launch(tmp_path_factory.mktemp(name) / "server", workers, env)
    try:
        server.wait_until_ready(workers)
        yield server
    finally:
        stop(server)


@pytest.fixture
def start_server(tmp_path) -> Iterator[Callable[..., Server]]:
    """Start gunicorn on a fresh, empty database; every server is stopped afterwards."""
    servers: list[Server] = []

    def start(workers: int = 3, env: dict[str, str] | None = None) -> Server:
        server = launch(tmp_path / f"server-{len(servers)}", workers, env)
        servers.append(server)
        server.wait_until_ready(workers)
        return server

    yield start
    for server in servers:
        stop(server)


@dataclass
class Org:
    """A fresh organization and its two keys, full values."""

    name: str
    sdk: str
    telemetry: str


@pytest.fixture(scope="module")
def operator(server) -> Iterator[Flask]:
    """The service on the database of the module's `server` in this process, for what the
    operator does with `flask org create` (tests/test_cli.py runs the command): a process
    per test cost the page's module a third of its time."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": server.database})
    yield app
    reads.release()
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def server_org(operator, request) -> Org:
    """An organization of the test's own on the module's server, named after the test, so
    that tests sharing a server count only their own keys and spend their own limits. (Not
    `org`: that is the in-process tests' organization, tests/conftest.py's.)"""
    name = re.sub(r"\W", "-", request.node.name)
    with operator.app_context():
        _, made = create_organization(name)
    keys = {key.kind: full_key for key, full_key in made}
    return Org(name, keys["sdk_integration"], keys["telemetry"])


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix of this test's own; its keys are removed after the test."""
    prefix = f"api-keys-test-{secrets.token_hex(8)}"
    yield prefix
    client = redis.Redis.from_url(os.environ.get("TEST_REDIS_URL", ""))
    try:
        keys = list(client.scan_iter(match=f"*{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()

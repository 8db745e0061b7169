"""Forward auth behind a real gateway: Debian's nginx runs examples/gateways/nginx.conf, as
the README gives it, in front of a tiny upstream, with the service under gunicorn. Allowed,
401, 403 and 429 requests, the X-Api-Key-* headers reaching the upstream (and the key not),
and a deleted key refused on its next request.

Needs /usr/sbin/nginx (or $NGINX): apt-get install nginx (.ci/run does); skipped, saying
so, without it."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app import keyformat
from tests.processes import PROJECT
from tests.server.conftest import Server, free_port
from tests.server.test_gunicorn import printed_keys, sdk_key

NGINX = Path(os.environ.get("NGINX", "/usr/sbin/nginx"))
pytestmark = pytest.mark.skipif(
    not NGINX.exists(),
    reason=f"no nginx at {NGINX}: apt-get install nginx (.ci/run does), or set NGINX",
)
CONFIG = PROJECT / "examples" / "gateways" / "nginx.conf"
CHECKS = 5  # RATELIMIT_INTROSPECT of the service: checks per key per minute


class Upstream(BaseHTTPRequestHandler):
    """The protected service: answers each request with the headers it received."""

    def do_GET(self) -> None:
        body = json.dumps(dict(self.headers.items())).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def service(start_server) -> Server:
    env = {"RATELIMIT_INTROSPECT": f"{CHECKS}/minute", "TRUSTED_PROXIES": "1"}
    return start_server(workers=1, env=env)  # one worker's memory holds every count


@pytest.fixture
def gateway(service, upstream) -> Iterator[int]:
    """nginx on a free port, running the README's configuration."""
    # nginx's workers run as nobody when started by root: a folder they can enter.
    folder = Path(tempfile.mkdtemp(prefix="nginx-"))
    folder.chmod(0o755)
    port = free_port()
    config = CONFIG.read_text()
    for name, address in {
        "@LISTEN@": f"127.0.0.1:{port}",
        "@API_KEYS@": f"127.0.0.1:{service.port}",
        "@MONITORS@": f"127.0.0.1:{upstream}",
    }.items():
        config = config.replace(name, address)
    (folder / "nginx.conf").write_text(config)
    globals_ = f"daemon off; pid {folder}/nginx.pid; error_log {folder}/error.log;"
    with (folder / "stderr.txt").open("wb") as stderr:
        process = subprocess.Popen(
            [str(NGINX), "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g", globals_],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 10
        while not answers(port):
            assert process.poll() is None, (folder / "stderr.txt").read_text()
            assert time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def through(port: int, key: str | None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    connection.request("GET", "/monitors/7", headers=headers)
    answer = connection.getresponse()
    answer.body = answer.read()
    connection.close()
    return answer


def test_the_gateway_lets_through_only_keys_with_the_scope(gateway, service):
    sdk = sdk_key(service)
    telemetry = next(k for k in printed_keys(service) if k != sdk)

    allowed = through(gateway, sdk)
    assert allowed.status == 200, allowed.body
    seen = json.loads(allowed.body)
    assert seen["X-Api-Key-Id"] == keyformat.identifier_of(sdk)
    assert seen["X-Api-Key-Kind"] == "sdk_integration"
    assert seen["X-Api-Key-Scopes"].split()[:2] == ["monitor:read", "monitor:write"]
    assert seen["X-Api-Key-Organization"] == "default"
    assert "Authorization" not in seen  # the key stops at the gateway

    missing = through(gateway, None)
    assert missing.status == 401
    assert missing.getheader("WWW-Authenticate") == 'Basic realm="api"'
    assert through(gateway, "ak_not_a_key").status == 401
    assert through(gateway, telemetry).status == 403  # no monitor:read


def test_a_key_past_its_checks_gets_429_and_a_deleted_key_401(gateway, service):
    sdk = sdk_key(service)
    body = {"name": "dashboard", "kind": "custom", "scopes": ["monitor:read"]}
    made = service.request("POST", "/api/keys", sdk, body).json()["key"]
    statuses = [through(gateway, made).status for _ in range(CHECKS)]
    assert statuses == [200] * CHECKS
    limited = through(gateway, made)
    assert limited.status == 429
    assert int(limited.getheader("Retry-After")) >= 1

    doomed = service.request("POST", "/api/keys", sdk, body).json()["key"]
    assert through(gateway, doomed).status == 200
    assert service.request("DELETE", f"/api/keys/{doomed}", sdk).status == 204
    assert through(gateway, doomed).status == 401

"""Forward auth behind the real gateways the docs show (docs/design.md, "Tested with the real
software"): Debian's nginx and Caddy run examples/gateways/nginx.conf and Caddyfile, the files
docs/gateways.md shows byte for byte, in front of a tiny upstream that records what it
receives, with the service under gunicorn.

Through either, the upstream gets the X-Api-Key-* headers of the check's answer (metadata at
its bound included) and never the client's key nor an X-Api-Key-* header the client made up;
the client gets the service's own 401, 403 and 429, status, headers and problem+json body, as
the service answers them, and a 502 when the service does not answer. Failed
authentications count for the client's own address, whatever it names in X-Forwarded-For.
Neither writes a key in its logs (docs/design.md, "Promises kept by default"): they are read after
every test, and again once the gateway has stopped. The tests share one service and one gateway of
each kind, each with keys of its own, but where the check or its counts must be a test's own.

Needs /usr/sbin/nginx with Debian's headers-more module, and /usr/bin/caddy (or $NGINX,
$CADDY): apt-get install nginx libnginx-mod-http-headers-more-filter caddy. Each gateway's
tests are skipped, saying so, without it."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.domain import keyformat
from app.domain.scopes import SCOPES
from tests.key_fields import METADATA_BYTES, metadata_of
from tests.processes import PROJECT
from tests.server.conftest import START_TIMEOUT, Server, free_port, serving
from tests.server.test_docs import blocks
from tests.server.test_gunicorn import sdk_key
from tests.test_masking import escaped, leaked

NGINX = Path(os.environ.get("NGINX", "/usr/sbin/nginx"))
CADDY = Path(os.environ.get("CADDY", "/usr/bin/caddy"))
EXAMPLES = PROJECT / "examples" / "gateways"
DOC = "docs/gateways.md"
# The language of each block of DOC that is a file, and the file.
SHOWN = {"nginx": "examples/gateways/nginx.conf", "caddyfile": "examples/gateways/Caddyfile"}
# nginx.conf's addresses, each written once in it: the gateway's, the API Keys Service's and
# the protected service's. The suite replaces these with free ports, and the logs' paths
# with ones in the gateway's folder, and nothing else.
NGINX_ADDRESSES = ("127.0.0.1:8080", "127.0.0.1:5000", "127.0.0.1:8081")
NGINX_LOGS = ("/var/log/nginx/access.log", "/var/log/nginx/error.log")
# What each gateway writes in its folder: nginx its logs, Caddy its logs on stderr.
LOGS = {"nginx": ("access.log", "error.log", "output.txt"), "caddy": ("output.txt",)}
# The service's check, as both files ask it.
CHECK = "/api/forward-auth?scope=monitor:read"
CHECKS = 5  # RATELIMIT_INTROSPECT of the service: checks per key per minute
FAILURES = 4  # RATELIMIT_AUTH_FAILURES of a service: failed authentications per address
# The failed requests an address makes before its 429: nginx checks each refusal twice.
REFUSED_AFTER = {"nginx": FAILURES // 2, "caddy": FAILURES}
# What a client sends to pass for someone else: the check's six headers (X-Api-Key-Identity
# only for a key of an identity), one it never sends, and spellings that some servers read
# as the same names.
FORGED = [
    ("X-Api-Key-Id", "ak_forged"),
    ("X-Api-Key-Kind", "forged"),
    ("X-Api-Key-Scopes", "forged"),
    ("X-Api-Key-Organization", "forged"),
    ("X-Api-Key-Metadata", "forged"),
    ("X-Api-Key-Identity", "forged"),
    ("X-Api-Key-Name", "forged"),
    ("x-api-key-organization", "forged"),
    ("X_Api_Key_Organization", "forged"),
    ("X-API-KEY-SCOPES", "forged"),
]

# The headers of the check's answer that are the client's, not the upstream's: a key's own
# limit and quota (an allowed answer carries the quota's: docs/design.md, "Quotas").
CLIENTS = {"ratelimit", "ratelimit-policy", "quota-remaining", "quota-reset"}


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        """Every value of the header `name`, in the order received."""
        return [value for field, value in self.headers if field.lower() == name.lower()]


def key_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The headers an upstream may read as X-Api-Key-* (`_` taken for `-`, any case)."""
    found = [(name.replace("_", "-").lower(), value) for name, value in headers]
    assert len({name for name, _ in found}) == len(found), headers  # each at most once
    return {name: value for name, value in found if name.startswith("x-api-key-")}


class Recorder(BaseHTTPRequestHandler):
    """Records the headers and body of every request; answers 200 (the upstream) or 204
    (a check), with the headers `sent`."""

    status = 200
    sent: tuple[tuple[str, str], ...] = ()

    def answer(self) -> None:
        self.server.received.append(self.headers.items())
        self.server.bodies.append(self.rfile.read(int(self.headers["Content-Length"] or 0)))
        self.send_response(self.status)
        for name, value in self.sent:
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args) -> None:
        pass


class SilentCheck(Recorder):
    """A check that lets every request through and names nothing."""

    status = 204


class IdentityCheck(Recorder):
    """A check that lets every request through as a key of an identity, answering as the
    service does for one (docs/design.md, "Identities"): X-Api-Key-Identity is the holder's
    external_id, `customer 42/\u03a9%` here, percent-encoded as the organization's name is."""

    status = 204
    sent = (
        ("X-Api-Key-Id", "ak_0123456789ab"),
        ("X-Api-Key-Kind", "custom"),
        ("X-Api-Key-Scopes", "monitor:read"),
        ("X-Api-Key-Organization", "default"),
        ("X-Api-Key-Metadata", "{}"),
        ("X-Api-Key-Identity", "customer 42/%CE%A9%25"),
    )


def serve(handler: type[Recorder]) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.received = []
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def monitors() -> Iterator[ThreadingHTTPServer]:
    yield from serve(Recorder)


@pytest.fixture
def upstream(monitors) -> ThreadingHTTPServer:
    """The protected service, having received nothing yet in this test."""
    monitors.received.clear()
    monitors.bodies.clear()
    return monitors


@pytest.fixture
def silent_check() -> Iterator[ThreadingHTTPServer]:
    yield from serve(SilentCheck)


@pytest.fixture
def identity_check() -> Iterator[ThreadingHTTPServer]:
    yield from serve(IdentityCheck)


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Server]:
    """The service behind the module's gateways."""
    env = {"RATELIMIT_INTROSPECT": f"{CHECKS}/minute", "TRUSTED_PROXIES": "127.0.0.1"}
    # One worker, the cheapest to start: however many, they count in one file of the host.
    with serving(tmp_path_factory, "gateway", 1, env) as server:
        yield server


def nginx_config(port: int, api_keys: int, monitors: int, folder: Path) -> str:
    """nginx.conf with its three addresses and its logs' paths replaced."""
    config = (EXAMPLES / "nginx.conf").read_text()
    replaced = [f"127.0.0.1:{new_port}" for new_port in (port, api_keys, monitors)]
    replaced += [str(folder / Path(path).name) for path in NGINX_LOGS]
    for written, new in zip((*NGINX_ADDRESSES, *NGINX_LOGS), replaced, strict=True):
        assert config.count(written) == 1, written
        config = config.replace(written, new)
    return config


def nginx(folder: Path, port: int, api_keys: int, monitors: int) -> tuple[list[str], dict]:
    (folder / "nginx.conf").write_text(nginx_config(port, api_keys, monitors, folder))
    globals_ = f"daemon off; pid {folder}/nginx.pid; error_log {folder}/error.log;"
    command = [str(NGINX), "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g", globals_]
    return command, dict(os.environ)


def caddy(folder: Path, port: int, api_keys: int, monitors: int) -> tuple[list[str], dict]:
    """The Caddyfile as it is: its addresses are environment variables."""
    env = os.environ | {name: str(folder) for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")}
    env |= {
        "GATEWAY_PORT": str(port),
        "API_KEYS": f"127.0.0.1:{api_keys}",
        "MONITORS": f"127.0.0.1:{monitors}",
    }
    return [str(CADDY), "run", "--config", str(EXAMPLES / "Caddyfile")], env


def missing(name: str) -> str | None:
    """Why the gateway `name` cannot run here, if it cannot."""
    if name == "caddy":
        return None if CADDY.exists() else f"no caddy at {CADDY}: apt-get install caddy"
    if not NGINX.exists():
        return f"no nginx at {NGINX}: apt-get install nginx"
    for module in re.findall(r"^load_module (\S+);", nginx_config(0, 0, 0, Path()), re.M):
        if not Path(module).exists():
            return f"no {module}: apt-get install libnginx-mod-http-headers-more-filter"
    return None


LAUNCHERS = {"nginx": nginx, "caddy": caddy}


@pytest.fixture(scope="module", params=sorted(LAUNCHERS))
def gateway_name(request) -> str:
    if reason := missing(request.param):
        pytest.skip(reason)
    return request.param


class Gateways:
    """Starts gateways of one kind; reads their logs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started: dict[int, tuple[subprocess.Popen, Path]] = {}

    def __call__(self, api_keys: int, monitors: int) -> int:
        """Start the gateway in front of the check at port `api_keys` and the upstream at
        port `monitors`; its port."""
        # nginx's workers run as nobody when started by root: a folder they can enter.
        folder = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        folder.chmod(0o755)
        port = free_port()
        command, env = LAUNCHERS[self.name](folder, port, api_keys, monitors)
        with (folder / "output.txt").open("wb") as output:
            process = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=output
            )
        self.started[port] = (process, folder)
        deadline = time.monotonic() + START_TIMEOUT
        while not answers(port):
            printed = "".join(path.read_text() for path in folder.glob("*.txt"))
            assert process.poll() is None, printed
            assert time.monotonic() < deadline, f"{self.name} did not start: {printed}"
            time.sleep(0.05)
        return port

    def logs(self, port: int) -> str:
        """Everything the gateway at `port` has written in its logs so far."""
        folder = self.started[port][1]
        paths = [folder / name for name in LOGS[self.name]]
        return "".join(path.read_text(errors="replace") for path in paths if path.exists())

    def stop(self) -> None:
        """Stop every gateway, then read their logs: no key in any."""
        logs = []
        for port, (process, folder) in self.started.items():
            process.terminate()
            process.wait(timeout=10)
            logs.append(self.logs(port))
            shutil.rmtree(folder, ignore_errors=True)
        for log in logs:
            assert credentials_in(log) == [], log


@pytest.fixture
def start_gateway(gateway_name) -> Iterator[Gateways]:
    """Starts gateways (`start_gateway(api_keys, monitors)`: a port); each is stopped when the
    test ends, and its logs read for keys."""
    gateways = Gateways(gateway_name)
    yield gateways
    gateways.stop()


# An Authorization value (Basic or Bearer) as a log may write it; Caddy's "REDACTED" is not.
_CREDENTIALS = re.compile(r"(?i)\b(?:basic|bearer)\s+(?!REDACTED\b)[A-Za-z0-9+/=_.~-]{8,}")


def credentials_in(log: str) -> list[str]:
    """What in `log` is a key or an Authorization value: a run of word characters as long
    as a key (which a key's masking changes: a key, a digest, a long base64 run), and the
    token of any `Basic` or `Bearer` written."""
    found = [line for line in log.splitlines() if keyformat.masked(line) != line]
    return found + _CREDENTIALS.findall(log)


@pytest.fixture(scope="module")
def shared_gateway(gateway_name, service, monitors) -> Iterator[tuple[Gateways, int]]:
    gateways = Gateways(gateway_name)
    try:
        yield gateways, gateways(service.port, monitors.server_address[1])
    finally:
        gateways.stop()


@pytest.fixture
def gateway(shared_gateway) -> Iterator[int]:
    """The module's gateway in front of its service and upstream; its port. Its logs are
    read for keys after the test."""
    gateways, port = shared_gateway
    yield port
    log = gateways.logs(port)
    assert credentials_in(log) == [], log


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def through(
    port: int,
    key: str | None,
    headers: list[tuple[str, str]] = (),
    body: bytes | None = None,
    source: str = "127.0.0.1",
    scheme: str = "Bearer",
    target: str = "/monitors/7",
) -> Answer:
    """A GET (a POST with `body`) of `target` from a client of the gateway at `port`
    connected from the address `source` (any of 127.0.0.0/8), with `key` as a Bearer token
    (`scheme` "Basic": the user name, as `curl -u KEY:` sends it), sending `headers` as they
    are (duplicates and any spelling)."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=10, source_address=(source, 0)
    )
    try:
        connection.putrequest("GET" if body is None else "POST", target)
        if key is not None:
            connection.putheader("Authorization", authorization(key, scheme))
        for name, value in headers:
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        return Answer(answer.status, answer.getheaders(), answer.read())
    finally:
        connection.close()


def authorization(key: str, scheme: str) -> str:
    if scheme == "Basic":
        return "Basic " + base64.b64encode(f"{key}:".encode()).decode()
    return f"Bearer {key}"


def direct(service: Server, key: str | None) -> Answer:
    """The service's own answer to the gateway's check of `key`."""
    answer = service.request("GET", CHECK, key)
    return Answer(answer.status, list(answer.headers.items()), answer.body)


def new_key(service: Server, **fields) -> str:
    """A new key: custom, with monitor:read, unless `fields` say otherwise."""
    body = {"name": "gateway", "kind": "custom", "scopes": ["monitor:read"], **fields}
    answer = service.request("POST", "/api/keys", sdk_key(service), body)
    assert answer.status == 201, answer.body
    return answer.json()["key"]


def assert_passed_on(answer: Answer, own: Answer) -> None:
    """`answer` is the service's refusal `own` as it is: status, headers, problem+json body."""
    assert (answer.status, answer.body) == (own.status, own.body)
    assert json.loads(answer.body)["status"] == answer.status
    for name in ("Content-Type", "WWW-Authenticate", "Cache-Control"):
        assert answer.header(name) == own.header(name), name
    assert answer.header("Content-Type") == ["application/problem+json"]
    for mine, theirs in zip(answer.header("Retry-After"), own.header("Retry-After"), strict=True):
        assert abs(int(mine) - int(theirs)) <= 1  # asked a moment apart


def test_a_key_with_the_scope_reaches_the_upstream_as_the_check_describes_it(
    gateway, service, upstream
):
    sdk = new_key(service, kind="sdk_integration", scopes=list(SCOPES))
    described = {
        "x-api-key-id": keyformat.identifier_of(sdk),
        "x-api-key-kind": "sdk_integration",
        "x-api-key-scopes": " ".join(SCOPES),
        "x-api-key-organization": "default",
        "x-api-key-metadata": "{}",
    }
    assert through(gateway, sdk).status == 200
    assert through(gateway, sdk, FORGED, body=b'{"paused": true}').status == 200
    assert upstream.bodies == [b"", b'{"paused": true}']
    for received in upstream.received:
        assert key_headers(received) == described
        assert "authorization" not in {name.lower() for name, _ in received}  # the key stops


def test_metadata_at_its_bound_reaches_the_upstream_as_the_check_sends_it(
    gateway, service, upstream
):
    """2,048 bytes of compact ASCII JSON, mostly \\uXXXX escapes, fit both gateways'
    default buffers, and arrive as the service sent them."""
    metadata = metadata_of(METADATA_BYTES)
    key = new_key(service, metadata=metadata)
    assert through(gateway, key, FORGED).status == 200
    [received] = upstream.received
    sent = key_headers(received)["x-api-key-metadata"]
    assert [sent] == direct(service, key).header("X-Api-Key-Metadata")
    assert json.loads(sent) == metadata and len(sent) == METADATA_BYTES


def placed(key: str, other: str) -> dict:
    """What `through` sends to hold `key` wherever a client may put it beside Authorization:
    the path, the query (as it is and %-escaped), User-Agent and Referer, with `other` as a
    second key-shaped value in the query and the User-Agent."""
    return {
        "target": f"/monitors/{key}/status?key={key}&escaped={escaped(key)}&other={other}",
        "headers": [
            ("User-Agent", f"monitor-client/2.1 ({key}; {other})"),
            ("Referer", f"https://status.example/{escaped(key)}?key={key}"),
        ],
    }


def logged(gateways: Gateways, port: int, requests: int) -> str:
    """The logs of the gateway at `port` once they name `requests` requests: a line is
    written once its answer has gone."""
    deadline = time.monotonic() + 5
    while (log := gateways.logs(port)).count("/monitors/") < requests:
        assert time.monotonic() < deadline, log
        time.sleep(0.05)
    return log


def test_the_logs_have_each_request_and_no_key_wherever_the_client_put_it(
    start_gateway, service, upstream
):
    """A key is sent as Basic user name (`curl -u KEY:`) and as Bearer, a wrong key and
    none, each also in the path, the query, User-Agent and Referer, as is a key past its
    rate_limit (a 429, of which nginx's `error` level would write the request line and
    Referer) and a key to a gateway whose service does not answer (a 502, of which Caddy
    writes an error with the request). A line for each request names the key by its
    identifier; no log holds a key in any form (the fixture reads every log again once the
    gateways have stopped)."""
    port = start_gateway(service.port, upstream.server_address[1])
    key = new_key(service)
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")
    once = new_key(service, rate_limit={"requests": 1, "seconds": 60})
    statuses = [
        through(port, key, scheme="Basic").status,
        through(port, key).status,
        through(port, wrong, scheme="Basic").status,
        through(port, None).status,
        through(port, key, scheme="Basic", **placed(key, wrong)).status,
        through(port, key, **placed(wrong, key)).status,
        through(port, None, **placed(key, once)).status,
        through(port, key, target=f"/monitors/{escaped(key)}/status").status,
        through(port, once, **placed(once, key)).status,
        through(port, once, **placed(once, key)).status,
    ]
    assert statuses == [200, 200, 401, 401, 200, 200, 401, 200, 200, 429]
    log = logged(start_gateway, port, len(statuses))
    assert log.count("/monitors/") == len(statuses), log  # nginx's error log is quiet
    assert log.count("/monitors/.../status") >= 6, log  # in the path, nothing of the key

    with socket.socket() as closed:  # a service that does not answer
        closed.bind(("127.0.0.1", 0))
        unanswered = start_gateway(closed.getsockname()[1], upstream.server_address[1])
        assert through(unanswered, key, **placed(key, wrong)).status == 502
    log += logged(start_gateway, unanswered, 1)

    assert credentials_in(log) == [], log
    assert leaked(log, [key, wrong, once]) == set()
    for sent in (key, wrong, once):
        assert authorization(sent, "Basic").split()[1] not in log


def imported_key(service: Server, key: str) -> None:
    body = {"keys": [{"key": key, "name": "made elsewhere", "kind": "custom"}]}
    body["keys"][0]["scopes"] = ["monitor:read"]
    answer = service.request("POST", "/api/keys/import", sdk_key(service), body)
    assert answer.status == 201, answer.body


def test_the_logs_hold_no_imported_key_wherever_the_client_put_it(start_gateway, service, upstream):
    """A key made elsewhere and imported (32 random characters of base64url or hex, no
    prefix, no checksum): in the path, the query, User-Agent and Referer, through either
    gateway, nothing of it reaches a log."""
    port = start_gateway(service.port, upstream.server_address[1])
    keys = [secrets.token_urlsafe(24), secrets.token_hex(16), "sk_live_" + secrets.token_hex(16)]
    for key in keys:
        imported_key(service, key)
    statuses = [through(port, key, **placed(key, keys[0])).status for key in keys]
    statuses.append(through(port, None, **placed(keys[1], keys[2])).status)
    assert statuses == [200, 200, 200, 401]
    log = logged(start_gateway, port, len(statuses))
    for key in keys:
        secret = key.removeprefix("sk_live_")
        for piece in (secret[i : i + 8] for i in range(len(secret) - 7)):
            assert piece not in log, (piece[:2], log)
    assert log.count("/monitors/.../status") == len(statuses), log


def test_refusals_are_the_services_own_and_reach_no_upstream(gateway, service, upstream):
    telemetry = new_key(service, kind="telemetry", scopes=["monitor:telemetry"])

    no_key = through(gateway, None, FORGED, body=b"{}")  # checked as a GET would be
    assert no_key.status == 401
    assert no_key.header("WWW-Authenticate") == ['Basic realm="api"']
    assert_passed_on(no_key, direct(service, None))
    assert_passed_on(through(gateway, "ak_not_a_key", FORGED), direct(service, "ak_not_a_key"))

    lacking = through(gateway, telemetry, FORGED)  # no monitor:read
    assert lacking.status == 403
    assert json.loads(lacking.body)["detail"] == "This key lacks the scopes: monitor:read."
    assert_passed_on(lacking, direct(service, telemetry))
    assert upstream.received == []


def test_a_key_past_its_checks_gets_the_services_429_and_a_deleted_key_401(
    gateway, service, upstream
):
    made = new_key(service)
    assert [through(gateway, made).status for _ in range(CHECKS)] == [200] * CHECKS
    limited = through(gateway, made, FORGED)
    assert limited.status == 429
    assert int(limited.header("Retry-After")[0]) >= 1
    assert json.loads(limited.body)["code"] == "rate_limited"
    assert_passed_on(limited, direct(service, made))
    assert len(upstream.received) == CHECKS

    doomed = new_key(service)
    assert through(gateway, doomed).status == 200
    assert service.request("DELETE", f"/api/keys/{doomed}", sdk_key(service)).status == 204
    assert_passed_on(through(gateway, doomed), direct(service, doomed))


# The checks a refused request spends of its key's own rate_limit (nginx asks twice).
CHECKS_PER_REFUSAL = {"nginx": 2, "caddy": 1}


def test_a_key_past_its_own_rate_limit_gets_the_services_429_with_its_ratelimit_headers(
    gateway, service, upstream
):
    """Exactly `requests` pass in the window however often nginx asks on a refusal; the
    client reads the key's RateLimit headers on each answer, let through or refused."""
    limited = new_key(service, rate_limit={"requests": 2, "seconds": 60})
    answers = [through(gateway, limited) for _ in range(4)]
    assert [answer.status for answer in answers] == [200, 200, 429, 429]
    assert len(upstream.received) == 2
    for answer, remaining in zip(answers[:2], (1, 0), strict=True):
        assert answer.header("RateLimit-Policy") == ['"key";q=2;w=60']
        [state] = answer.header("RateLimit")
        assert re.fullmatch(rf'"key";r={remaining};t=\d+', state), state
        assert answer.header("Quota-Remaining") == answer.header("Quota-Reset") == []
    refused = answers[-1]
    assert json.loads(refused.body)["code"] == "rate_limited"
    assert int(refused.header("Retry-After")[0]) >= 1
    assert refused.header("RateLimit-Policy") == ['"key";q=2;w=60']
    assert re.fullmatch(r'"key";r=0;t=\d+', refused.header("RateLimit")[0])
    assert_passed_on(refused, direct(service, limited))
    for received in upstream.received:  # the upstream reads none of the check's CLIENTS
        assert not {name.lower() for name, _ in received} & CLIENTS


def test_a_key_with_a_quota_tells_the_client_what_is_left_and_the_upstream_nothing(
    gateway, service, upstream
):
    """Each answer the gateway lets through carries the check's Quota-Remaining and
    Quota-Reset, once each; past the quota the client gets the service's 429 as it is; a
    lifetime quota has no Quota-Reset, and no empty one. The upstream reads none of them."""
    daily = new_key(service, quota={"requests": 5, "period": "day"})
    assert CHECKS >= 5  # every use below is checked within the key's RATELIMIT_INTROSPECT
    allowed = [through(gateway, daily) for _ in range(5)]
    assert [answer.status for answer in allowed] == [200] * 5
    remaining = [answer.header("Quota-Remaining") for answer in allowed]
    assert remaining == [[str(left)] for left in (4, 3, 2, 1, 0)]
    for answer in allowed:
        [reset] = answer.header("Quota-Reset")
        assert 1 <= int(reset) <= 24 * 60 * 60  # until the next 00:00 UTC
        assert answer.header("RateLimit") == answer.header("RateLimit-Policy") == []

    once = new_key(service, quota={"requests": 1, "period": "day"})
    assert through(gateway, once).header("Quota-Remaining") == ["0"]
    refused = through(gateway, once)
    assert json.loads(refused.body)["code"] == "quota_exceeded"
    assert refused.header("Quota-Remaining") == ["0"]
    assert int(refused.header("Quota-Reset")[0]) >= 1
    assert_passed_on(refused, direct(service, once))

    lifetime = new_key(service, quota={"requests": 3, "period": "lifetime"})
    forever = through(gateway, lifetime)
    assert (forever.status, forever.header("Quota-Remaining")) == (200, ["2"])
    assert forever.header("Quota-Reset") == []  # not even empty

    assert len(upstream.received) == 5 + 1 + 1
    for received in upstream.received:
        assert not {name.lower() for name, _ in received} & CLIENTS


def test_a_refusal_for_the_scopes_spends_what_the_gateway_asks_of_the_keys_own_limit(
    gateway_name, gateway, service
):
    """A key lacking the scope is refused 403 until its own limit is spent: through nginx,
    which asks twice, after half the requests."""
    lacking = new_key(service, scopes=["site:read"], rate_limit={"requests": 4, "seconds": 60})
    statuses = [through(gateway, lacking).status for _ in range(5)]
    forbidden = 4 // CHECKS_PER_REFUSAL[gateway_name]
    assert statuses == [403] * forbidden + [429] * (5 - forbidden)


def test_a_key_with_allowed_ips_passes_from_its_address_and_gets_403_from_another(
    gateway, service, upstream
):
    """The service judges the address the gateway forwards (TRUSTED_PROXIES=127.0.0.1), the
    client's connection's: 127.0.0.1 is allowed, 127.0.0.2 not."""
    placed = new_key(service, allowed_ips=["127.0.0.1/32"])
    passed = through(gateway, placed, source="127.0.0.1")
    assert passed.status == 200
    assert not {name.lower() for name, _ in passed.headers} & CLIENTS  # no limit, no quota
    elsewhere = through(gateway, placed, [("X-Forwarded-For", "127.0.0.1")], source="127.0.0.2")
    assert elsewhere.status == 403
    assert json.loads(elsewhere.body)["code"] == "ip_not_allowed"
    assert elsewhere.header("Content-Type") == ["application/problem+json"]
    assert through(gateway, placed, source="127.0.0.1").status == 200
    assert len(upstream.received) == 2


def test_a_client_reaching_the_service_directly_cannot_name_its_address(gateway, service, upstream):
    """TRUSTED_PROXIES names the gateway's address: a client that reaches the service
    itself, beside the gateway, is judged by its own address whatever X-Forwarded-For
    it writes, while the gateway's forwarded address is believed."""
    placed = new_key(service, allowed_ips=["203.0.113.7/32"])
    forged = [("X-Forwarded-For", "203.0.113.7")]
    direct = through(service.port, placed, forged, source="127.0.0.2", target=CHECK)
    assert direct.status == 403 and json.loads(direct.body)["code"] == "ip_not_allowed"
    assert through(gateway, placed, forged, source="127.0.0.2").status == 403
    sdk = sdk_key(service)
    body = {"name": "direct", "kind": "telemetry"}
    encoded = json.dumps(body).encode()
    made = through(service.port, sdk, forged, encoded, source="127.0.0.2", target="/api/keys")
    assert made.status == 201, made.body
    events = service.request("GET", "/api/audit?page_size=1", sdk).json()["data"]
    assert events[0]["client_address"] == "127.0.0.2"
    assert upstream.received == []


def test_a_check_that_names_nothing_lets_no_header_of_the_client_through(
    start_gateway, silent_check, upstream
):
    """copy_headers and auth_request_set leave a header the check does not send: the
    client's own must not stand in for it."""
    port = start_gateway(silent_check.server_address[1], upstream.server_address[1])
    assert through(port, "ak_anything", FORGED).status == 200
    assert len(silent_check.received) == 1
    [received] = upstream.received
    assert "authorization" not in {name.lower() for name, _ in received}
    assert "forged" not in {value for _, value in received}
    assert "ak_forged" not in {value for _, value in received}
    # nginx sends none; Caddy 2.6 sends its placeholder's own text, newer Caddy none.
    for name, value in key_headers(received).items():
        assert value == "{http.reverse_proxy.header." + name.title() + "}", name
    # The upstream may take any X-Api-Key-Identity for a holder: not even Caddy's text.
    assert "x-api-key-identity" not in key_headers(received)


def test_a_key_of_an_identity_reaches_the_upstream_with_its_holders_external_id(
    start_gateway, identity_check, upstream
):
    """The check's X-Api-Key-Identity reaches the upstream as the check sent it, in place of
    the client's, beside the five other headers."""
    port = start_gateway(identity_check.server_address[1], upstream.server_address[1])
    assert through(port, "ak_anything", FORGED).status == 200
    [received] = upstream.received
    assert key_headers(received) == {name.lower(): value for name, value in IdentityCheck.sent}
    assert "authorization" not in {name.lower() for name, _ in received}


def test_the_docs_show_each_configuration_as_the_suite_runs_it():
    """docs/gateways.md shows each file above byte for byte, once, and any other
    configuration under a heading that says it is untested."""
    lines = (PROJECT / DOC).read_text().split("\n")
    shown = []
    for block in blocks(DOC):
        if block.language in SHOWN:
            shown.append((block.language, block.text + "\n"))
        else:
            heading = next(h for h in reversed(lines[: block.line]) if h.startswith("## "))
            assert "untested" in heading, (block.line, heading)
    files = [(language, (PROJECT / path).read_text()) for language, path in SHOWN.items()]
    assert sorted(shown) == sorted(files)


def test_failed_authentications_count_for_the_client_whatever_address_it_names(
    gateway_name, start_gateway, start_server, upstream
):
    """With TRUSTED_PROXIES=127.0.0.1 the service reads the address the gateway forwards: the
    connection's, never one the client wrote in X-Forwarded-For."""
    env = {"RATELIMIT_AUTH_FAILURES": f"{FAILURES}/minute", "TRUSTED_PROXIES": "127.0.0.1"}
    service = start_server(workers=1, env=env)
    sdk = sdk_key(service)
    port = start_gateway(service.port, upstream.server_address[1])
    statuses = [
        through(port, "ak_not_a_key", [("X-Forwarded-For", f"203.0.113.{n}")]).status
        for n in range(FAILURES + 1)
    ]
    refused_after = REFUSED_AFTER[gateway_name]
    assert statuses == [401] * refused_after + [429] * (FAILURES + 1 - refused_after)
    assert through(port, sdk).status == 429  # the address is spent, for valid keys too
    assert upstream.received == []


def test_a_service_that_does_not_answer_is_the_gateways_502(start_gateway, upstream):
    """The check's address is a port bound to no server: every connection is refused."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # held, so that no other server takes it meanwhile
        port = start_gateway(closed.getsockname()[1], upstream.server_address[1])
        assert through(port, "ak_anything").status == 502
    assert upstream.received == []

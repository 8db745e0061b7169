"""Bytes no client library would send, written raw to a real gunicorn (Flask's test client
and HTTP libraries normalise headers): in Authorization, Content-Type, X-Forwarded-For
(with TRUSTED_PROXIES set, so that the service reads it), the path, the query string and
the body. Whatever arrives, the answer is never a 5xx, the log shows no traceback, and the
limits never leave their storage; an Authorization that cannot be read is an ordinary 401
`unauthorized`, counted as a failed authentication."""

from __future__ import annotations

import base64
import json
import socket

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.server.conftest import Server, serving
from tests.server.test_gunicorn import sdk_key

# The limits on, high enough that the examples are answered by the service, not by 429.
HIGH_LIMITS = {
    "TRUSTED_PROXIES": "1",
    "RATELIMIT_AUTH_FAILURES": "100000/minute",
    "RATELIMIT_PER_KEY": "100000/minute",
}
# What a worker's log must never show: a fault, or the limits leaving their storage.
FAULTS = ("Traceback", "Error handling request", "storage unreachable", "falling back")
UNREADABLE = [
    b"Basic \xff\xfe\xfd",
    b"Basic " + base64.b64encode("\u00e9\u00e8:".encode()),
    b"Basic " + base64.b64encode(b"\xff\xfe:"),
    b"Basic !!!not base64!!!",
    b"Basic ====",
    b"Basic Og==",  # ":" alone
    b"Bearer \xff\xfe",
    b"Bearer ak_" + b"\xe9" * 50,
    b"Bearer",
    b"Basic",
    b"\x00\x01\x02",
    b'Digest username="x"',
    b"Basic " + b"A" * 6000,
]
PATHS = [
    b"/api/keys",
    b"/api/keys/",
    b"/api/keys/ak_x",
    b"/api/keys/ak_x/rotate",
    b"/api/audit",
    b"/mcp",
    b"/healthz",
    b"/",
    b"/openapi.json",
]
BODIES = [
    b"",
    b"{}",
    b'{"name": "n", "kind": "custom", "scopes": ["site:read"]}',
    b'{"grace_seconds": 1}',
    b"null",
    b"[1, 2]",
    b'{"name": "\xff\xfe"}',
]


def send(port: int, request: bytes) -> bytes:
    """One raw request on its own connection (Connection: close); the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as connection:
        connection.sendall(request)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def request_bytes(
    method: bytes,
    path: bytes,
    query: bytes,
    headers: dict[bytes, bytes],
    body: bytes,
) -> bytes:
    target = path + (b"?" + query if query else b"")
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers.items()]
    lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def assert_no_fault(server: Server) -> None:
    output = server.output()
    for fault in FAULTS:
        assert fault not in output, output[-3000:]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory, "hostile", 2, HIGH_LIMITS) as server:
        yield server


# A header value: any bytes but the line ends that would frame another header.
header_value = st.binary(max_size=300).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
# A path or query: any bytes but white space, which would end the request target.
target_bytes = st.binary(max_size=200).map(
    lambda b: bytes(c for c in b if c not in b" \t\r\n\x0b\x0c")
)


@settings(
    max_examples=500,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_no_bytes_in_a_request_make_a_5xx_or_a_traceback(server, data):
    sdk = sdk_key(server)
    authorization = data.draw(
        st.one_of(
            st.sampled_from(UNREADABLE),
            header_value,
            header_value.map(lambda b: b"Basic " + b),
            st.just(b"Basic " + base64.b64encode(f"{sdk}:".encode())),
            st.just(b"Bearer " + sdk.encode()),
        ),
        label="authorization",
    )
    headers = {
        b"Authorization": authorization,
        b"Content-Type": data.draw(
            st.one_of(st.just(b"application/json"), header_value), label="content-type"
        ),
        b"X-Forwarded-For": data.draw(
            st.one_of(st.just(b"203.0.113.9"), header_value), label="x-forwarded-for"
        ),
    }
    method = data.draw(st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE"]), label="method")
    path = data.draw(
        st.one_of(st.sampled_from(PATHS), target_bytes.map(lambda b: b"/api/keys/" + b)),
        label="path",
    )
    query = data.draw(target_bytes, label="query")
    body = data.draw(st.one_of(st.sampled_from(BODIES), st.binary(max_size=500)), label="body")
    answer = send(server.port, request_bytes(method, path, query, headers, body))
    assert answer.startswith(b"HTTP/1."), answer
    assert status_of(answer) < 500, answer


def test_the_hostile_requests_left_no_trace_of_a_fault_in_the_log(server):
    # Runs after the property test (same module, same server).
    assert_no_fault(server)


def test_an_unreadable_authorization_is_a_401_counted_as_a_failure(start_server):
    failures = 4  # one worker: its memory holds every count
    server = start_server(workers=1, env={"RATELIMIT_AUTH_FAILURES": f"{failures}/minute"})
    for value in UNREADABLE[:failures]:
        request = request_bytes(b"GET", b"/api/keys", b"", {b"Authorization": value}, b"")
        answer = send(server.port, request)
        assert status_of(answer) == 401, answer
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b'\r\nWWW-Authenticate: Basic realm="api"' in head, head
        assert json.loads(body)["code"] == "unauthorized"
    refused = send(server.port, request_bytes(b"GET", b"/api/keys", b"", {}, b""))
    assert status_of(refused) == 429, refused
    assert_no_fault(server)

"""What gunicorn refuses before the application sees it (malformed HTTP, a request line or
headers over its limits) is answered in the problem shape too, never repeats the request,
and its log line shows no key."""

from __future__ import annotations

import json
import socket

from tests.server.test_gunicorn import sdk_key

KEY_PATH = "/api/keys/{key}"
REFUSED = {
    "bytes that are not HTTP": (b"\x16\x03\x01 {key} nonsense\r\n\r\n", 400),
    "a request line over 4094 bytes": (
        b"GET /api/keys/{key}?pad=" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        414,
    ),
    "a header over 8190 bytes": (
        b"GET /api/keys HTTP/1.1\r\nHost: x\r\nX-Pad: {key}" + b"a" * 9000 + b"\r\n\r\n",
        431,
    ),
    "more than 100 headers": (
        b"GET /api/keys HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X-%d: {key}\r\n" % n for n in range(120))
        + b"\r\n",
        431,
    ),
}


def exchange(port: int, data: bytes) -> tuple[bytes, bytes]:
    """Send raw bytes; the status line and headers, and the body, of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


def test_gunicorns_refusals_are_problem_json_without_the_request_nor_a_key_in_the_log(
    start_server,
):
    server = start_server(workers=1)
    body = {"name": "refused", "kind": "custom", "scopes": ["site:read"]}
    key = server.request("POST", "/api/keys", sdk_key(server), body).json()["key"]
    for case, (template, status) in REFUSED.items():
        head, body = exchange(server.port, template.replace(b"{key}", key.encode()))
        assert head.startswith(f"HTTP/1.1 {status} ".encode()), (case, head)
        assert b"\r\nContent-Type: application/problem+json" in head, (case, head)
        problem = json.loads(body)
        assert set(problem) == {"type", "title", "status", "detail", "code"}, (case, problem)
        assert problem["status"] == status, (case, problem)
        assert key[20:].encode() not in head + body, case
    assert "Invalid request from ip=" in server.output()
    assert key[20:] not in server.output()

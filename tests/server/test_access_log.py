"""gunicorn's logs, as gunicorn.conf.py configures them, never hold a full key, its digest
or the Authorization header: not for Basic or Bearer credentials, not for a full key in
the path or the query, not for a request that succeeds or one that fails."""

from __future__ import annotations

import base64
import hashlib
import http.client

import pytest

from app.domain import keyformat
from tests.server.test_gunicorn import sdk_key


def raw_request(server, method: str, path: str, authorization: str | None) -> int:
    headers = {"Connection": "close"}
    if authorization is not None:
        headers["Authorization"] = authorization
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def secrets_of(key: str) -> list[str]:
    basic = base64.b64encode(f"{key}:".encode()).decode()
    secret = key[len(keyformat.identifier_of(key)) :]
    return [key, secret, hashlib.sha256(key.encode()).hexdigest(), basic, f"Bearer {key}"]


SHORT = "hunter2-password"  # a mistyped credential, too short to look like a key
# A format an operator might write, asking for everything that could hold a key.
HOSTILE_FORMAT = "%(u)s %({authorization}i)s %({http_authorization}e)s %(r)s %(U)s %(q)s"


@pytest.mark.parametrize("log_format", [None, HOSTILE_FORMAT], ids=["gunicorn.conf.py", "hostile"])
def test_no_key_digest_or_authorization_header_in_gunicorns_logs(start_server, log_format):
    env = {"GUNICORN_CMD_ARGS": f"--access-logformat '{log_format}'"} if log_format else {}
    server = start_server(workers=2, env=env)
    sdk = sdk_key(server)
    created = server.request(
        "POST", "/api/keys", sdk, {"name": "logged", "kind": "custom", "scopes": ["site:read"]}
    )
    assert created.status == 201, created.body
    key = created.json()["key"]
    basic = "Basic " + base64.b64encode(f"{key}:".encode()).decode()
    bearer = f"Bearer {key}"
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")  # fails the checksum
    requests = [
        ("GET", f"/api/keys/{key}", basic, 200),
        ("GET", f"/api/keys?again={key}", bearer, 422),
        ("GET", f"/api/keys/{key}", f"Basic {base64.b64encode(wrong.encode()).decode()}", 401),
        ("GET", f"/api/keys/{wrong}", bearer, 404),
        ("GET", "/api/keys", f"Bearer {wrong}", 401),
        ("GET", "/api/keys", f"Basic {base64.b64encode(SHORT.encode()).decode()}", 401),
        ("GET", "/api/keys", f"Bearer {SHORT}", 401),
        ("PATCH", f"/api/keys/{key}", basic, 405),
        ("GET", f"/no/such/path/{key}", basic, 404),
    ]
    for method, path, authorization, expected in requests:
        assert raw_request(server, method, path, authorization) == expected, (method, path)
    server.request("DELETE", f"/api/keys/{key}", sdk)
    assert raw_request(server, "GET", f"/api/keys/{key}", basic) == 401
    server.stop()
    # The first start prints the starting keys once, on purpose; every other line counts.
    printed = [f"({kind}): " for kind in ("telemetry", "sdk_integration")]
    logs = "\n".join(
        line for line in server.output().splitlines() if not any(p in line for p in printed)
    )
    access_lines = [line for line in logs.splitlines() if "GET /api/keys/" in line]
    assert len(access_lines) == 4, logs  # the access log is on, and these lines are in it
    assert f"{keyformat.identifier_of(key)}..." in logs  # the key is shown, masked
    assert SHORT not in logs  # a credential need not look like a key to be one
    for value in secrets_of(key) + secrets_of(wrong) + secrets_of(sdk):
        assert value not in logs, value[:8]

"""No key's secret or SHA-256 digest in anything a real gunicorn prints (access log, error
log at debug level, the application's own log), for an answer of every kind of every
endpoint (2xx, 400, 401 for a malformed, an unknown and a deleted key, 403, 404, 413, 415,
422, 429), with the key in the Basic user name, a Bearer token, the path (as written and
percent-escaped), the query string, another header and the body; and no 8 consecutive
characters of a secret when the key is glued to other word characters."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import secrets

from app.domain import keyformat
from tests.server.test_gunicorn import printed_keys, sdk_key
from tests.test_masking import leaked

AUTH_FAILURES = 8


def send(server, method: str, path: str, headers: dict[str, str], body: bytes | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers={"Connection": "close", **headers})
        return connection.getresponse().status
    finally:
        connection.close()


def basic(key: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key}:".encode()).decode()}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def escaped(text: str) -> str:
    return "".join(f"%{byte:02X}" for byte in text.encode())


def secrets_of(key: str) -> list[str]:
    """What must never be printed: the part after the identifier, and the digest."""
    return [key[len(keyformat.identifier_of(key)) :], hashlib.sha256(key.encode()).hexdigest()]


def test_no_secret_or_digest_in_any_log_of_any_answer(start_server):
    server = start_server(
        workers=1,  # one worker counts every failure (memory://)
        env={
            "GUNICORN_CMD_ARGS": "--log-level debug",
            "RATELIMIT_AUTH_FAILURES": f"{AUTH_FAILURES}/minute",
        },
    )
    sdk = sdk_key(server)
    telemetry = next(key for key in printed_keys(server) if key != sdk)

    def made(kind: str, scopes: list[str] | None = None) -> str:
        body = {"name": "logged", "kind": kind} | ({"scopes": scopes} if scopes else {})
        answer = server.request("POST", "/api/keys", sdk, body)
        assert answer.status == 201, answer.body
        return answer.json()["key"]

    key = made("custom", ["site:read", "site:write"])
    deleted = made("telemetry")
    assert server.request("DELETE", f"/api/keys/{deleted}", sdk).status == 204
    unknown = keyformat.new_key("ak_")[1]
    malformed = key[:-1] + ("A" if key[-1] != "A" else "B")
    big = json.dumps({"name": key * 2000}).encode()

    # (method, path, headers, body, expected status)
    requests = [
        ("GET", f"/api/keys/{key}", basic(key), None, 200),
        ("GET", f"/api/keys/{escaped(key)}", bearer(key), None, 200),
        ("GET", f"/api/keys?q={key}", basic(key) | {"X-Api-Key": key}, None, 422),
        (
            "PUT",
            f"/api/keys/{key}",
            basic(key) | {"Content-Type": "application/json"},
            json.dumps({"name": key}).encode(),
            422,  # a name that holds a full key is refused
        ),
        (
            "POST",
            "/api/keys",
            bearer(key) | {"Content-Type": "application/json"},
            json.dumps({"name": key, "kind": "custom", "scopes": ["monitor:read"]}).encode(),
            422,  # the name that holds a key, refused before the caller's ceiling
        ),
        (
            "POST",
            "/api/keys",
            basic(key) | {"Content-Type": "application/json"},
            f'{{"name": "{key}"'.encode(),
            400,
        ),
        ("POST", "/api/keys", basic(key) | {"Content-Type": "application/json"}, big, 413),
        ("POST", "/api/keys", basic(key) | {"Content-Type": "text/plain"}, key.encode(), 415),
        ("GET", f"/api/keys/{unknown}", basic(key), None, 404),
        ("GET", f"/api/keys/{key}", basic(telemetry), None, 403),
        ("GET", f"/api/keys/{key}?key={key}", basic(malformed), None, 401),
        ("GET", f"/api/keys/{escaped(unknown)}", bearer(unknown), None, 401),
        ("DELETE", f"/api/keys/{deleted}", basic(deleted), None, 401),
        ("GET", f"/api/keys?key={key}", {"X-Api-Key": key}, None, 401),
        (
            "POST",
            "/api/keys",
            bearer(deleted) | {"Content-Type": "application/json"},
            json.dumps({"name": key, "kind": "telemetry"}).encode(),
            401,
        ),
    ]
    for method, path, headers, body, expected in requests:
        assert send(server, method, path, headers, body) == expected, (method, path[:20])
    # Failures past RATELIMIT_AUTH_FAILURES: 429, whatever the key.
    statuses = [
        send(server, "GET", f"/api/keys/{key}", bearer(malformed)) for _ in range(AUTH_FAILURES)
    ]
    assert statuses[-1] == 429, statuses
    assert send(server, "GET", f"/api/keys/{key}", basic(key)) == 429
    server.stop()

    # The first start prints the starting keys once, on purpose; every other line counts.
    logs = "\n".join(line for line in server.output().splitlines() if "): ak_" not in line)
    assert "[DEBUG]" in logs  # gunicorn's error log at debug level was on
    for value in [key, deleted, unknown, malformed, sdk, telemetry]:
        for secret in secrets_of(value):
            assert secret not in logs, secret[:8]
    assert logs.count(f"{keyformat.identifier_of(key)}...") >= 10  # access lines, masked


def test_no_piece_of_a_secret_when_a_key_is_glued_to_other_word_characters(start_server):
    """A key followed by 40 digits, by `_backup`, or joined to another key, in the path, the
    query and the one logged header (User-Agent): the access log and the error log (at
    debug level, which prints the path) hold no 8 consecutive characters of a secret."""
    server = start_server(workers=1, env={"GUNICORN_CMD_ARGS": "--log-level debug"})
    sdk = sdk_key(server)
    telemetry = next(key for key in printed_keys(server) if key != sdk)
    made = server.request(
        "POST", "/api/keys", sdk, {"name": "glued", "kind": "custom", "scopes": ["site:read"]}
    )
    assert made.status == 201, made.body
    key = made.json()["key"]
    unknown = keyformat.new_key("ak_")[1]
    glued = [key + "0" * 40, key + "_backup", key + sdk, telemetry + unknown + key]
    requests = [
        *((f"/healthz?x={token}", {}, 200) for token in glued),
        *((f"/api/keys/{token}", basic(sdk), 404) for token in glued),
        *(("/healthz", {"User-Agent": token}, 200) for token in glued),
    ]
    for path, headers, expected in requests:
        assert send(server, "GET", path, headers) == expected, path[:24]
    server.stop()

    # The first start prints the starting keys once, on purpose; every other line counts.
    logs = "\n".join(line for line in server.output().splitlines() if "): ak_" not in line)
    assert logs.count('"GET /healthz') == 2 * len(glued)  # the access log has the lines
    assert logs.count("[DEBUG] GET /api/keys/") == len(glued)  # so has the error log
    assert not leaked(logs, [key, sdk, telemetry, unknown])
    # Each shown in the query, the path (access and error logs) and the User-Agent.
    shown = keyformat.shown(keyformat.identifier_of(key))
    assert logs.count(shown) == 4 * len(glued)
    # 40 digits are a token a key made elsewhere could be: shown as one is.
    assert logs.count(f"{shown}imported:") >= 4
    assert logs.count(f"{shown}_backup") == 4


# A format that logs every place the test puts the key, as an operator might write it.
EVERY_HEADER = '%(h)s "%(r)s" %(s)s "%(a)s" "%(f)s" "%({x-customer-token}i)s" "%({x-request-id}i)s"'


def test_no_imported_key_in_any_log_wherever_a_client_puts_it(start_server):
    """A key made elsewhere (32 random characters, no prefix, no checksum) has no shape
    to be found by: every token a key could be is masked, and the key is shown in the log
    as the key's list shows it."""
    server = start_server(
        workers=1,
        env={"GUNICORN_CMD_ARGS": f"--log-level debug --access-logformat '{EVERY_HEADER}'"},
    )
    sdk = sdk_key(server)
    imported = {}
    for name, key in {
        "plain": secrets.token_urlsafe(24),  # 32 characters of base64url
        "hex": secrets.token_hex(16),
        "prefixed": "sk_live_" + secrets.token_urlsafe(24),
    }.items():
        body = {"keys": [{"key": key, "name": name, "kind": "custom", "scopes": ["site:read"]}]}
        answer = server.request("POST", "/api/keys/import", sdk, body)
        assert answer.status == 201, answer.body
        imported[key] = answer.json()["keys"][0]["key"]
    for key in imported:
        places = [
            ("GET", f"/api/keys/{key}", basic(sdk)),
            ("GET", f"/api/keys?name={key}&page_size=1", basic(sdk)),
            ("GET", f"/api/keys/{escaped(key)}", basic(sdk)),
            ("GET", "/api/keys", bearer(key) | {"User-Agent": f"client/1.0 {key}"}),
            ("GET", "/healthz", {"Referer": f"https://example.com/?token={key}"}),
            ("GET", "/healthz", {"X-Customer-Token": key, "X-Request-Id": f"id-{key}-1"}),
            ("GET", f"/no/such/{key}", basic(key)),
        ]
        for method, path, headers in places:
            assert send(server, method, path, headers) < 500, path
    server.stop()
    logs = server.output()
    for key, shown in imported.items():
        secret = key.removeprefix("sk_live_")
        for piece in (secret[i : i + 8] for i in range(len(secret) - 7)):
            assert piece not in logs, piece[:2]
        assert shown in logs  # the log names the key as its list does
    # The log stays readable: the paths, the user agent's product, the header's frame.
    assert "GET /api/keys/" in logs and "client/1.0 " in logs and '"id-' in logs

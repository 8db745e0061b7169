"""The mixed run of bench/memory.py: every endpoint but /mcp, as a client of each would ask
it, a round at a time. A round makes what it asks about (a key, an identity, a webhook
endpoint) and removes it again, so that rounds repeat without the database growing
beyond the keys it rotates and imports and their audit events."""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Ask = Callable[..., tuple[int, dict | None]]


def asker(port: int, key: str, answers: Counter) -> Ask:
    """A function that sends one request (as the key's holder unless `auth` is given) and
    counts its answer's status in `answers`."""
    basic = "Basic " + base64.b64encode(f"{key}:".encode()).decode()

    def ask(
        method: str,
        path: str,
        body: object = None,
        auth: str | None = basic,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict | None]:
        sent = {"Content-Type": "application/json", **(headers or {})}
        if auth:
            sent["Authorization"] = auth
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            payload = None if body is None else json.dumps(body).encode()
            connection.request(method, path, body=payload, headers=sent)
            answer = connection.getresponse()
            text = answer.read()
        finally:
            connection.close()
        answers[answer.status] += 1
        kind = answer.getheader("Content-Type", "")
        return answer.status, json.loads(text) if "json" in kind and text else None

    return ask


def receiver() -> tuple[str, Callable[[], None]]:
    """A webhook receiver on this machine answering 204 to every delivery: its URL and the
    function that stops it."""

    class Received(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Received)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_port}/hook", stop


def mixed_round(ask: Ask, key: str, hook: str, number: int) -> None:
    """Every endpoint but /mcp once or more (43 requests)."""
    ask("GET", "/healthz", auth=None)
    ask("GET", "/api/organization")
    _, endpoint = ask("POST", "/api/webhooks", {"url": hook, "events": ["key.created"]})
    policy = {"rate_limit": {"requests": 1000, "seconds": 60}}
    made = {"name": f"mixed {number}", "kind": "custom", "scopes": ["monitor:read"]}
    made |= policy | {"quota": {"requests": 1000, "period": "month"}}
    retry = {"Idempotency-Key": secrets.token_hex(16)}
    _, created = ask("POST", "/api/keys", made, headers=retry)
    ask("POST", "/api/keys", made, headers=retry)  # the retry: the stored answer again
    reference = created["key"][:15]
    ask("GET", "/api/keys")
    ask("GET", "/api/keys?page=2&page_size=5&state=active")
    ask("GET", "/api/keys?metadata%5Bteam%5D=ops&unused_since=2999-01-01T00:00:00Z")
    ask("GET", f"/api/keys/{reference}")
    ask("PUT", f"/api/keys/{reference}", {"name": f"renamed {number}", "metadata": {"team": "ops"}})
    ask("POST", f"/api/keys/{reference}/quota", {"add": 5})
    ask("GET", f"/api/keys/{reference}/usage")
    new = {"Authorization": f"Bearer {created['key']}"}
    ask("GET", "/api/forward-auth?scope=monitor:read", auth=None, headers=new)
    ask("POST", "/api/forward-auth?scope=monitor:read", auth=None, headers=new)
    ask("POST", "/api/introspect", {"token": created["key"]})
    _, rotated = ask("POST", f"/api/keys/{reference}/rotate", {"grace_seconds": 0})
    ask("DELETE", f"/api/keys/{rotated['key'][:15]}")
    brought = {"key": "sk_live_" + secrets.token_urlsafe(30), "name": f"imported {number}"}
    brought |= {"kind": "custom", "scopes": ["monitor:read"]}
    ask("POST", "/api/keys/import", {"keys": [brought]})
    ask("POST", "/api/revoke", {"keys": ["sk_live_" + secrets.token_urlsafe(30)]}, auth=None)
    identity = {"external_id": f"customer-{number}-{secrets.token_hex(4)}"} | policy
    identity |= {"quota": {"requests": 1000, "period": "month"}}
    _, held = ask("POST", "/api/identities", identity | {"name": "Customer"})
    ask("GET", "/api/identities")
    ask("GET", f"/api/identities/{held['id']}")
    ask("POST", f"/api/identities/{held['id']}/quota", {"add": 10})
    ask("PUT", f"/api/identities/{held['id']}", {"name": "Renamed", "quota": None})
    ask("GET", f"/api/identities/{held['id']}/usage")
    ask("GET", f"/api/keys?identity={held['id']}")
    ask("DELETE", f"/api/identities/{held['id']}")
    ask("GET", "/api/webhooks")
    ask("GET", f"/api/webhooks/{endpoint['id']}")
    ask("PUT", f"/api/webhooks/{endpoint['id']}", {"description": "mixed"})
    ask("POST", f"/api/webhooks/{endpoint['id']}/secret")
    _, deliveries = ask("GET", f"/api/webhooks/{endpoint['id']}/deliveries")
    for delivery in deliveries["data"][:1]:  # the key.created of this round's create
        ask("POST", f"/api/webhooks/{endpoint['id']}/deliveries/{delivery['id']}/retry")
    ask("DELETE", f"/api/webhooks/{endpoint['id']}")
    ask("GET", "/api/audit")
    ask("GET", "/api/keys", auth=None)  # the 401
    ask("GET", "/openapi.json", auth=None)
    ask("GET", "/", auth=None)
    ask("GET", "/docs", auth=None)
    ask("GET", "/docs/start.js", auth=None)
    ask("GET", "/docs/index.css", auth=None)
    ask("GET", "/page/page.js", auth=None)
    ask("GET", "/metrics", auth=None)


def mcp_round(ask: Ask, key: str) -> None:
    """/mcp: its tools listed, then a key read through get_key."""
    mcp = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    call = {"name": "get_key", "arguments": {"key": key[:15]}}
    ask("POST", "/mcp", listing, auth=None, headers=mcp)
    ask("POST", "/mcp", listing | {"method": "tools/call", "params": call}, auth=None, headers=mcp)

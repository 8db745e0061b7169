"""The Flask extension remote (app/extension.py): examples/monitors.py's views in a Flask
application of their own, checking keys with POST /api/introspect of a real gunicorn,
each answer kept cache_seconds, for the managing key's organization; and the embedded way
answering another organization's key exactly as the remote way does (docs/design.md,
"The Flask extension")."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from werkzeug.middleware.proxy_fix import ProxyFix

from app.domain.keyformat import identifier_of
from app.extensions import db
from examples import monitors
from tests.server.conftest import Server, free_port, serving
from tests.server.test_gunicorn import sdk_key

CACHE_SECONDS = 1.0


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Server]:
    """One server for the module's tests: each makes keys and organizations of its own, and
    none comes near the service's limits."""
    with serving(tmp_path_factory, "remote", 2) as server:
        yield server


@pytest.fixture
def host(service):
    url = f"http://127.0.0.1:{service.port}"
    app = monitors.remote(url, sdk_key(service), cache_seconds=CACHE_SECONDS)
    return app.test_client()


def make(service, scopes) -> str:
    body = {"name": "monitor reader", "kind": "custom", "scopes": list(scopes)}
    return service.request("POST", "/api/keys", sdk_key(service), body).json()["key"]


def test_an_organization_named_outside_ascii_is_carried_by_its_name(service):
    """A real gunicorn sends header values as Latin-1 only: the name travels percent-encoded
    in forward auth's X-Api-Key-Organization and arrives whole in current_key."""
    made = json.loads(service.flask("org", "create", "Ωmega café", "--json").stdout)
    sdk = next(key["key"] for key in made["keys"] if key["kind"] == "sdk_integration")
    host = monitors.remote(f"http://127.0.0.1:{service.port}", sdk).test_client()
    answer = host.get("/monitors", auth=(sdk, ""))
    assert answer.status_code == 200, answer.json
    assert answer.json["organization"] == "Ωmega café"


def test_keys_are_checked_by_the_service(service, host):
    reader = make(service, ["monitor:read"])
    allowed = host.get("/monitors", auth=(reader, ""))
    assert allowed.status_code == 200
    assert allowed.json["seen_by"] == identifier_of(reader)
    assert allowed.json["organization"] == "default"  # the first start's, the managing key's
    refused = host.post("/monitors", json={"url": "x"}, auth=(reader, ""))
    assert (refused.status_code, refused.json["code"]) == (403, "forbidden")
    assert refused.mimetype == "application/problem+json"
    for authorization in (None, "Bearer ak_not_a_key", "Basic !!"):
        headers = {"Authorization": authorization} if authorization else {}
        answer = host.get("/monitors", headers=headers)
        assert (answer.status_code, answer.json["code"]) == (401, "unauthorized")
        assert answer.headers["WWW-Authenticate"] == 'Basic realm="api"'


def test_another_organizations_key_is_401_as_the_embedded_way_answers_it(service, host):
    made = json.loads(service.flask("org", "create", "globex", "--json").stdout)
    foreign = [key["key"] for key in made["keys"]]
    embedded = monitors.embedded({"SQLALCHEMY_DATABASE_URI": service.database}, "default")
    try:
        for key in foreign:
            remote = host.get("/monitors", auth=(key, ""))
            assert (remote.status_code, remote.json["code"]) == (401, "unauthorized")
            answer = embedded.test_client().get("/monitors", auth=(key, ""))
            assert (answer.status_code, answer.json) == (401, remote.json)
            assert answer.headers["WWW-Authenticate"] == remote.headers["WWW-Authenticate"]
    finally:
        with embedded.app_context():
            db.engine.dispose()


def test_a_deleted_key_works_at_most_cache_seconds_longer(service, host):
    reader = make(service, ["monitor:read"])
    assert host.get("/monitors", auth=(reader, "")).status_code == 200
    assert service.request("DELETE", f"/api/keys/{reader}", sdk_key(service)).status == 204
    assert host.get("/monitors", auth=(reader, "")).status_code == 200  # the cached answer
    time.sleep(CACHE_SECONDS + 0.2)
    assert host.get("/monitors", auth=(reader, "")).status_code == 401


def test_the_cache_holds_at_most_cache_size_keys(service):
    url = f"http://127.0.0.1:{service.port}"
    app = monitors.remote(url, sdk_key(service))
    app.extensions["api_keys"].cache_size = 2
    client = app.test_client()
    for key in [make(service, ["monitor:read"]) for _ in range(4)]:
        assert client.get("/monitors", auth=(key, "")).status_code == 200
    assert len(app.extensions["api_keys"].cache) == 2


def test_a_service_that_does_not_answer_is_503(org):
    host = monitors.remote(f"http://127.0.0.1:{free_port()}", org.sdk).test_client()
    answer = host.get("/monitors", auth=(org.sdk, ""))
    assert (answer.status_code, answer.json["code"]) == (503, "unavailable")
    assert answer.headers["Retry-After"] == "1"


def test_an_answer_that_is_not_introspections_is_503(service):
    url = f"http://127.0.0.1:{service.port}"
    app = monitors.remote(url, sdk_key(service))
    app.extensions["api_keys"].url = url + "/api/forward-auth"  # a wrong URL: 204, no body
    answer = app.test_client().get("/monitors", auth=(sdk_key(service), ""))
    assert (answer.status_code, answer.json["code"]) == (503, "unavailable")


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"active": true}',
        b'{"active": true, "scope": 7, "client_id": "ak_x", "kind": "custom"}',
        b'{"active": true, "scope": "monitor:read", "client_id": "ak_x", "kind": "custom"}',
    ],
    ids=["array", "no-facts", "scope-not-text", "no-organization-header"],
)
def test_an_answer_of_the_wrong_shape_is_503_not_500(org, body):
    """A service that answers 200 with something else than introspection's facts (or a
    forward auth without its organization header) is as good as none: 503."""

    class Stub(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"] or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    stub = HTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{stub.server_port}"
        host = monitors.remote(url, org.sdk).test_client()
        answer = host.get("/monitors", auth=(org.sdk, ""))
        assert (answer.status_code, answer.json["code"]) == (503, "unavailable")
    finally:
        stub.shutdown()
        stub.server_close()


def test_a_key_with_allowed_ips_is_judged_at_the_hosts_client_address(service):
    """The host sends introspection its request's remote_addr (after its own ProxyFix) as
    client_ip, and keeps each answer for the key and that address: the same key, a moment
    later, from another address, is refused as the service refuses it."""
    url = f"http://127.0.0.1:{service.port}"
    app = monitors.remote(url, sdk_key(service), cache_seconds=CACHE_SECONDS)
    app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1)
    host = app.test_client()
    body = {"name": "placed", "kind": "custom", "scopes": ["monitor:read"]}
    body["allowed_ips"] = ["192.0.2.0/24"]
    placed = service.request("POST", "/api/keys", sdk_key(service), body).json()["key"]

    def from_(address: str):
        return host.get("/monitors", auth=(placed, ""), headers={"X-Forwarded-For": address})

    assert from_("192.0.2.7").status_code == 200
    refused = from_("198.51.100.1")
    assert (refused.status_code, refused.json["code"]) == (403, "ip_not_allowed")
    assert refused.mimetype == "application/problem+json"
    assert from_("192.0.2.8").status_code == 200
    assert from_("198.51.100.1").status_code == 403  # the cached refusal
    # A refusal the service explains is the service's, the 401 of a disabled key included.
    update = {"enabled": False}
    assert service.request("PUT", f"/api/keys/{placed}", sdk_key(service), update).status == 200
    time.sleep(CACHE_SECONDS + 0.2)
    disabled = from_("192.0.2.7")
    assert (disabled.status_code, disabled.json["code"]) == (401, "disabled_key")
    assert disabled.headers["WWW-Authenticate"] == 'Basic realm="api"'


def test_a_key_past_its_own_rate_limit_is_the_services_429_with_retry_after(start_server):
    """Each answer not kept (cache_seconds=0) is a use of the key, counted by one worker."""
    service = start_server(workers=1)
    host = monitors.remote(f"http://127.0.0.1:{service.port}", sdk_key(service), 0).test_client()
    body = {"name": "limited", "kind": "custom", "scopes": ["monitor:read"]}
    body["rate_limit"] = {"requests": 1, "seconds": 60}
    limited = service.request("POST", "/api/keys", sdk_key(service), body).json()["key"]
    assert host.get("/monitors", auth=(limited, "")).status_code == 200
    refused = host.get("/monitors", auth=(limited, ""))
    assert (refused.status_code, refused.json["code"]) == (429, "rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60

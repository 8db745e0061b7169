"""POST /api/introspect as an RFC 7662 client that nobody here wrote asks it: Authlib's
OAuth 2.0 client (its requests integration), authenticating with client_secret_basic
(the key as client id, an empty secret), against a real gunicorn."""

from __future__ import annotations

import pytest

from app.domain import keyformat
from tests.server.test_gunicorn import printed_keys, sdk_key

requests_client = pytest.importorskip(
    "authlib.integrations.requests_client", reason="Authlib is a dev dependency: make install"
)


def test_authlibs_introspection_reads_active_and_inactive_keys(start_server):
    server = start_server(workers=2)
    sdk = sdk_key(server)
    telemetry = next(key for key in printed_keys(server) if key != sdk)
    url = f"http://127.0.0.1:{server.port}/api/introspect"
    with requests_client.OAuth2Session(
        client_id=sdk, client_secret="", token_endpoint_auth_method="client_secret_basic"
    ) as session:
        active = session.introspect_token(url, token=telemetry, token_type_hint="api_key")
        assert active.status_code == 200, active.text
        assert active.headers["Cache-Control"] == "no-store"
        facts = active.json()
        assert facts["active"] is True
        assert (facts["client_id"], facts["scope"], facts["kind"]) == (
            keyformat.identifier_of(telemetry),
            "monitor:telemetry",
            "telemetry",
        )
        assert facts["token_type"] == "api_key" and isinstance(facts["iat"], int)
        assert "exp" not in facts

        made = server.request(
            "POST", "/api/keys", sdk, {"name": "gone", "kind": "custom", "scopes": ["site:read"]}
        ).json()["key"]
        assert server.request("DELETE", f"/api/keys/{made}", sdk).status == 204
        for token in (made, "ak_not_a_key", keyformat.new_key("ak_")[1]):
            inactive = session.introspect_token(url, token=token)
            assert (inactive.status_code, inactive.json()) == (200, {"active": False})

    with requests_client.OAuth2Session(client_id="ak_wrong", client_secret="") as stranger:
        refused = stranger.introspect_token(url, token=telemetry)
        assert refused.status_code == 401
        assert refused.json()["code"] == "unauthorized"

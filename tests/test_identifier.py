"""Every key object carries `identifier`: the key's public part, what paths and lists name it
by (for a native key, the full key but its secret and checksum), so that no client cuts it
off a key itself."""

from __future__ import annotations

from app.domain import keyformat
from tests.test_imports import STRIPE_LIKE, bring, entry
from tests.test_mcp import call

BODY = {"name": "ci", "kind": "custom", "scopes": ["site:read"]}


def test_the_created_key_names_its_identifier_and_every_read_shows_it(client, org):
    made = client.post("/api/keys", json=BODY, auth=(org.sdk, "")).json
    identifier = made["identifier"]
    assert identifier == made["key"][: -keyformat.TAIL_LENGTH]
    assert identifier == keyformat.identifier_of(made["key"])
    got = client.get(f"/api/keys/{identifier}", auth=(org.sdk, ""))
    assert (got.status_code, got.json["identifier"]) == (200, identifier)
    assert got.json["key"] == identifier + "..."
    listed = client.get("/api/keys?page_size=200", auth=(org.sdk, "")).json["data"]
    assert identifier in [key["identifier"] for key in listed]
    by_tool = call(client, org.sdk, "get_key", {"key": identifier})["structuredContent"]
    assert by_tool["identifier"] == identifier
    rotated = client.post(f"/api/keys/{identifier}/rotate", json={}, auth=(org.sdk, "")).json
    assert rotated["identifier"] == keyformat.identifier_of(rotated["key"])


def test_an_imported_key_shows_the_identifier_it_is_stored_under(client, org):
    answer = bring(client, org.sdk, entry(STRIPE_LIKE))
    assert answer.status_code == 201, answer.json
    [imported] = answer.json["keys"]
    assert imported["identifier"].startswith(keyformat.IMPORTED_PREFIX)
    assert STRIPE_LIKE not in imported["identifier"]
    got = client.get(f"/api/keys/{imported['identifier']}", auth=(org.sdk, ""))
    assert (got.status_code, got.json["key"]) == (200, imported["key"])
    assert got.json["key"].startswith("sk_live_") and STRIPE_LIKE[8:12] not in got.json["key"]

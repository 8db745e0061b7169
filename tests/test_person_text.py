"""A person's text is stored and shown as written, so a full key of this service in it is
refused (422 naming the field): a key's name and metadata, an identity's name, external id
and metadata, a webhook endpoint's description, an import entry's fields, an organization's
name. Nothing is written."""

from __future__ import annotations

import pytest

from app.domain import keyformat
from tests.test_webhooks import URL

KEY = keyformat.new_key("ak_")[1]
# The key alone, and the key in a sentence (as someone pastes it).
TEXTS = [KEY, f"the key {KEY} of the CI job"]


def refused(answer, field: str) -> None:
    assert answer.status_code == 422, answer.json
    assert field in answer.json["errors"], answer.json
    assert KEY not in answer.get_data(as_text=True)


@pytest.mark.parametrize("text", TEXTS, ids=["alone", "in a sentence"])
def test_a_keys_name_and_metadata(client, org, make_key, text):
    body = {"name": "fine", "kind": "custom", "scopes": ["monitor:read"]}
    refused(client.post("/api/keys", json=body | {"name": text}, auth=(org.sdk, "")), "name")
    metadata = {"metadata": {"note": text}}
    refused(client.post("/api/keys", json=body | metadata, auth=(org.sdk, "")), "metadata")
    path = f"/api/keys/{make_key()}"
    refused(client.put(path, json={"name": text}, auth=(org.sdk, "")), "name")
    refused(client.put(path, json=metadata, auth=(org.sdk, "")), "metadata")
    names = [key["name"] for key in client.get("/api/keys", auth=(org.sdk, "")).json["data"]]
    assert not any(KEY in name for name in names)


@pytest.mark.parametrize("text", TEXTS, ids=["alone", "in a sentence"])
@pytest.mark.parametrize("field", ["name", "external_id", "metadata"])
def test_an_identitys_name_external_id_and_metadata(client, org, text, field):
    value = {"note": text} if field == "metadata" else text.strip()
    body = {"external_id": "customer-42", field: value}
    refused(client.post("/api/identities", json=body, auth=(org.sdk, "")), field)
    made = client.post("/api/identities", json={"external_id": "c-1"}, auth=(org.sdk, ""))
    assert made.status_code == 201, made.json
    path = f"/api/identities/{made.json['id']}"
    refused(client.put(path, json={field: value}, auth=(org.sdk, "")), field)


@pytest.mark.parametrize("app_config", [{"WEBHOOK_ALLOW_PRIVATE": True}])
@pytest.mark.parametrize("text", TEXTS, ids=["alone", "in a sentence"])
def test_a_webhook_endpoints_description(client, org, text):
    body = {"url": URL, "events": ["key.created"]}
    created = client.post("/api/webhooks", json=body | {"description": text}, auth=(org.sdk, ""))
    refused(created, "description")
    made = client.post("/api/webhooks", json=body, auth=(org.sdk, ""))
    assert made.status_code == 201, made.json
    path = f"/api/webhooks/{made.json['id']}"
    refused(client.put(path, json={"description": text}, auth=(org.sdk, "")), "description")


def test_an_import_entrys_name(client, org):
    entry = {"name": KEY, "kind": "custom", "scopes": ["monitor:read"], "key": "x" * 32}
    answer = client.post("/api/keys/import", json={"keys": [entry]}, auth=(org.sdk, ""))
    refused(answer, "keys[0].name")


def test_an_organizations_name(runner):
    result = runner.invoke(args=["org", "create", KEY])
    assert result.exit_code != 0
    assert KEY not in result.output


def test_text_that_only_looks_long_is_kept(client, org):
    """A long run that holds no key (a digest, a mistyped key) is a person's text."""
    mistyped = KEY[:-1] + ("A" if KEY[-1] != "A" else "B")
    body = {"name": mistyped, "kind": "custom", "scopes": ["monitor:read"]}
    made = client.post(
        "/api/keys", json=body | {"metadata": {"sha": "ab" * 32}}, auth=(org.sdk, "")
    )
    assert made.status_code == 201, made.json

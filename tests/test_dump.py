"""The bodies of get, update and list come from dump_key and dump_page: they must send
exactly what the output schemas' own dump sends, field for field, in order."""

from __future__ import annotations

from sqlalchemy import select

from app.domain.credentials import Caller
from app.domain.scopes import ALL
from app.extensions import db
from app.keys import bodies, schemas, service
from app.storage.models import Organization


def test_keys_and_pages_dump_as_the_schemas_do(app, client, org, make_key):
    make_key(kind="custom", scopes=("site:read", "monitor:read"), name="custom")
    client.get("/api/keys", auth=(org.sdk, ""))  # last_used written
    # A key with every field set: made by a key, with a policy, a quota and an identity, rotated.
    identity = {"external_id": "customer-1"}
    assert client.post("/api/identities", json=identity, auth=(org.sdk, "")).status_code == 201
    made = client.post(
        "/api/keys",
        json={
            "name": "every field",
            "kind": "custom",
            "scopes": ["monitor:read"],
            "expires_at": "2999-01-01T00:00:00Z",
            "allowed_ips": ["127.0.0.1", "10.0.0.0/8"],
            "rate_limit": {"requests": 100, "seconds": 60},
            "metadata": {"team": "a", "owner": "b"},
            "quota": {"requests": 1000, "period": "month"},
            "identity": "customer-1",
        },
        auth=(org.sdk, ""),
    ).json["key"]
    client.get("/api/forward-auth?scope=monitor:read", auth=(made, ""))  # last_used, a use
    rotated = client.post(
        f"/api/keys/{made}/rotate", json={"grace_seconds": 60}, auth=(org.sdk, "")
    )
    assert rotated.status_code == 201, rotated.json
    with app.app_context():
        organization_id = db.session.scalar(
            select(Organization.id).where(Organization.name == org.name)
        )
        caller = Caller(0, organization_id, "ak_test0000", "sdk_integration", ALL)
        page = service.list_keys(caller, page=1, page_size=50)
        assert len(page.data) == 5
        every = {
            name
            for key in page.data
            for name, value in schemas.key_output.dump(key).items()
            if value not in (None, [], {})
        }
        assert every == set(schemas.key_output.dump_fields)  # each field set in some key
        fast, schema = bodies.dump_page(page), schemas.key_page.dump(page)
        assert list(fast.items()) == list(schema.items())
        for key in page.data:
            assert list(bodies.dump_key(key).items()) == list(schemas.key_output.dump(key).items())


def test_a_body_is_compact_utf8_json_in_the_schemas_field_order(client, org):
    key = client.post(
        "/api/keys",
        json={"name": "clé", "kind": "custom", "scopes": ["site:read"]},
        auth=(org.sdk, ""),
    ).json["key"]
    body = client.get(f"/api/keys/{key}", auth=(org.sdk, "")).get_data(as_text=True)
    assert body.startswith('{"key":"') and body.endswith("}\n")
    assert ", " not in body and '": ' not in body
    assert '"name":"clé"' in body
    order = [f'"{name}":' for name in schemas.key_output.dump_fields]
    assert sorted(order, key=body.index) == order

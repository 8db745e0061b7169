"""The bodies of get, update and list come from functions built once from the output
schemas: they must send exactly what the schemas' own dump sends, field for field, in order."""

from __future__ import annotations

import pytest
from marshmallow import Schema, fields
from sqlalchemy import select

from app.credentials import Caller
from app.extensions import db
from app.keys import schemas, service
from app.models import Organization
from app.scopes import ALL


def test_keys_and_pages_dump_as_the_schemas_do(app, client, org, make_key):
    make_key(kind="custom", scopes=("site:read", "monitor:read"), name="custom")
    client.get("/api/keys", auth=(org.sdk, ""))  # last_used written: one key has every field
    with app.app_context():
        organization_id = db.session.scalar(
            select(Organization.id).where(Organization.name == org.name)
        )
        caller = Caller(0, organization_id, "ak_test0000", "sdk_integration", ALL)
        page = service.list_keys(caller, page=1, page_size=50)
        assert len(page.data) == 3
        assert any(key.last_used for key in page.data)
        fast, schema = schemas.dump_page(page), schemas.key_page.dump(page)
        assert list(fast.items()) == list(schema.items())
        for key in page.data:
            assert list(schemas.dump_key(key).items()) == list(schemas.key_output.dump(key).items())


def test_a_field_the_fast_dump_cannot_read_is_refused_when_the_module_loads():
    class Odd(Schema):
        when = fields.DateTime()

    with pytest.raises(TypeError, match="DateTime field 'when'"):
        schemas._dumper(Odd())


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

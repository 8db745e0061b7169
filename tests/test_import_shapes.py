"""What POST /api/keys/import answers for a body of the wrong shape: 422 naming the
entry or field, never a 500, whatever JSON a client sends."""

from __future__ import annotations

import pytest

WRONG = [1, 1.5, "x", None, [], [1], {}, True, {"a": [1]}]
FIELDS = [
    "key",
    "key_sha256",
    "identifier",
    "name",
    "kind",
    "scopes",
    "expires_at",
    "created",
    "last_used",
    "enabled",
    "allowed_ips",
    "rate_limit",
    "quota",
    "metadata",
    "identity",
]


def bring(client, caller: str, body):
    return client.post("/api/keys/import", json=body, auth=(caller, ""))


@pytest.mark.parametrize("value", WRONG, ids=repr)
def test_an_entry_that_is_not_an_object_is_422_naming_it(client, org, value):
    if isinstance(value, dict):
        pytest.skip("an object is an entry")
    good = {
        "key": "fresh-key-0123456789",
        "name": "n",
        "kind": "custom",
        "scopes": ["monitor:read"],
    }
    response = bring(client, org.sdk, {"keys": [good, value]})
    assert response.status_code == 422, response.get_data(as_text=True)
    assert response.json["code"] == "validation_error"
    assert list(response.json["errors"]) == ["keys[1]"]


@pytest.mark.parametrize("value", [v for v in WRONG if v != [1]], ids=repr)
def test_keys_that_is_not_a_list_is_422_naming_it(client, org, value):
    response = bring(client, org.sdk, {"keys": value})
    assert response.status_code == 422, response.get_data(as_text=True)
    assert list(response.json["errors"]) == ["keys"]


# A valid entry, given one field of another shape by each test.
ENTRY = {"key": "fresh-key-0123456789", "name": "n", "kind": "custom", "scopes": ["monitor:read"]}


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", WRONG, ids=repr)
def test_a_field_of_the_wrong_type_is_never_a_500(client, org, field, value):
    response = bring(client, org.sdk, {"keys": [ENTRY | {field: value}]})
    assert response.status_code in (201, 422), response.get_data(as_text=True)
    if response.status_code == 422:
        assert all(name.startswith("keys[0]") for name in response.json["errors"]), response.json


def test_the_reported_body_is_422_naming_its_entry(client, org):
    response = bring(client, org.sdk, {"keys": [1]})
    assert response.status_code == 422, response.get_data(as_text=True)
    assert response.json["errors"] == {"keys[0]": ["Must be a JSON object."]}


NESTED = {
    "identity": [{"external_id": 5}, {"id": [], "external_id": None}, {"external_id": {}}],
    "rate_limit": [{"requests": "x", "seconds": []}, {"requests": {}, "seconds": 1.5}],
    "quota": [{"requests": [1], "period": 1}, {"requests": True, "period": {}}],
    "metadata": [{"a": 1}, {"a": None}, {"a": {"b": "c"}}, {"": "x"}],
}


@pytest.mark.parametrize(
    ("field", "value"), [(f, v) for f, values in NESTED.items() for v in values], ids=repr
)
def test_an_object_whose_members_have_the_wrong_type_is_422_naming_the_entry(
    client, org, field, value
):
    response = bring(client, org.sdk, {"keys": [ENTRY | {field: value}]})
    assert response.status_code == 422, response.get_data(as_text=True)
    assert all(name.startswith("keys[0]") for name in response.json["errors"]), response.json
